"""gpu_release through its entry point: arguments, the gate suboptions, check mode, run_command patched."""
import json
import os

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import gpu_release

from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import UUID

PS = ' '.join(['ps', '-ww', '-eo', 'pid=,ppid=,pgid=,stat=,args='])


@pytest.fixture
def host(monkeypatch):
    """One container (inner commands after `pct exec 101 --`) with an SGLang worker that dies on SIGTERM."""
    state = dict(alive=True, calls=[])

    def run_command(self, argv, **kwargs):
        inner = argv[3:]
        if inner[:4] == ['/usr/bin/pct', 'exec', '101', '--']:
            inner = inner[4:]
        state['calls'].append(inner)
        if inner[0] == 'ps':
            rows = ['1 0 1 Ss /sbin/init', '7 0 7 R ' + PS, '%d 1 1 S python3 -m ansible' % os.getpid()]
            if state['alive']:
                rows.append('812 1 812 Sl sglang::scheduler_TP0')
            return 0, '\n'.join(rows) + '\n', ''
        if inner[0] == 'kill':
            state['alive'] = False
            return 0, '', ''
        if inner[0] == 'ls':
            return 0, 'nvidia0\nnvidiactl\n', ''
        if inner[0] == 'fuser':
            return 1, '', ''
        used = 81920 if state['alive'] else 0
        return 0, '0, %s, %d, 143771\n' % (UUID, used), ''

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, required=False: '/usr/bin/' + name)
    return state


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        gpu_release.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_release_in_pct_container(host, capsys):
    code, out = run_module(capsys, dict(target='pct', vmid=101, gate=dict(expected_count=1)))
    assert code == 0 and out['changed'] is True
    assert out['killed'] == [dict(pid=812, cmdline='sglang::scheduler_TP0', signal='TERM',
                                  reason='matches a server pattern')]
    assert ['kill', '-s', 'TERM', '--', '812'] in host['calls']
    assert out['gate']['passed'] is True and out['kill_to_pass_s'] is not None
    assert out['target'] == 'CT 101'


def test_second_run_is_unchanged(host, capsys):
    host['alive'] = False
    code, out = run_module(capsys, dict(target='pct', vmid=101))
    assert code == 0 and out['changed'] is False and out['killed'] == []


def test_check_mode_kills_nothing(host, capsys):
    code, out = run_module(capsys, dict(_ansible_check_mode=True, _ansible_diff=True))
    assert code == 0 and out['changed'] is True and host['alive'] is True
    assert not any(c[0] == 'kill' for c in host['calls'])
    assert [k['pid'] for k in out['killed']] == [812] and out['gate']['passed'] is False
    assert out['diff'] == dict(before='812 sglang::scheduler_TP0\n', after='')


def test_gate_suboptions_validated(host, capsys):
    code, out = run_module(capsys, dict(gate=dict(target='lxc')))
    assert code == 1 and 'container_name' in out['msg'] and host['calls'] == []


def test_gate_failure_fails_the_task(host, capsys):
    code, out = run_module(capsys, dict(target='pct', vmid=101, gate=dict(expected_count=8)))
    assert code == 1 and 'lists 1 GPU(s), 8 expected' in out['msg'] and out['changed'] is True
