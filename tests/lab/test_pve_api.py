"""lab/pve_api.py: fakepve started as the lab starts it, its container hooks, admin faults and the node's pct.

Runs its own fakepve on a free port with a stub in place of lab/lab, so it needs neither root nor LXC. The vmid
(9101) is one no real lab container has, so the launcher's sync with real containers leaves it alone.
"""
import json
import os
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuserve.sglang.tests.support.net import free_port

pytestmark = pytest.mark.lab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PVE_API = os.path.join(ROOT, 'lab', 'pve_api.py')
sys.path.insert(0, os.path.join(ROOT, 'lab'))
import pve_api  # noqa: E402

VMID = 9101
TEMPLATE = 'local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst'


def cli(state, *args, check=True, env=None):
    out = subprocess.run([sys.executable, PVE_API] + list(args[:1]) + ['--state-dir', state] + list(args[1:]),
                         capture_output=True, text=True, timeout=120, env=env)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.fixture(scope='module')
def lab_api(tmp_path_factory):
    """fakepve as `lab up` starts it, with a stub lab script that logs its calls and fails on request."""
    tmp = tmp_path_factory.mktemp('pve')
    state, stub = str(tmp / 'state'), tmp / 'lab'
    stub.write_text('#!/bin/sh\necho "$1 $2 $(grep -c . "$GPUSERVE_PVE_CONF")" >> {0}/calls\n'
                    '[ -e {0}/fail-$1 ] && {{ echo "stub: $1 refused"; exit 3; }}\necho "stub did $1 $2"\n'
                    .format(tmp))
    stub.chmod(0o755)
    port = free_port()
    cli(state, 'start', '--port', str(port), '--lab-script', str(stub), '--seed', '9999')
    creds = pve_api.load_credentials(state)
    from proxmoxer import ProxmoxAPI
    prox = ProxmoxAPI('127.0.0.1', port=port, user='root@pam', password=creds['api_password'],
                      verify_ssl=creds['ca_path'], timeout=30)
    yield dict(state=state, tmp=tmp, port=port, creds=creds, prox=prox, node=creds['node'])
    cli(state, 'stop')


def wait(api, upid):
    pve_api.wait_task(api['prox'], api['node'], upid, timeout=60)


def calls(api):
    path = api['tmp'] / 'calls'
    return path.read_text().split('\n')[:-1] if path.exists() else []


def test_start_is_idempotent_and_credentials_are_private(lab_api):
    out = cli(lab_api['state'], 'start', '--port', str(lab_api['port']))
    assert 'already running' in out.stdout
    for name in ('credentials.yml', '.credentials.json', 'fakepve.key'):
        mode = stat.S_IMODE(os.stat(os.path.join(lab_api['state'], name)).st_mode)
        assert mode == 0o600, (name, oct(mode))
    text = open(os.path.join(lab_api['state'], 'credentials.yml')).read()
    assert 'api_password:' in text and 'api_token_secret:' in text and 'ca_path:' in text
    assert lab_api['prox'].version.get()['version'].startswith('9.')


def test_node_storage_template_and_token(lab_api):
    prox, node = lab_api['prox'], lab_api['node']
    assert node == 'lab-pve'
    vols = [v['volid'] for v in prox.nodes(node).storage('local').content.get(content='vztmpl')]
    assert TEMPLATE in vols
    from proxmoxer import ProxmoxAPI
    creds = lab_api['creds']
    tok = ProxmoxAPI('127.0.0.1', port=lab_api['port'], user='root@pam', token_name=creds['api_token_id'],
                     token_value=creds['api_token_secret'], verify_ssl=creds['ca_path'])
    assert tok.version.get()['version']


def test_lifecycle_runs_the_lab_script_and_writes_the_conf(lab_api):
    prox, node = lab_api['prox'], lab_api['node']
    wait(lab_api, prox.nodes(node).lxc.create(vmid=VMID, ostemplate=TEMPLATE, hostname='t', rootfs='local-lvm:4',
                                              mp0='/srv/models,mp=/models'))
    wait(lab_api, prox.nodes(node).lxc(VMID).status.start.post())
    wait(lab_api, prox.nodes(node).lxc(VMID).status.reboot.post())
    wait(lab_api, prox.nodes(node).lxc(VMID).status.stop.post())
    assert [c.rsplit(' ', 1)[0] for c in calls(lab_api)][-5:] == [
        'ct-create {0}'.format(VMID), 'ct-start {0}'.format(VMID), 'ct-stop {0}'.format(VMID),
        'ct-start {0}'.format(VMID), 'ct-stop {0}'.format(VMID)]
    conf = open(os.path.join(lab_api['state'], 'lxc', '{0}.conf'.format(VMID))).read()
    assert 'mp0: /srv/models,mp=/models\n' in conf and 'hostname: t\n' in conf
    tasks = prox.nodes(node).tasks.get(vmid=VMID, limit=1)
    log = prox.nodes(node).tasks(tasks[0]['upid']).log.get()
    assert any(line['t'].startswith('lab: stub did ct-') for line in log), log


def test_a_failing_lab_script_fails_the_task_and_rolls_back(lab_api):
    prox, node = lab_api['prox'], lab_api['node']
    (lab_api['tmp'] / 'fail-ct-start').write_text('')
    try:
        with pytest.raises(RuntimeError, match='ct-start .* failed .*stub: ct-start refused'):
            wait(lab_api, prox.nodes(node).lxc(VMID).status.start.post())
        assert prox.nodes(node).lxc(VMID).status.current.get()['status'] == 'stopped'
    finally:
        (lab_api['tmp'] / 'fail-ct-start').unlink()


def test_pct_forwarding(lab_api):
    state = lab_api['state']
    cli(state, 'pct', 'set', str(VMID), '--dev0', '/dev/nvidia0,mode=0666')
    out = cli(state, 'pct', 'config', str(VMID)).stdout
    assert 'dev0: /dev/nvidia0,mode=0666' in out and 'digest' not in out
    assert cli(state, 'pct', 'status', str(VMID)).stdout.strip() == 'status: stopped'
    bad = cli(state, 'pct', 'set', '424242', '--cores', '2', check=False)
    assert bad.returncode == 255 and 'does not exist' in bad.stderr


def test_faults_lock_task_error_slow(lab_api):
    prox, node, state = lab_api['prox'], lab_api['node'], lab_api['state']
    cli(state, 'fault', 'lock', str(VMID))
    from proxmoxer.core import ResourceException
    with pytest.raises(ResourceException, match=r'CT is locked \(backup\)'):
        prox.nodes(node).lxc(VMID).config.put(cores=3)
    cli(state, 'fault', 'start-error', str(VMID), 'lab: injected failure')
    with pytest.raises(RuntimeError, match='lab: injected failure'):
        cli(state, 'fault', 'unlock', str(VMID))
        wait(lab_api, prox.nodes(node).lxc(VMID).status.start.post())
    cli(state, 'fault', 'clear')
    cli(state, 'fault', 'slow', str(VMID), '--op', 'start', '--secs', '3')
    upid = prox.nodes(node).lxc(VMID).status.start.post()
    assert prox.nodes(node).tasks(upid).status.get()['status'] == 'running'
    with pytest.raises(RuntimeError, match='still running'):
        pve_api.wait_task(prox, node, upid, timeout=1)
    wait(lab_api, upid)
    cli(state, 'fault', 'clear')
    wait(lab_api, prox.nodes(node).lxc(VMID).status.stop.post())


def test_restart_keeps_guests(lab_api):
    state = lab_api['state']
    cli(state, 'stop')
    cli(state, 'start', '--port', str(lab_api['port']), '--lab-script', str(lab_api['tmp'] / 'lab'), '--seed', '9999')
    out = cli(state, 'status').stdout
    assert 'CT {0}: stopped'.format(VMID) in out
    from proxmoxer import ProxmoxAPI
    creds = pve_api.load_credentials(state)
    assert creds['api_password'] == lab_api['creds']['api_password']
    prox = ProxmoxAPI('127.0.0.1', port=lab_api['port'], user='root@pam', password=creds['api_password'],
                      verify_ssl=creds['ca_path'])
    assert prox.nodes('lab-pve').lxc(VMID).config.get()['dev0'] == '/dev/nvidia0,mode=0666'
    lab_api['prox'] = prox


def test_destroy_runs_ct_destroy_and_removes_the_conf(lab_api):
    prox, node = lab_api['prox'], lab_api['node']
    wait(lab_api, prox.nodes(node).lxc(VMID).delete())
    assert calls(lab_api)[-1].startswith('ct-destroy {0}'.format(VMID))
    assert not os.path.exists(os.path.join(lab_api['state'], 'lxc', '{0}.conf'.format(VMID)))
    state = json.load(open(os.path.join(lab_api['state'], 'guests.json')))
    assert str(VMID) not in state


@pytest.fixture
def stalled_lxc_api(tmp_path):
    """fakepve whose lxc-info (a stub first in PATH) stalls for a vmid while TMP/stall-VMID exists, as the real one
    waits for the container lock that lxc-destroy holds while it deletes the root filesystem; the stub lab
    script's ct-destroy lasts while TMP/hold exists."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    info = bindir / 'lxc-info'
    info.write_text('#!/bin/sh\n[ -e {0}/ct-$2 ] || exit 1\n[ -e {0}/stall-$2 ] && sleep 30\necho RUNNING\n'
                    .format(tmp_path))
    info.chmod(0o755)
    stub = tmp_path / 'lab'
    stub.write_text('#!/bin/sh\necho "$1 $2" >> {0}/calls\ncase $1 in ct-create) touch {0}/ct-$2 ;;\n'
                    'ct-destroy) n=0; while [ -e {0}/hold ] && [ $n -lt 200 ]; do sleep 0.1; n=$((n+1)); done\n'
                    '  rm -f {0}/ct-$2 ;;\nesac\n'.format(tmp_path))
    stub.chmod(0o755)
    state, port = str(tmp_path / 'state'), free_port()
    env = dict(os.environ, PATH='{0}:{1}'.format(bindir, os.environ['PATH']))
    cli(state, 'start', '--port', str(port), '--lab-script', str(stub), '--seed', '9999', env=env)
    creds = pve_api.load_credentials(state)
    from proxmoxer import ProxmoxAPI
    # proxmoxer's default timeout, which community.proxmox uses: a request that stalls 5 s fails the module.
    prox = ProxmoxAPI('127.0.0.1', port=port, user='root@pam', password=creds['api_password'],
                      verify_ssl=creds['ca_path'], timeout=5)
    yield dict(state=state, tmp=tmp_path, prox=prox, node=creds['node'])
    cli(state, 'stop')


def test_a_stalled_lxc_info_stalls_no_request_and_a_destroyed_ct_stays_gone(stalled_lxc_api):
    api = stalled_lxc_api
    prox, node, tmp, vmid = api['prox'], api['node'], api['tmp'], VMID + 1
    pve_api.wait_task(prox, node, prox.nodes(node).lxc.create(vmid=vmid, ostemplate=TEMPLATE, hostname='t',
                                                              rootfs='local-lvm:4', start=1), timeout=60)
    assert prox.nodes(node).lxc(vmid).status.current.get()['status'] == 'running'
    # A container whose lxc-info does not answer: requests are answered, its state is left as it was.
    (tmp / 'stall-{0}'.format(vmid)).write_text('')
    for _ in range(3):
        assert prox.nodes(node).lxc(vmid).status.current.get()['status'] == 'running'
        time.sleep(0.4)
    # Destroyed while lxc-info stalls (the lock lxc-destroy holds): the task's polls are answered, fakepve
    # does not take the container back from the conf file and the stalled lxc-info, and it stays gone.
    # Then lxc-info answers again while ct-destroy still runs (the real container is still there, and its conf).
    (tmp / 'hold').write_text('')
    upid = prox.nodes(node).lxc(vmid).delete(force=1, purge=1)
    for stalled in (True, False):
        if not stalled:
            (tmp / 'stall-{0}'.format(vmid)).unlink()
        deadline = time.time() + 2
        while time.time() < deadline:
            assert prox.nodes(node).tasks(upid).status.get()['status'] == 'running'
            assert vmid not in [int(ct['vmid']) for ct in prox.nodes(node).lxc.get()]
            time.sleep(0.4)
    (tmp / 'hold').unlink()
    pve_api.wait_task(prox, node, upid, timeout=30)
    time.sleep(0.4)
    assert vmid not in [int(ct['vmid']) for ct in prox.nodes(node).lxc.get()]
    assert (tmp / 'calls').read_text().split('\n')[-2] == 'ct-destroy {0}'.format(vmid)
