"""proxmox_lxc_gpu through its entry point, with proxmoxer (API path) or run_command (pct path) patched."""
import json

import pytest
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_client
from ansible_collections.gpuserve.sglang.plugins.modules import proxmox_lxc_gpu

DEVICES = ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools']
API = dict(vmid=101, node='pve1', devices=DEVICES, mode='0666', api_host='pve.example', api_user='root@pam',
           api_password='s3cret-pw', lock_retry_delay=0)


class ResourceException(Exception):
    """What proxmoxer raises: status code, PVE's message and per-field errors."""

    def __init__(self, status_code, content, errors=None):
        super().__init__('{0} {1}'.format(status_code, content))
        self.status_code = status_code
        self.status_message = 'Error'
        self.content = content
        self.errors = errors


class Done(Exception):
    pass


def run(args, check_mode=False):
    """Run the module; returns (failed, result)."""
    out = {}

    def exit_json(self, **kw):
        out.update(kw, failed=False)
        raise Done()

    def fail_json(self, **kw):
        out.update(kw, failed=True)
        raise Done()
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, 'exit_json', exit_json), \
            mock.patch.object(basic.AnsibleModule, 'fail_json', fail_json):
        with pytest.raises(Done):
            proxmox_lxc_gpu.main()
    return out['failed'], out


@pytest.fixture
def pve(monkeypatch):
    """A patched ProxmoxAPI: one stopped container with an unrelated dev0, tasks that end OK."""
    api = mock.MagicMock(name='ProxmoxAPI()')
    node = api.nodes.return_value
    ct = node.lxc.return_value
    state = {'config': {'hostname': 'ct101', 'dev0': '/dev/dri/renderD128,gid=104', 'digest': 'abc'},
             'status': 'stopped', 'puts': []}

    def put(**kw):
        state['puts'].append(dict(kw))
        for key in kw.pop('delete', '').split(','):
            state['config'].pop(key, None)
        kw.pop('digest', None)
        state['config'].update(kw)
    ct.config.get.side_effect = lambda: dict(state['config'])
    ct.config.put.side_effect = put
    ct.status.current.get.side_effect = lambda: {'status': state['status']}
    ct.status.reboot.post.return_value = 'UPID:pve1:0001:vzreboot:101:root@pam:'
    node.tasks.return_value.status.get.return_value = {'status': 'stopped', 'exitstatus': 'OK'}
    node.tasks.return_value.log.get.return_value = [{'n': 1, 't': 'TASK OK'}]
    ctor = mock.MagicMock(return_value=api)
    monkeypatch.setattr(_pve_client, 'ProxmoxAPI', ctor)
    monkeypatch.setattr(_pve_client, 'HAS_PROXMOXER', True)
    state.update(api=api, ct=ct, node=node, ctor=ctor)
    return state


def test_check_mode_reports_and_changes_nothing(pve):
    failed, res = run(API, check_mode=True)
    assert not failed and res['changed'] and res['method'] == 'api'
    assert pve['puts'] == []
    assert 'dev1: /dev/nvidia0,mode=0666' in res['diff']['after']
    assert res['diff']['before'] == 'dev0: /dev/dri/renderD128,gid=104\n'


def test_api_path_sets_entries_keeps_unrelated_and_passes_the_digest(pve):
    failed, res = run(API)
    assert not failed and res['changed'] and res['method'] == 'api'
    (put,) = pve['puts']
    assert put == {'dev1': '/dev/nvidia0,mode=0666', 'dev2': '/dev/nvidia1,mode=0666',
                   'dev3': '/dev/nvidiactl,mode=0666', 'dev4': '/dev/nvidia-uvm,mode=0666',
                   'dev5': '/dev/nvidia-uvm-tools,mode=0666', 'digest': 'abc'}
    assert pve['config']['dev0'] == '/dev/dri/renderD128,gid=104'
    assert res['restart_required'] is False and res['restarted'] is False
    kwargs = pve['ctor'].call_args[1]
    assert kwargs['user'] == 'root@pam' and kwargs['password'] == 's3cret-pw'


def test_second_run_is_unchanged(pve):
    run(API)
    failed, res = run(API)
    assert not failed and not res['changed']
    assert len(pve['puts']) == 1


def test_running_container_restarts_only_when_asked_and_only_on_change(pve):
    pve['status'] = 'running'
    failed, res = run(API)
    assert not failed and res['restart_required'] and not res['restarted']
    pve['ct'].status.reboot.post.assert_not_called()
    pve['config'] = {'digest': 'x'}
    failed, res = run(dict(API, restart=True))
    assert res['restarted'] and not res['restart_required']
    pve['ct'].status.reboot.post.assert_called_once()
    failed, res = run(dict(API, restart=True))
    assert not res['changed'] and not res['restarted']
    pve['ct'].status.reboot.post.assert_called_once()


def test_reboot_task_error_fails_with_exit_status(pve):
    pve['status'] = 'running'
    pve['node'].tasks.return_value.status.get.return_value = {'status': 'stopped', 'exitstatus': 'startup failed'}
    pve['node'].tasks.return_value.log.get.return_value = [{'n': 1, 't': 'lxc-start: no such device'},
                                                           {'n': 2, 't': 'TASK ERROR: startup failed'}]
    failed, res = run(dict(API, restart=True))
    assert failed
    assert 'ended in error: startup failed' in res['msg'] and 'lxc-start: no such device' in res['msg']


def test_lock_is_retried_then_succeeds(pve):
    calls = {'n': 0}
    original = pve['ct'].config.put.side_effect

    def put(**kw):
        calls['n'] += 1
        if calls['n'] < 3:
            raise ResourceException(500, 'CT is locked (backup)')
        return original(**kw)
    pve['ct'].config.put.side_effect = put
    failed, res = run(API)
    assert not failed and res['attempts'] == 3


def test_lock_retries_are_bounded(pve):
    pve['ct'].config.put.side_effect = ResourceException(500, 'CT is locked (backup)')
    failed, res = run(dict(API, lock_retries=2))
    assert failed
    assert 'CT is locked (backup)' in res['msg'] and 'still locked after 3 attempts' in res['msg']
    assert pve['ct'].config.put.call_count == 3


def test_token_refused_by_pve_explains_the_rule(pve):
    pve['ct'].config.put.side_effect = ResourceException(
        403, 'Permission check failed (configuring device passthrough is only allowed for root@pam)')
    args = dict(API, method='api', api_password=None, api_token_id='gpuserve', api_token_secret='tok-secret')
    failed, res = run(args)
    assert failed and 'only root@pam with a password set devN' in res['msg']
    kwargs = pve['ctor'].call_args[1]
    assert kwargs['token_name'] == 'gpuserve' and 'password' not in kwargs


def test_auto_with_a_token_uses_pct(pve, monkeypatch, tmp_path):
    pct = tmp_path / 'pct'
    pct.write_text('#!/bin/sh\n')
    pct.chmod(0o755)
    calls = []
    config = 'arch: amd64\ndev0: /dev/nvidia0,mode=0666\nhostname: ct101\ndigest: 1234\n'

    def run_command(self, argv, **kw):
        calls.append(argv[1:])
        if argv[1] == 'config':
            return 0, config, ''
        if argv[1] == 'status':
            return 0, 'status: stopped\n', ''
        return 0, '', ''
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    args = dict(API, api_password=None, api_token_id='gpuserve', api_token_secret='t', pct_path=str(pct))
    failed, res = run(args)
    assert not failed and res['method'] == 'pct' and res['changed']
    assert calls[-1][:2] == ['set', '101'] and '--dev1' in calls[-1] and '/dev/nvidia1,mode=0666' in calls[-1]
    pve['ctor'].assert_not_called()


def test_pct_missing_is_a_clear_failure(pve, tmp_path):
    failed, res = run(dict(API, method='pct', pct_path=str(tmp_path / 'nope')))
    assert failed and 'needs root@pam with a password' in res['msg'] and 'delegate_to' in res['msg']


def test_bad_device_path_never_reaches_pve(pve):
    failed, res = run(dict(API, devices=['nvidia0']))
    assert failed and 'not an absolute path under /dev' in res['msg']
    pve['ctor'].assert_not_called()


def test_expected_gpu_count(pve):
    failed, res = run(dict(API, expect_gpus=8))
    assert failed and 'expected 8 GPU device nodes' in res['msg'] and 'found 2' in res['msg']


def test_lab_device_root_maps_to_dev(pve, tmp_path):
    for name in ('nvidia0', 'nvidiactl', 'nvidia-uvm'):
        (tmp_path / name).write_text('')
    failed, res = run(dict(API, devices=None, device_root=str(tmp_path)))
    assert not failed and res['devices'] == ['/dev/nvidia0', '/dev/nvidiactl', '/dev/nvidia-uvm']


def test_secret_is_not_in_the_result(pve):
    res = run(API)[1]
    assert 's3cret-pw' not in json.dumps(res)
