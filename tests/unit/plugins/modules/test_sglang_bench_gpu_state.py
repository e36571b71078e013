"""sglang_bench_gpu_state through its entry point (and plugins/module_utils/_bench_gpu_state.py).

nvidia-smi is answered at the module's run_command with a real H200 capture (tests/fixtures/nvidia-smi-h200); the
argv it was asked to run is checked: built by _nvidia_smi, wrapped in coreutils timeout.
"""
import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_gpu_state as gs
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result
from ansible_collections.gpuserve.sglang.plugins.modules import sglang_bench_gpu_state

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'nvidia-smi-h200')
CLOCKS = '--query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_event_reasons.active,pstate'


def capture(name):
    with open(os.path.join(FIXTURES, name + '.out')) as handle:
        return handle.read()


def smi(monkeypatch, answers):
    """Answers the module's commands in order: (rc, out, err) each; returns the argv list asked for."""
    calls, answers = [], list(answers)

    def run_command(self, argv, **kwargs):
        calls.append((argv, kwargs))
        return answers.pop(0)

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, required=False, opt_dirs=None: '/usr/bin/' + name)
    return calls


def run(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        sglang_bench_gpu_state.main()
    return json.loads(capsys.readouterr().out)


def test_reads_a_real_h200_and_runs_every_query_under_a_timeout(monkeypatch, capsys):
    busy = capture('clocks_busy')
    calls = smi(monkeypatch, [(0, busy, ''), (0, '580.159.04\n', '')])
    out = run(capsys, dict(gpus=[0], nvidia_smi_timeout=3))
    assert not out.get('failed') and out['changed'] is False
    assert out['driver_version'] == '580.159.04'
    assert out['gpus'] == [{'index': 0, 'clocks_sm_mhz': 1980, 'clocks_mem_mhz': 3201, 'temperature_c': 36,
                            'power_w': 89.37, 'clocks_event_reasons': 0, 'clocks_event_reasons_hex': '0x0000000000000000',
                            'clocks_event_reason_names': [], 'pstate': 'P0'}]
    assert out['time'].endswith('Z') and out['time'][10] == 'T'
    assert [argv for argv, _kw in calls] == [
        ['/usr/bin/timeout', '--kill-after=1', '3s', 'nvidia-smi', CLOCKS, '--format=csv,noheader,nounits', '--id=0'],
        ['/usr/bin/timeout', '--kill-after=1', '3s', 'nvidia-smi', '--query-gpu=driver_version', '--format=csv,noheader',
         '--id=0'],
    ]
    assert all(kw['environ_update'] == {'LC_ALL': 'C'} for _argv, kw in calls)


def test_the_idle_capture_with_the_deprecated_twin_field_is_refused(monkeypatch, capsys):
    # clocks_idle was captured with clocks_throttle_reasons.active as well: eight fields, not the seven asked for
    smi(monkeypatch, [(0, capture('clocks_idle'), '')])
    out = run(capsys, {})
    assert out['failed'] is True and out['msg'].startswith('nvidia-smi clocks line has 8 fields, expected 7')


def test_defaults_read_every_gpu_with_ten_seconds(monkeypatch, capsys):
    calls = smi(monkeypatch, [(0, capture('clocks_busy'), ''), (0, '580.159.04\n', '')])
    out = run(capsys, dict(nvidia_smi='/opt/bin/nvidia-smi'))
    assert not out.get('failed')
    assert calls[0][0] == ['/usr/bin/timeout', '--kill-after=1', '10s', '/opt/bin/nvidia-smi', CLOCKS,
                           '--format=csv,noheader,nounits']


def test_a_hung_nvidia_smi_fails_with_the_timeout_diagnosis(monkeypatch, capsys):
    smi(monkeypatch, [(124, '', '')])
    out = run(capsys, {})
    assert out['failed'] is True and out['changed'] is False
    assert out['msg'].startswith('nvidia-smi clocks query did not answer within its timeout (rc 124)')


def test_an_unknown_field_fails_with_nvidia_smis_own_message(monkeypatch, capsys):
    with open(os.path.join(FIXTURES, 'bad_field.rc')) as handle:
        rc = int(handle.read())
    smi(monkeypatch, [(rc, capture('bad_field'), '')])
    out = run(capsys, {})
    assert out['failed'] is True
    assert out['msg'].startswith('nvidia-smi clocks query failed (rc 2): this nvidia-smi does not know a queried field')


def test_fewer_gpus_than_expected_fail_and_more_pass(monkeypatch, capsys):
    two = '0, 1980, 3201, 36, 89.37, 0x0, P0\n1, 1980, 3201, 35, 88.00, 0x0, P0\n'
    smi(monkeypatch, [(0, two, '')])
    out = run(capsys, dict(min_count=3))
    assert out['failed'] is True and out['msg'] == 'nvidia-smi answered for 2 GPUs, expected 3: %r' % two
    smi(monkeypatch, [(0, two, ''), (0, '580.159.04\n580.159.04\n', '')])
    out = run(capsys, dict(min_count=2))
    assert not out.get('failed') and [g['index'] for g in out['gpus']] == [0, 1]


@pytest.mark.parametrize('answer, message', [
    ((0, '0, [N/A], 3201, 36, 89.37, 0x0, P0\n', ''), 'nvidia-smi clocks line has a non-numeric field'),
    ((0, '', ''), 'nvidia-smi printed no GPU line for the clocks query'),
])
def test_an_unreadable_clocks_line_fails_closed(monkeypatch, capsys, answer, message):
    smi(monkeypatch, [answer])
    out = run(capsys, {})
    assert out['failed'] is True and out['changed'] is False and out['msg'].startswith(message)


@pytest.mark.parametrize('answer, message', [
    ((6, 'No devices were found\n', ''), 'nvidia-smi driver_version query failed (rc 6): nvidia-smi sees no GPU'),
    ((0, '580.159.04\n575.57.08\n', ''), "nvidia-smi driver_version query gave '580.159.04\\n575.57.08\\n': "
                                         "expected one version for every GPU"),
])
def test_the_driver_version_must_be_one_version(monkeypatch, capsys, answer, message):
    smi(monkeypatch, [(0, capture('clocks_busy'), ''), answer])
    out = run(capsys, {})
    assert out['failed'] is True and out['msg'].startswith(message)


def test_the_time_is_taken_before_the_query():
    order = []

    class Runner:
        def run(self, argv, timeout=None):
            order.append(('run', timeout))
            return Result(argv, 0, capture('clocks_busy') if len(order) == 2 else '580.159.04\n', '')

    params = {'gpus': [], 'nvidia_smi': 'nvidia-smi', 'nvidia_smi_timeout': 2.5, 'min_count': 0}
    result = gs.gpu_state(Runner(), params, now=lambda: order.append(('now', None)) or 'T0')
    assert result['time'] == 'T0' and order == [('now', None), ('run', 2.5), ('run', 2.5)]
