"""proxmox_lxc_gpu through its entry point, with proxmoxer (API path) or run_command (pct path) patched."""
import json
import os

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
    # current=1: the values the container runs with; 'current' is set where a test has pending changes
    ct.config.get.side_effect = lambda **kw: dict(state['current'] if kw == {'current': 1} and 'current' in state
                                                  else state['config'])
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
    assert not failed and not res['changed'] and not res['restarted'] and 'pending' not in res
    pve['ct'].status.reboot.post.assert_called_once()


def pending_state(pve):
    """A running container whose config holds the wanted entries (applied late, after a run gave up) while it
    still runs with the old ones: PVE keeps them pending until it restarts."""
    run(API)
    pve['current'] = {'hostname': 'ct101', 'dev0': '/dev/dri/renderD128,gid=104', 'dev1': '/dev/nvidia0,mode=0600'}
    pve['status'] = 'running'
    pve['puts'].clear()


def test_a_running_container_that_has_not_taken_its_devn_is_restarted(pve):
    pending_state(pve)
    failed, res = run(dict(API, restart=True))
    assert not failed and res['changed'] is True and res['restarted'] is True and res['restart_required'] is False
    assert res['pending'] == ['dev1', 'dev2', 'dev3', 'dev4', 'dev5'] and res['set'] == {} and pve['puts'] == []
    pve['ct'].status.reboot.post.assert_called_once()
    pve['ct'].config.get.assert_any_call(current=1)


def test_pending_devn_without_restart_is_reported_not_changed(pve):
    pending_state(pve)
    failed, res = run(API)
    assert not failed and not res['changed'] and res['restart_required'] and not res['restarted']
    assert res['pending'] == ['dev1', 'dev2', 'dev3', 'dev4', 'dev5']
    pve['ct'].status.reboot.post.assert_not_called()


def test_pending_devn_in_check_mode_reports_the_restart_and_does_nothing(pve):
    pending_state(pve)
    failed, res = run(dict(API, restart=True), check_mode=True)
    assert not failed and res['changed'] and res['restart_required'] and not res['restarted']
    pve['ct'].status.reboot.post.assert_not_called()


def test_a_locked_restart_for_pending_devn_is_retried(pve):
    pending_state(pve)
    pve['ct'].status.reboot.post.side_effect = [ResourceException(500, LOCKED), 'UPID:pve1:0002:vzreboot:101:root@pam:']
    failed, res = run(dict(API, restart=True, lock_retries=1))
    assert not failed and res['restarted'] and pve['ct'].status.reboot.post.call_count == 2


def test_a_stopped_container_with_pending_devn_is_left_to_take_them_at_its_start(pve):
    pending_state(pve)
    pve['status'] = 'stopped'
    failed, res = run(dict(API, restart=True))
    assert not failed and not res['changed'] and not res['restart_required'] and 'pending' not in res
    assert all(call.kwargs == {} for call in pve['ct'].config.get.call_args_list)
    pve['ct'].status.reboot.post.assert_not_called()


def test_a_pending_devn_that_prune_would_delete_counts(pve):
    run(dict(API, devices=DEVICES[:1], prune=True))
    pve['current'] = dict(pve['config'], dev9='/dev/nvidia7,mode=0666')
    pve['status'] = 'running'
    failed, res = run(dict(API, devices=DEVICES[:1], prune=True, restart=True))
    assert not failed and res['restarted'] and res['pending'] == ['dev9']


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


def test_expected_gpu_count_is_exact_not_a_minimum(pve):
    # the docs say "exactly": two GPUs given where one is expected is as wrong as too few (a typo'd inventory
    # would pass another container's GPU through)
    failed, res = run(dict(API, expect_gpus=1))
    assert failed and 'expected 1 GPU device nodes' in res['msg'] and 'found 2' in res['msg']
    assert pve['puts'] == []
    failed, res = run(dict(API, expect_gpus=2))
    assert not failed and res['changed']


def test_a_stopped_container_is_never_restarted(pve):
    # restart=True restarts a running container whose devices changed; a stopped one picks the entries up when
    # it starts, and rebooting it would start it behind the operator's back
    failed, res = run(dict(API, restart=True))
    assert not failed and res['changed']
    assert not res['restarted'] and not res['restart_required']
    pve['ct'].status.reboot.post.assert_not_called()


HOST = os.uname()[1]
LOCKED = 'CT is locked (snapshot)'


def test_result_of_an_unchanged_run_is_complete(pve):
    run(API)
    failed, res = run(API)
    assert not failed
    assert res['changed'] is False and res['restart_required'] is False and res['restarted'] is False
    assert res['vmid'] == 101 and res['method'] == 'api' and res['devices'] == DEVICES
    assert res['set'] == {} and res['delete'] == []
    assert res['entries']['dev1'] == '/dev/nvidia0,mode=0666' and res['entries']['dev0'] == '/dev/dri/renderD128,gid=104'
    assert res['diff']['before_header'] == 'CT 101 devN' and res['diff']['after_header'] == 'CT 101 devN'


def test_check_mode_reports_entries_set_and_headers(pve):
    failed, res = run(dict(API, devices=['/dev/nvidia0']), check_mode=True)
    assert not failed and res['changed'] is True
    assert res['set'] == {'dev1': '/dev/nvidia0,mode=0666'} and res['delete'] == []
    assert res['entries'] == {'dev0': '/dev/dri/renderD128,gid=104', 'dev1': '/dev/nvidia0,mode=0666'}
    assert res['diff']['before_header'] == 'CT 101 devN' and res['diff']['after_header'] == 'CT 101 devN'
    assert res['restart_required'] is False and 'attempts' not in res


def test_api_client_talks_to_the_given_node_and_container(pve):
    failed, res = run(dict(API, vmid=205, node='pve7'))
    assert not failed and res['vmid'] == 205
    pve['api'].nodes.assert_any_call('pve7')
    pve['node'].lxc.assert_any_call(205)


def test_gid_and_uid_reach_the_entries(pve):
    failed, res = run(dict(API, devices=['/dev/nvidia0'], gid=44, uid=100000, mode='660'))
    assert not failed and res['set'] == {'dev1': '/dev/nvidia0,gid=44,mode=0660,uid=100000'}
    assert pve['puts'][0]['dev1'] == '/dev/nvidia0,gid=44,mode=0660,uid=100000'


def test_bad_mode_fails_before_pve(pve):
    failed, res = run(dict(API, mode='rw'))
    assert failed and res['msg'] == "mode must be an octal access mode such as 0666, got 'rw'"
    pve['ctor'].assert_not_called()


def test_prune_through_the_module_deletes_gpus_that_left(pve):
    pve['config'] = {'dev0': '/dev/nvidia0,mode=0666', 'dev1': '/dev/nvidia1,mode=0666', 'digest': 'd1'}
    failed, res = run(dict(API, devices=['/dev/nvidia0'], prune=True))
    assert not failed and res['changed'] and res['delete'] == ['dev1'] and res['set'] == {}
    assert pve['puts'] == [{'delete': 'dev1', 'digest': 'd1'}]
    assert pve['config'] == {'dev0': '/dev/nvidia0,mode=0666', 'digest': 'd1'}
    failed, res = run(dict(API, devices=['/dev/nvidia0'], prune=False))
    assert not failed and not res['changed']


def test_duplicate_devices_are_passed_once(pve):
    failed, res = run(dict(API, devices=['/dev/nvidia0', '/dev/nvidia0']))
    assert not failed and res['devices'] == ['/dev/nvidia0']
    assert pve['puts'][0] == {'dev1': '/dev/nvidia0,mode=0666', 'digest': 'abc'}


def test_missing_device_root_names_it_and_the_host(pve, tmp_path):
    root = str(tmp_path / 'nope')
    failed, res = run(dict(API, devices=None, device_root=root))
    assert failed
    assert res['msg'] == ('device_root {0} does not exist on {1}: run this module on the PVE host, or give '
                          'devices'.format(root, HOST))


def test_nothing_discovered_names_the_root_and_the_patterns(pve, tmp_path):
    failed, res = run(dict(API, devices=None, device_root=str(tmp_path), patterns=['nvidia[0-9]*', 'nvidiactl']))
    assert failed
    assert res['msg'] == ('no GPU device nodes found under {0} (patterns nvidia[0-9]*, nvidiactl); is the NVIDIA '
                          'driver loaded on the host?'.format(tmp_path))


def test_discovery_uses_the_given_patterns(pve, tmp_path):
    for name in ('nvidia0', 'nvidia1', 'nvidiactl'):
        (tmp_path / name).write_text('')
    failed, res = run(dict(API, devices=None, device_root=str(tmp_path), patterns=['nvidia1']))
    assert not failed and res['devices'] == ['/dev/nvidia1']


def test_expected_gpu_count_message_lists_what_was_found(pve):
    failed, res = run(dict(API, expect_gpus=3))
    assert failed
    assert res['msg'] == 'expected 3 GPU device nodes (nvidiaN) under /dev, found 2: /dev/nvidia0, /dev/nvidia1'
    assert res['devices'] == ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools']
    failed, res = run(dict(API, devices=['/dev/nvidiactl'], expect_gpus=1))
    assert failed and res['msg'] == 'expected 1 GPU device nodes (nvidiaN) under /dev, found 0: none'


def test_api_without_proxmoxer_says_so(pve, monkeypatch):
    monkeypatch.setattr(_pve_client, 'HAS_PROXMOXER', False)
    monkeypatch.setattr(_pve_client, 'PROXMOXER_IMPORT_ERROR', 'Traceback: no module named proxmoxer')
    failed, res = run(API)
    assert failed and res['msg'] == basic.missing_required_lib('proxmoxer')
    assert 'proxmoxer' in res['msg'] and res['exception'] == 'Traceback: no module named proxmoxer'
    pve['ctor'].assert_not_called()


def test_api_method_names_what_it_misses(pve, monkeypatch):
    for var in ('PROXMOX_HOST', 'PROXMOX_USER', 'PROXMOX_PASSWORD', 'PROXMOX_TOKEN_SECRET'):
        monkeypatch.delenv(var, raising=False)
    failed, res = run(dict(API, method='api', api_host=None, node=None))
    assert failed and res['msg'] == 'method api needs api_host, node'
    failed, res = run(dict(API, method='api', api_password=None))
    assert failed and res['msg'] == 'method api needs api_password (root@pam) or an API token'
    pve['ctor'].assert_not_called()


def test_pct_missing_message_names_the_path_and_the_host(pve, tmp_path):
    pct = str(tmp_path / 'nope')
    failed, res = run(dict(API, method='pct', pct_path=pct))
    assert failed
    assert res['msg'] == ('devN passthrough needs root@pam with a password on the API (PVE refuses API tokens) or '
                          '`pct` on the node, and {0} is not here on {1}: run this task on the PVE host (delegate_to) '
                          'or give api_password for root@pam'.format(pct, HOST))


def fake_pct(monkeypatch, tmp_path, config=None, current=None):
    """A pct here, answered by run_command: `status` says running, `config` (with --current: the running values)
    prints the given text, everything else succeeds silently. Returns its path and the argvs it was called with."""
    pct = tmp_path / 'pct'
    pct.write_text('#!/bin/sh\n')
    pct.chmod(0o755)
    argvs = []

    def run_command(self, argv, **kw):
        argvs.append(list(argv))
        if argv[1] == 'status':
            return 0, 'status: running\n', ''
        if argv[1] == 'config' and config is not None:
            return 0, (current if '--current' in argv else config), ''
        return 0, '', ''
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    return str(pct), argvs


def test_pct_method_runs_the_given_pct(pve, monkeypatch, tmp_path):
    pct, argvs = fake_pct(monkeypatch, tmp_path)
    failed, res = run(dict(API, method='pct', pct_path=pct, devices=['/dev/nvidia0']))
    assert not failed and res['method'] == 'pct' and res['restart_required'] is True
    assert {a[0] for a in argvs} == {pct}
    assert argvs[-1] == [pct, 'set', '101', '--dev0', '/dev/nvidia0,mode=0666']


def test_pct_method_reads_the_running_values_with_current(pve, monkeypatch, tmp_path):
    # the config holds dev0; the container runs without it
    pct, argvs = fake_pct(monkeypatch, tmp_path, config='dev0: /dev/nvidia0,mode=0666\n', current='hostname: ct101\n')
    failed, res = run(dict(API, method='pct', pct_path=pct, devices=['/dev/nvidia0'], restart=True))
    assert not failed and res['pending'] == ['dev0'] and res['restarted']
    assert [argv[1:] for argv in argvs] == [['config', '101'], ['status', '101'], ['config', '101', '--current'],
                                            ['reboot', '101']]


def test_reading_the_config_is_not_retried(pve):
    pve['ct'].config.get.side_effect = ResourceException(500, LOCKED)
    failed, res = run(dict(API, lock_retries=3, lock_retry_delay=0.5))
    assert failed and res['msg'].startswith('CT 101: 500 ' + LOCKED + ' (still locked after 1 attempts over 0s')
    assert pve['ct'].config.get.call_count == 1


def test_a_locked_reboot_is_retried(pve):
    pve['status'] = 'running'
    pve['ct'].status.reboot.post.side_effect = [ResourceException(500, LOCKED), 'UPID:pve1:0002:vzreboot:101:root@pam:']
    failed, res = run(dict(API, restart=True, lock_retry_delay=0.01))
    assert not failed and res['restarted'] is True and res['restart_required'] is False
    assert pve['ct'].status.reboot.post.call_count == 2


def test_reboot_task_timeout_is_the_given_one(pve):
    pve['status'] = 'running'
    tasks = pve['node'].tasks.return_value
    tasks.status.get.side_effect = [{'status': 'running'}, {'status': 'stopped', 'exitstatus': 'OK'}]
    failed, res = run(dict(API, restart=True, task_timeout=0))
    assert failed and 'still running after 0s' in res['msg']
    assert res['restarted'] is False and res['changed'] is True


def test_a_failure_after_the_plan_reports_what_was_planned(pve):
    pve['ct'].config.put.side_effect = ResourceException(500, 'unexpected error')
    failed, res = run(dict(API, devices=['/dev/nvidia0']))
    assert failed and res['msg'] == 'CT 101: 500 unexpected error'
    assert res['method'] == 'api' and res['set'] == {'dev1': '/dev/nvidia0,mode=0666'} and res['changed'] is True


def test_no_free_slot_fails_with_the_result_so_far(pve):
    pve['config'] = dict(('dev%d' % i, '/dev/ttyS%d' % i) for i in range(256))
    failed, res = run(dict(API, devices=['/dev/nvidia0']))
    assert failed and res['msg'] == 'no free devN slot left for /dev/nvidia0 (PVE allows dev0..dev255)'
    assert res['method'] == 'api' and res['devices'] == ['/dev/nvidia0'] and res['vmid'] == 101
    assert pve['puts'] == []


def test_api_403_without_pve_wording_still_explains_the_rule(pve):
    pve['ct'].config.put.side_effect = ResourceException(403, 'Permission check failed (/vms/101, VM.Config.HWType)')
    failed, res = run(API)
    assert failed and res['msg'].startswith('CT 101: 403 Permission check failed')
    assert 'only root@pam with a password set devN' in res['msg']


HINT = (' - PVE lets only root@pam with a password set devN (API tokens and other users are refused): give '
        'api_user root@pam and api_password, or run with method pct on the node')


@pytest.mark.parametrize('message, status, method, hinted', [
    (_pve_client.DENIED_DEV, None, 'pct', True),
    (_pve_client.DENIED_DEV, 403, 'api', True),
    ('Permission check failed', 403, 'api', True),
    ('Permission check failed', 403, 'pct', False),
    ('no such container', 500, 'api', False),
    ('no such container', 404, 'api', False),
    ('no such container', None, 'pct', False),
])
def test_explain_adds_the_root_at_pam_rule_only_where_it_applies(message, status, method, hinted):
    from ansible_collections.gpuserve.sglang.plugins.module_utils._pve_lxc_gpu import explain
    text = explain(_pve_client.PveFailure(message, status), method, {'vmid': 7})
    assert text == 'CT 7: ' + message + (HINT if hinted else '')
