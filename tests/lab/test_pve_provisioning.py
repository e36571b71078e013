"""The proxmox_container role and rebuild_container.yml against fakepve (lab/pve_api.py), driven by ansible-runner.

fakepve checks every call against the PVE 9 schema. Its own instance (free port, temporary state) with a stub in
place of lab/lab, the PVE host reached with the local connection, GPUs as files (the lab's SIMULATED kind) and a
`pct` that hands config/set/status to fakepve as root, like the lab's. vmid 9101 is no real lab container's.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuserve.sglang.tests.support.net import free_port

pytestmark = pytest.mark.lab

ansible_runner = pytest.importorskip('ansible_runner')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PVE_API = os.path.join(ROOT, 'lab', 'pve_api.py')
VENV_BIN = os.path.dirname(sys.executable)
VMID = 9101
HOST = 'ct{0}'.format(VMID)


def cli(state, *args):
    out = subprocess.run([sys.executable, PVE_API, args[0], '--state-dir', state] + list(args[1:]),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('prov')
    state = str(tmp / 'state')
    (tmp / 'calls').write_text('')
    stub = tmp / 'lab'
    stub.write_text('#!/bin/sh\necho "$1 $2" >> {0}/calls\necho "stub did $1 $2"\n'.format(tmp))
    pct = tmp / 'pct'
    pct.write_text('#!/bin/sh\nexec {0} {1} pct --state-dir {2} "$@"\n'.format(sys.executable, PVE_API, state))
    smi = tmp / 'nvidia-smi'
    smi.write_text('#!/bin/sh\n# GPUSERVE-LAB-SIMULATED\nfor i in 0 1 2 3 4 5 6 7; do echo 580.159.04; done\n')
    modprobe = tmp / 'nvidia-modprobe'  # the boot unit's; this test only installs the unit, never runs it
    modprobe.write_text('#!/bin/sh\n# GPUSERVE-LAB-SIMULATED\nexit 0\n')
    for f in (stub, pct, smi, modprobe):
        f.chmod(0o755)
    gpus = tmp / 'gpus'
    gpus.mkdir()
    for name in ['nvidia%d' % i for i in range(8)] + ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools']:
        (gpus / name).write_text('')
    (tmp / 'models').mkdir()
    port = free_port()
    cli(state, 'start', '--port', str(port), '--lab-script', str(stub), '--seed', '9999')
    inventory = {'all': {
        'vars': {'ansible_python_interpreter': sys.executable},
        'children': {
            'pve': {'hosts': {'lab-pve': {'ansible_connection': 'local'}}},
            'sglang': {'hosts': {HOST: {
                'ansible_connection': 'local', 'proxmox_vmid': VMID, 'gpuserve_pve_host': 'lab-pve',
                'proxmox_container_credentials_file': os.path.join(state, 'credentials.yml'),
                'proxmox_container_gpu_device_root': str(gpus), 'proxmox_container_pct_path': str(pct),
                'proxmox_container_models_host_path': str(tmp / 'models'),
                'proxmox_container_nvidia_smi': str(smi), 'proxmox_container_rootfs_size_gb': 8,
                'proxmox_container_nvidia_modprobe': str(modprobe),
                'proxmox_container_systemd_dir': str(tmp / 'systemd'),
                'proxmox_container_memory_mb': 4096, 'proxmox_container_cores': 2,
                'proxmox_container_task_timeout': 8, 'proxmox_container_lock_retry_delay': 0.5,
                'proxmox_container_lock_retries': 2}}}}}}
    (tmp / 'inventory.json').write_text(json.dumps(inventory))
    (tmp / 'provision.yml').write_text(
        '- name: Provision\n  hosts: sglang\n  gather_facts: false\n  roles:\n'
        '    - gpuserve.sglang.proxmox_container\n')
    from proxmoxer import ProxmoxAPI
    creds = json.load(open(os.path.join(state, '.credentials.json')))
    prox = ProxmoxAPI('127.0.0.1', port=port, user='root@pam', password=creds['api_password'],
                      verify_ssl=creds['ca_path'])
    yield dict(tmp=tmp, state=state, creds=creds, prox=prox, ct=prox.nodes('lab-pve').lxc(VMID), pct=str(pct))
    cli(state, 'stop')


def play(lab, playbook, verbosity=0, **extravars):
    """Run a playbook; returns (runner, failures {task: msg}, stdout)."""
    env = {'ANSIBLE_CONFIG': os.path.join(ROOT, 'ansible.cfg'), 'PATH': VENV_BIN + ':' + os.environ['PATH'],
           'ANSIBLE_FORCE_COLOR': '0', 'ANSIBLE_NOCOLOR': '1'}
    private = lab['tmp'] / ('runner-%d' % len(list(lab['tmp'].glob('runner-*'))))
    private.mkdir()
    r = ansible_runner.run(private_data_dir=str(private), playbook=playbook,
                           inventory=str(lab['tmp'] / 'inventory.json'), extravars=extravars, verbosity=verbosity,
                           envvars=env, quiet=True, project_dir=ROOT)
    events = list(r.events)
    failures = dict((e['event_data'].get('task'), e['event_data']['res'].get('msg', ''))
                    for e in events if e['event'] == 'runner_on_failed' and not e['event_data'].get('ignore_errors'))
    with open(os.path.join(str(private), 'artifacts', r.config.ident, 'stdout')) as out:
        stdout = out.read()
    return r, failures, stdout, events


def changed_tasks(events):
    return [e['event_data']['task'] for e in events if e['event'] == 'runner_on_ok' and e['event_data']['res'].get('changed')]


def provision(lab, **kw):
    return play(lab, str(lab['tmp'] / 'provision.yml'), **kw)


def calls(lab):
    return (lab['tmp'] / 'calls').read_text().split('\n')[:-1]


def test_first_run_creates_second_run_changes_nothing(lab):
    r, failures, out, events = provision(lab)
    assert r.rc == 0, (failures, out[-3000:])
    assert 'Create or update the container (community.proxmox)' in changed_tasks(events)
    assert 'Pass the GPU device nodes (devN)' in changed_tasks(events)
    cfg = lab['ct'].config.get()
    assert cfg['mp0'].startswith(str(lab['tmp'] / 'models') + ',mp=/models')
    assert [cfg['dev%d' % i] for i in range(11)][:2] == ['/dev/nvidia0,mode=0666', '/dev/nvidia1,mode=0666']
    assert cfg['tags'] == 'gpuserve' and cfg['cmode'] == 'tty'
    assert lab['ct'].status.current.get()['status'] == 'running'
    assert calls(lab) == ['ct-create {0}'.format(VMID), 'ct-start {0}'.format(VMID)]
    facts = [e['event_data']['res'] for e in events if e['event'] == 'runner_on_ok'
             and e['event_data']['task'] == 'Record the host driver version for the userspace role']
    assert facts[0]['ansible_facts']['proxmox_container_host_driver_version'] == '580.159.04'
    # the PVE host's boot unit, enabled, that makes the device nodes before the guests start; onboot set
    unit = (lab['tmp'] / 'systemd' / 'gpuserve-nvidia-nodes.service').read_text()
    assert 'Before=pve-guests.service' in unit
    assert 'ExecStart={0} -u -c 0 -c 1 -c 2 -c 3 -c 4 -c 5 -c 6 -c 7'.format(lab['tmp'] / 'nvidia-modprobe') in unit
    assert (lab['tmp'] / 'systemd' / 'multi-user.target.wants' / 'gpuserve-nvidia-nodes.service').is_symlink()
    assert int(cfg['onboot']) == 1
    r, failures, out, events = provision(lab)
    assert r.rc == 0 and changed_tasks(events) == [], changed_tasks(events)
    assert r.stats['changed'] == {}


def test_a_host_without_nvidia_modprobe_is_refused_before_any_change(lab):
    r, failures, out, events = provision(lab, proxmox_container_nvidia_modprobe=str(lab['tmp'] / 'absent'))
    assert r.rc != 0 and changed_tasks(events) == []
    msg = failures['Check that the boot unit can make the device nodes']
    assert 'has no nvidia-modprobe at {0}'.format(lab['tmp'] / 'absent') in msg and 'Nothing was changed' in msg, msg


def test_secrets_never_appear_even_at_vvv(lab):
    r, failures, out, events = provision(lab, verbosity=3)
    assert r.rc == 0, failures
    assert '-vvv' in out or 'ESTABLISH LOCAL CONNECTION' in out
    blob = out + json.dumps(events)
    for key in ('api_password', 'api_token_secret'):
        assert lab['creds'][key] not in blob, key


def test_a_wrong_password_fails_clearly_and_is_never_shown(lab):
    wrong = 'not-the-password-4711'
    r, failures, out, events = provision(lab, verbosity=3, proxmox_container_api_password=wrong)
    assert r.rc != 0
    msg = failures['Check the login']
    assert 'refused the login for root@pam: 401' in msg and 'proxmox_container_api_password' in msg, msg
    assert wrong not in out + json.dumps(events)
    assert lab['creds']['api_password'] not in out + json.dumps(events)


def test_token_is_refused_for_devn_after_a_grant_and_pct_is_used(lab):
    lab['ct'].config.put(delete='dev10')
    cli(lab['state'], 'grant', 'auditor@pve', '/', 'VM.Audit')
    try:
        playbook = lab['tmp'] / 'token.yml'
        playbook.write_text("""
- hosts: lab-pve
  gather_facts: false
  vars:
    c: "{{ lookup('ansible.builtin.file', '%s/.credentials.json') | from_json }}"
  tasks:
    - name: devN with an API token through the API
      gpuserve.sglang.proxmox_lxc_gpu: &gpu
        vmid: %d
        node: lab-pve
        device_root: %s
        mode: "0666"
        method: api
        api_host: "{{ c.api_host }}"
        api_port: "{{ c.api_port }}"
        api_user: root@pam
        api_token_id: "{{ c.api_token_id }}"
        api_token_secret: "{{ c.api_token_secret }}"
        ca_path: "{{ c.ca_path }}"
        pct_path: %s
      ignore_errors: true
      register: api
    - name: devN with an API token, method auto
      gpuserve.sglang.proxmox_lxc_gpu:
        <<: *gpu
        method: auto
      register: auto
    - name: Show
      ansible.builtin.assert:
        that:
          - api is failed
          - "'only allowed for root@pam' in api.msg"
          - "'root@pam with a password' in api.msg"
          - auto is changed
          - auto.method == 'pct'
""" % (lab['state'], VMID, lab['tmp'] / 'gpus', lab['pct']))
        r, failures, out, events = play(lab, str(playbook))
        assert r.rc == 0, (failures, out[-3000:])
        assert lab['ct'].config.get()['dev10'] == '/dev/nvidia-uvm-tools,mode=0666'
    finally:
        cli(lab['state'], 'fault', 'clear', '--acl')


def test_locked_container_is_retried_then_fails_clearly(lab):
    cli(lab['state'], 'fault', 'lock', str(VMID))
    try:
        r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660')
    finally:
        cli(lab['state'], 'fault', 'unlock', str(VMID))
    assert r.rc != 0
    msg = failures['Pass the GPU device nodes (devN)']
    assert 'CT is locked (backup)' in msg and 'still locked after 3 attempts' in msg
    assert lab['ct'].config.get()['dev0'] == '/dev/nvidia0,mode=0666'


def test_task_ending_in_error_fails_with_its_reason(lab):
    cli(lab['state'], 'pct', 'stop', str(VMID))
    cli(lab['state'], 'fault', 'start-error', str(VMID), 'lab: injected start failure')
    try:
        r, failures, out, events = provision(lab)
    finally:
        cli(lab['state'], 'fault', 'clear')
    assert r.rc != 0
    msg = failures['Fail with PVE\'s reason']
    assert 'Starting CT {0} failed'.format(VMID) in msg and 'lab: injected start failure' in msg


def test_slow_task_hits_the_bounded_wait(lab):
    cli(lab['state'], 'fault', 'slow', str(VMID), '--op', 'start', '--secs', '8')
    try:
        r, failures, out, events = provision(lab, proxmox_container_task_timeout=3)
    finally:
        cli(lab['state'], 'fault', 'clear')
        # The task goes on in PVE after the bounded wait; let it finish before the next test.
        deadline = time.time() + 30
        while time.time() < deadline and any(
                t.get('status') is None for t in lab['prox'].nodes('lab-pve').tasks.get(vmid=VMID)):
            time.sleep(0.5)
    assert r.rc != 0
    msg = failures['Fail with PVE\'s reason']
    assert 'Reached timeout while waiting for VM to start' in msg and 'vzstart' in msg


def test_an_api_error_mid_provisioning_fails_clearly_loses_nothing_and_the_next_run_converges(lab):
    """Bad input at the edges: PVE answers 500 to the devN change, after the container step passed."""
    before = lab['ct'].config.get()
    path = '/nodes/lab-pve/lxc/{0}/config'.format(VMID)
    cli(lab['state'], 'fault', 'task-error', 'PUT', path, '--status', '500', '--message',
        'lab: injected internal server error', '--times', '1')
    try:
        r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660')
    finally:
        cli(lab['state'], 'fault', 'clear')
    assert r.rc != 0
    msg = failures['Pass the GPU device nodes (devN)']
    assert '500' in msg and 'lab: injected internal server error' in msg, msg
    assert lab['ct'].config.get() == before  # nothing half-applied
    r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660')
    assert r.rc == 0, (failures, out[-3000:])
    assert 'Pass the GPU device nodes (devN)' in changed_tasks(events)
    assert lab['ct'].config.get()['dev0'] == '/dev/nvidia0,mode=0660'
    r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660')
    assert r.rc == 0 and changed_tasks(events) == [], changed_tasks(events)
    r, failures, out, events = provision(lab)  # back to the module's default for the tests after this one
    assert r.rc == 0 and lab['ct'].config.get()['dev0'] == '/dev/nvidia0,mode=0666'


def test_an_api_that_does_not_answer_mid_provisioning_fails_clearly_and_the_next_run_converges(lab):
    """Bad input at the edges: the devN change gets no answer within api_timeout (PVE applies it late).
    Proven: a clear failure, nothing but devN changed; PVE keeps the late change pending on the running container,
    so the next run finds the config right but the container not, restarts it to take the entries, and the run
    after is changed=0."""
    before = lab['ct'].config.get()
    path = '/nodes/lab-pve/lxc/{0}/config'.format(VMID)
    cli(lab['state'], 'fault', 'hang', 'PUT', path, '--secs', '8', '--times', '1')
    start = time.monotonic()
    try:
        r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660', proxmox_container_api_timeout=3)
    finally:
        cli(lab['state'], 'fault', 'clear')
    assert r.rc != 0
    msg = failures['Pass the GPU device nodes (devN)']
    assert 'did not answer within 3 s (api_timeout)' in msg and 'may still be applied' in msg, msg
    assert time.monotonic() - start < 60
    # PVE applies the change it got no answer for, late; nothing else was changed meanwhile
    deadline = time.monotonic() + 30
    while lab['ct'].config.get().get('dev0') != '/dev/nvidia0,mode=0660':
        assert time.monotonic() < deadline, lab['ct'].config.get()
        time.sleep(0.5)
    after = lab['ct'].config.get()
    assert {k: v for k, v in after.items() if not k.startswith('dev') and k != 'digest'} == \
        {k: v for k, v in before.items() if not k.startswith('dev') and k != 'digest'}
    assert lab['ct'].pending.get(), 'PVE applied the late change to the running container directly'
    assert lab['ct'].config.get(current=1)['dev0'] == before['dev0']  # what it runs with
    r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660')
    assert r.rc == 0, (failures, out[-3000:])
    devn = [e['event_data']['res'] for e in events if e['event'] == 'runner_on_ok'
            and e['event_data']['task'] == 'Pass the GPU device nodes (devN)'][0]
    assert devn['changed'] and devn['restarted'] and devn['set'] == {} and 'dev0' in devn['pending'], devn
    assert lab['ct'].config.get(current=1)['dev0'] == '/dev/nvidia0,mode=0660'  # taken at the restart
    r, failures, out, events = provision(lab, proxmox_container_gpu_mode='0660')
    assert r.rc == 0 and changed_tasks(events) == [], changed_tasks(events)
    r, failures, out, events = provision(lab)  # back to the module's default for the tests after this one
    assert r.rc == 0 and lab['ct'].config.get()['dev0'] == '/dev/nvidia0,mode=0666'


def test_rebuild_refuses_without_matching_confirmation(lab):
    before = calls(lab)
    for extra in ({}, {'rebuild_confirm': '101'}):
        r, failures, out, events = play(lab, os.path.join(ROOT, 'playbooks', 'rebuild_container.yml'), **extra)
        assert r.rc != 0
        assert 'Refusing to rebuild CT {0}'.format(VMID) in failures['Refuse without a matching confirmation']
        assert '-e rebuild_confirm={0}'.format(VMID) in failures['Refuse without a matching confirmation']
    assert calls(lab) == before


def test_rebuild_destroys_recreates_and_the_models_survive(lab):
    weights = lab['tmp'] / 'models' / 'kimi-k2.5' / 'model-00001.safetensors'
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_text('weights')
    # Stopped, so no SGLang runs and gpu_release is skipped (it is exercised in the real lab).
    if lab['ct'].status.current.get()['status'] == 'running':
        cli(lab['state'], 'pct', 'stop', str(VMID))
    before = len(calls(lab))
    # The API side alone: the deploy that follows a rebuild runs in the real lab (molecule's rebuild scenario).
    r, failures, out, events = play(lab, os.path.join(ROOT, 'playbooks', 'rebuild_container.yml'),
                                    rebuild_confirm=str(VMID), rebuild_deploy=False)
    assert r.rc == 0, (failures, out[-3000:])
    assert calls(lab)[before:] == ['ct-destroy {0}'.format(VMID), 'ct-create {0}'.format(VMID),
                                   'ct-start {0}'.format(VMID)]
    assert weights.read_text() == 'weights'
    assert lab['ct'].config.get()['mp0'].startswith(str(lab['tmp'] / 'models'))
    assert lab['ct'].status.current.get()['status'] == 'running'
