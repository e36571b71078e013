"""gpu_release exactly: reasons, messages, the result's shape, grace's edges and what reaches the gate."""
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._release import Release, ReleaseError
from ansible_collections.gpuserve.sglang.tests.unit.plugins.module_utils.test_gate import Clock
from ansible_collections.gpuserve.sglang.tests.unit.plugins.module_utils.test_release import (
    UUID, P, World, killed, params, release, server_world)

OFF = dict(enabled=False)
KEYS = {'changed', 'killed', 'skipped_protected', 'device_paths', 'gate', 'timings', 'kill_to_pass_s', 'target',
        'signal_epoch'}
DEVICES = '/dev/nvidia-uvm /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl'


class FreeWorld(World):
    """Commands take no time: only the module's own sleeps move the clock, so grace's edges fall on exact values."""

    def run_command(self, argv, **kwargs):
        now = self.clock.now
        try:
            return super().run_command(argv, **kwargs)
        finally:
            self.clock.now = now


class StuckWorld(World):
    """Processes in `stuck` (uninterruptible sleep) survive even SIGKILL and keep their device nodes."""

    def __init__(self, procs, clock, stuck=(), **kw):
        super().__init__(procs, clock, **kw)
        self.stuck = set(stuck)

    def die(self, proc):
        if proc.pid not in self.stuck:
            super().die(proc)


class AppsWorld(World):
    """nvidia-smi also answers the compute-apps query, so a failed gate names its holders; reads are bounded."""

    def __init__(self, procs, clock, apps='', **kw):
        super().__init__(procs, clock, **kw)
        self.apps, self.reads = apps, 0

    def cmd_nvidia_smi(self, argv):
        self.reads += 1
        assert self.reads < 200, 'the gate polls without end: its clock or sleep is not the fake one'
        if argv[1].startswith('--query-compute-apps'):
            return 0, self.apps, ''
        return super().cmd_nvidia_smi(argv)


def reasons(res):
    return [(k['pid'], k['signal'], k['reason']) for k in res['killed']]


def test_reasons_for_each_kind_of_kill():
    clock = Clock()
    world = server_world(clock)
    world.procs[101].term = False
    res = release(world, clock, grace=0.5)
    assert reasons(res) == [
        (100, 'TERM', 'matches a server pattern'), (101, 'TERM', 'matches a server pattern'),
        (101, 'KILL', 'survived SIGTERM'), (102, 'KILL', 'survived SIGTERM'),
        (201, 'KILL', 'holds ' + DEVICES)]


def test_survivor_in_an_unsafe_group_is_killed_alone_for_surviving():
    clock = Clock()
    world = server_world(clock)
    world.procs[101].term = False
    res = release(world, clock, grace=0.5, exclude_pids=[102], gate=OFF)
    assert (101, 'KILL', 'survived SIGTERM') in reasons(res)
    assert world.signals.index(('KILL', 101)) < world.signals.index(('KILL', 201))


def test_what_already_got_sigkill_is_not_killed_again_as_a_holder():
    clock = Clock()
    world = StuckWorld([
        P(1, 0, 1, '/sbin/init'),
        P(100, 1, 100, '/opt/sglang/venv/bin/python -m sglang.launch_server --tp 1'),
        P(101, 100, 100, 'sglang::scheduler_TP0', holds={'/dev/nvidia0'}, term=False),
        P(102, 100, 100, '/opt/sglang/venv/bin/python -c from multiprocessing.spawn import spawn_main',
          holds={'/dev/nvidia1'}, term=False),
    ], clock, stuck={101, 102})
    res = release(world, clock, self_pid=None, grace=0.5, gate=OFF)
    assert killed(res) == [(100, 'TERM'), (101, 'TERM'), (101, 'KILL'), (102, 'KILL')]
    assert [c[0] for c in world.calls].count('kill') == 2


def test_zombie_whose_parent_is_outside_the_table_is_left_to_init():
    clock = Clock()
    world = World([P(1, 0, 1, '/sbin/init'), P(301, 0, 301, 'sglang::scheduler_TP0', zombie=True)], clock)
    res = release(world, clock, self_pid=None, gate=OFF)
    assert killed(res) == [(301, 'TERM')] and res['skipped_protected'] == []


def test_grace_ends_exactly_at_its_limit():
    clock = Clock()
    world = FreeWorld([P(1, 0, 1, '/sbin/init'),
                       P(100, 1, 100, 'sglang::scheduler_TP0', term=False)], clock)
    res = release(world, clock, self_pid=None, grace=1.0, grace_poll_interval=0.5, gate=OFF)
    assert clock.slept == [0.5, 0.5]
    assert res['timings']['term_s'] == 1.0
    assert killed(res) == [(100, 'TERM'), (100, 'KILL')]


def test_a_zombie_gets_exactly_its_settle_time():
    clock = Clock()
    world = FreeWorld([P(1, 0, 1, '/sbin/init'), P(300, 1, 300, 'bash run.sh'),
                       P(301, 300, 301, 'sglang::scheduler_TP0', zombie=True)], clock)
    res = release(world, clock, self_pid=None, grace=15.0, grace_poll_interval=0.5, gate=OFF)
    assert clock.slept == [0.5, 0.5]
    assert killed(res) == [(301, 'TERM'), (300, 'KILL')]


def test_timings_and_kill_to_pass_are_rounded_to_a_tenth_of_a_millisecond():
    class Slow(World):
        def run_command(self, argv, **kwargs):
            self.clock.now += 0.000123
            return super().run_command(argv, **kwargs)
    clock = Clock()
    res = release(Slow(server_world(clock).procs.values(), clock), clock)
    values = list(res['timings'].values()) + [res['kill_to_pass_s']]
    assert all(v >= 0 and abs(v * 10000 - round(v * 10000)) < 1e-6 for v in values), values
    assert res['kill_to_pass_s'] == 0.0709 and res['timings']['term_s'] == 0.0304


def test_result_keys_on_success_and_on_failure():
    clock = Clock()
    assert set(release(server_world(clock), clock)) == KEYS
    world = server_world(clock)
    world.kill_answer = (1, '', 'kill: (100): Operation not permitted')
    with pytest.raises(ReleaseError) as exc:
        release(world, clock)
    assert exc.value.msg == 'kill -s TERM in this host failed: rc 1: kill: (100): Operation not permitted'
    result = exc.value.result
    assert set(result) == KEYS and result['gate'] is None and result['killed'] == []
    assert result['changed'] is False and result['device_paths'] == []


def test_diff_lists_every_killed_process():
    clock = Clock()
    res = release(server_world(clock, diff=True), clock, gate=OFF)
    assert res['diff'] == dict(after='', before=(
        '100 /opt/sglang/venv/bin/python -m sglang.launch_server --tp 1\n'
        '101 sglang::scheduler_TP0\n'
        '201 python3 train.py\n'))


@pytest.mark.parametrize('command, answer, msg, killed', [
    ('ps', (124, 'partial\n', ''), 'listing processes in this host failed (rc 124, timed out): partial; is it running?', None),
    ('ps', (1, '', 'ps: error\n'), 'listing processes in this host failed (rc 1): ps: error; is it running?', None),
    ('ls', (2, '', "ls: cannot access '/dev': No such file or directory\n"),
     "listing /dev in this host failed (rc 2): ls: cannot access '/dev': No such file or directory", [100, 101]),
])
def test_a_failing_listing_fails_with_its_exact_message(command, answer, msg, killed):
    clock = Clock()
    world = server_world(clock)
    setattr(world, 'cmd_' + command, lambda argv: answer)
    with pytest.raises(ReleaseError) as exc:
        release(world, clock)
    assert exc.value.msg == msg
    if killed is not None:  # the device listing comes after the servers were signalled
        assert [k['pid'] for k in exc.value.result['killed']] == killed


def test_local_release_spares_its_own_pid_by_default():
    clock = Clock()
    me = os.getpid()
    world = World([P(1, 0, 1, '/sbin/init'), P(me, 1, me, 'python3 AnsiballZ_gpu_release.py', holds={'/dev/nvidiactl'}),
                   P(me + 1, 1, me + 1, 'python3 train.py', holds={'/dev/nvidia0'})], clock)
    res = Release(world, params(gate=OFF), clock, clock.sleep).run()
    assert killed(res) == [(me + 1, 'KILL')]
    assert res['skipped_protected'] == [dict(pid=me, cmdline='python3 AnsiballZ_gpu_release.py',
                                             reason='this module, its ancestors or its helpers')]


def test_gate_runs_on_the_module_clock_and_names_holders_from_proc_root(tmp_path):
    (tmp_path / '4242').mkdir()
    (tmp_path / '4242' / 'cgroup').write_text('0::/lxc/105/ns/init.scope\n')
    clock = Clock()
    world = AppsWorld([P(1, 0, 1, '/sbin/init')], clock, other_mib=2048, apps='%s, 4242, 2048\n' % UUID)
    with pytest.raises(ReleaseError) as exc:
        Release(world, params(gate=dict(timeout=0.3, poll_interval=0.1)), clock, clock.sleep, str(tmp_path), None).run()
    assert 'GPU 0 still holds 2048 MiB (limit 0): pid 4242 in CT 105' in exc.value.msg
    gate = exc.value.result['gate']
    assert gate['polls'] == 4 and 0.3 <= gate['elapsed_s'] < 0.35
    assert clock.slept and sum(clock.slept) == pytest.approx(0.3 - 3 * 0.01)


@pytest.mark.skipif(not os.path.exists('/proc/self/cgroup'), reason='needs /proc/PID/cgroup')
def test_gate_names_holders_from_the_real_proc_by_default():
    clock = Clock()
    me = os.getpid()
    world = AppsWorld([P(1, 0, 1, '/sbin/init')], clock, other_mib=10, apps='%s, %d, 10\n' % (UUID, me))
    with pytest.raises(ReleaseError) as exc:
        Release(world, params(gate=dict(timeout=0.1)), clock, clock.sleep, self_pid=None).run()
    assert 'pid %d ' % me in exc.value.msg and 'container unknown' not in exc.value.msg
