"""lookup gpuserve.sglang.controller_run (its logic: module_utils/_controller_run.py): this run's identity, and whether a recorded run still lives.

A fake /proc (stat, cmdline, boot_id, btime) drives the process-tree walk and the liveness rules; the real /proc
checks the two on this very process and on a child that has exited.
"""
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _controller_run as cr
from ansible_collections.gpuserve.sglang.plugins.lookup.controller_run import LookupModule

PLAYBOOK = b'/venv/bin/python3\0/venv/bin/ansible-playbook\0-i\0inventory/lab\0playbooks/restart_server.yml\0x.yaml\0'
BOOT = 'b1e4a9f0-0000-4000-8000-000000000001'


def fake_proc(tmp_path, procs, boot=BOOT, btime=1764500000):
    """procs = {pid: (ppid, start_ticks, cmdline bytes, comm)}"""
    root = tmp_path / 'proc'
    for pid, (ppid, ticks, cmdline, comm) in procs.items():
        (root / str(pid)).mkdir(parents=True)
        rest = ['S', str(ppid)] + ['0'] * 17 + [str(ticks)] + ['0'] * 5
        (root / str(pid) / 'stat').write_text('%d (%s) %s\n' % (pid, comm, ' '.join(rest)))
        (root / str(pid) / 'cmdline').write_bytes(cmdline)
    (root / 'sys' / 'kernel' / 'random').mkdir(parents=True)
    (root / 'sys' / 'kernel' / 'random' / 'boot_id').write_text(boot + '\n')
    (root / 'stat').write_text('cpu  1 2 3\nbtime %d\nprocesses 5\n' % btime)
    return str(root)


@pytest.fixture
def proc(tmp_path):
    # 1 init, 50 a shell, 100 ansible-playbook, 200 and 300 its forked workers, 400 a child the worker ran
    return fake_proc(tmp_path, {
        1: (0, 1, b'/sbin/init\0', 'systemd'),
        50: (1, 900, b'-bash\0', 'bash'),
        100: (50, 1000, PLAYBOOK, 'ansible-playboo'),
        200: (100, 2000, PLAYBOOK, 'ansible-playboo'),
        300: (200, 3000, PLAYBOOK, 'ansible-playboo'),
        400: (300, 4000, b'/bin/sh\0-c\0true\0', 'sh'),
    })


def test_the_controller_is_the_outermost_process_with_the_same_command_line(proc):
    assert cr.controller_pid(300, proc) == 100
    assert cr.controller_pid(200, proc) == 100
    assert cr.controller_pid(100, proc) == 100
    assert cr.controller_pid(400, proc) == 400


def test_the_walk_stops_below_init(tmp_path):
    proc = fake_proc(tmp_path, {1: (0, 1, PLAYBOOK, 'x'), 7: (1, 5, PLAYBOOK, 'x')})
    assert cr.controller_pid(7, proc) == 7


def test_a_command_name_with_spaces_and_parentheses(tmp_path):
    proc = fake_proc(tmp_path, {1: (0, 1, b'init\0', 'init'), 9: (1, 77, PLAYBOOK, 'a) (b c')})
    assert cr._stat(9, proc) == (1, 77)


def test_identity(proc, monkeypatch):
    monkeypatch.setattr(os, 'sysconf', lambda name: 100 if name == 'SC_CLK_TCK' else os.sysconf(name))
    run = cr.identity(300, proc, hostname=lambda: 'laptop-1', user=lambda: 'ops')
    assert run == dict(host='laptop-1', boot_id=BOOT, pid=100, start_ticks=1000, started='2025-11-30T10:53:30Z',
                       user='ops', playbooks=['playbooks/restart_server.yml', 'x.yaml'])


def test_boot_time_needs_btime(tmp_path):
    proc = fake_proc(tmp_path, {})
    (tmp_path / 'proc' / 'stat').write_text('cpu 1\n')
    with pytest.raises(ValueError, match='no btime'):
        cr.boot_time(proc)


def run_of(**kw):
    return dict(dict(host='laptop-1', boot_id=BOOT, pid=100, start_ticks=1000), **kw)


@pytest.mark.parametrize('run, answer', [
    (run_of(), 'alive'),
    (run_of(start_ticks=999), 'dead'),  # the PID was reused by another process
    (run_of(pid=555), 'dead'),  # gone
    (run_of(boot_id='another-boot'), 'dead'),  # this controller rebooted since
    (run_of(host='laptop-2'), 'unknown'),  # another controller: nothing here can tell
    (run_of(pid=None), 'unknown'), (run_of(start_ticks=None), 'unknown'), (run_of(boot_id=None), 'unknown'),
    ({'pid': 100, 'start_ticks': 1000, 'boot_id': BOOT}, 'unknown'), ({}, 'unknown'),
])
def test_state(proc, run, answer):
    assert cr.state(run, proc, hostname=lambda: 'laptop-1') == answer


def test_state_of_an_unreadable_stat_is_dead(proc, tmp_path):
    (tmp_path / 'proc' / '100' / 'stat').write_text('100 (x)\n')
    assert cr.state(run_of(), proc, hostname=lambda: 'laptop-1') == 'dead'


def test_the_lookup_on_this_very_process_and_on_one_that_exited():
    lookup = LookupModule()
    me = lookup.run([], {})[0]
    assert me['pid'] == cr.controller_pid(os.getpid())
    assert me['boot_id'] == open('/proc/sys/kernel/random/boot_id').read().strip()
    assert lookup.run([], {}, check=me) == ['alive']
    child = subprocess.Popen([sys.executable, '-c', 'pass'])
    gone = dict(me, pid=child.pid, start_ticks=cr._stat(child.pid, '/proc')[1])
    child.wait()
    assert lookup.run([], {}, check=gone) == ['dead']


@pytest.mark.parametrize('argv, playbooks', [
    # an inventory or vars file ending in .yml is an option's value, not a playbook (the lab's lane overlays)
    (['/venv/bin/python3', '/venv/bin/ansible-playbook', '-i', 'inventory/lab', '-i', 'tests/lab/lanes/faults.yml',
      '--limit', 'ct103', 'playbooks/restart_server.yml'], ['playbooks/restart_server.yml']),
    (['/venv/bin/ansible-playbook', '-e', '@vars.yaml', '--inventory=hosts.yml', 'a.yml', 'b.yaml', '-v'],
     ['a.yml', 'b.yaml']),
    (['python', '/x/ansible-playbook', '--vault-id', 'ops@prompt', 'deploy.yml'], ['deploy.yml']),
    # a line ansible-playbook's parser refuses: every argument ending in .yml or .yaml, after the program
    (['/venv/bin/ansible-playbook', '--no-such-option-takes=1', '-i'], []),
    (['/venv/bin/ansible-playbook', 'p.yml', '-i'], ['p.yml']),
])
def test_the_playbooks_are_read_as_ansible_playbook_reads_its_command_line(argv, playbooks):
    assert cr.playbooks_of(argv) == playbooks
