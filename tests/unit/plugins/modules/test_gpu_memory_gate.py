"""gpu_memory_gate through its entry point: argument spec, exit/fail JSON, check mode, run_command patched."""
import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import gpu_memory_gate

from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import FIX, UUID


def line(used):
    return '0, %s, %s, 143771\n' % (UUID, used)


@pytest.fixture
def smi(monkeypatch):
    """Answers run_command from a list (the last answer repeats); records every argv."""
    state = dict(answers=[(0, line(0), '')], calls=[])

    def run_command(self, argv, **kwargs):
        state['calls'].append(argv)
        return state['answers'].pop(0) if len(state['answers']) > 1 else state['answers'][0]

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, required=False: '/usr/bin/' + name)
    return state


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        gpu_memory_gate.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_passes_unchanged(smi, capsys):
    smi['answers'] = [(0, line(8811), ''), (0, line(0), '')]
    code, out = run_module(capsys, dict(poll_interval=0.001, expected_count=1))
    assert code == 0 and out['changed'] is False and out['passed'] is True
    assert out['polls'] == 2 and out['gpus'] == [dict(index=0, uuid=UUID, used_mib=0, total_mib=143771)]
    assert smi['calls'][0][3:] == ['nvidia-smi', '--query-gpu=index,uuid,memory.used,memory.total',
                                   '--format=csv,noheader,nounits']


def test_check_mode_reads_exactly_once(smi, capsys):
    smi['answers'] = [(0, line(8811), ''), (0, line(0), '')]
    code, out = run_module(capsys, dict(_ansible_check_mode=True, timeout=60))
    assert code == 1 and out['failed'] is True and out['changed'] is False
    assert out['polls'] == 1 and 'read once (check mode)' in out['msg']
    assert len([c for c in smi['calls'] if '--query-gpu=index,uuid,memory.used,memory.total' in c]) == 1


def test_fails_closed_on_no_devices(smi, capsys):
    with open(os.path.join(FIX, 'bad_index.out')) as f:
        raw = f.read()
    smi['answers'] = [(6, raw, '')]
    code, out = run_module(capsys, dict(gpus=[7]))
    assert code == 1 and out['rc'] == 6 and out['raw'] == raw == 'No devices were found\n'
    assert 'sees no GPU' in out['msg']


def test_timeout_message_names_gpu(smi, capsys):
    smi['answers'] = [(0, line(81920), '')]
    code, out = run_module(capsys, dict(timeout=0.01, poll_interval=0.005, name_holders=False))
    assert code == 1 and 'GPU 0 still holds 81920 MiB (limit 0)' in out['msg'] and out['passed'] is False


def test_pct_needs_vmid(smi, capsys):
    code, out = run_module(capsys, dict(target='pct'))
    assert code == 1 and 'vmid' in out['msg'] and smi['calls'] == []
