"""gpu_release's phases against a simulated process table, device nodes and GPU memory behind run_command; and,
exactly, its reasons, messages, the result's shape, grace's edges and what reaches the gate.

gpu_release must not SIGKILL what it has to spare, even when the process table changes under it.

gpu_release with the gate's health stage: a GPU that cannot serve fails the release, in check mode too (where a
memory reading still in use is only reported), and the gate's memory poll never runs after a health refusal."""
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._release import Release, ReleaseError

from ansible_collections.gpuserve.sglang.tests.support.gate import Clock
from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import UUID
from ansible_collections.gpuserve.sglang.tests.support.release import OFF, P, World, killed, params, release, server_world
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import XID79, capture


def test_term_then_holders_then_gate_spares_protected_and_self():
    clock = Clock()
    world = server_world(clock)
    res = release(world, clock)
    assert res['changed'] is True
    assert killed(res) == [(100, 'TERM'), (101, 'TERM'), (201, 'KILL')]
    assert set(world.procs) == {1, 50, 60, 102, 400, 500}
    assert sorted((s['pid'], s['reason']) for s in res['skipped_protected']) == [
        (50, 'protected'), (60, 'protected'), (500, 'this module, its ancestors or its helpers')]
    assert all(num not in (1, 50, 60, 400, 500) and num > 0 for _sig, num in world.signals)
    assert res['device_paths'] == ['/dev/nvidia-uvm', '/dev/nvidia0', '/dev/nvidia1', '/dev/nvidiactl']
    assert res['gate']['passed'] and res['gate']['polls'] == 1
    assert set(res['timings']) == {'term_s', 'kill_s', 'holders_s', 'gate_s'}
    assert 0 < res['kill_to_pass_s'] < 0.2
    assert res['target'] == 'this host' and 'diff' not in res


def test_survivor_gets_group_kill_after_grace():
    clock = Clock()
    world = server_world(clock)
    world.procs[101].term = False  # ignores SIGTERM
    res = release(world, clock, grace=2.0)
    assert ('KILL', -100) in world.signals
    assert (102, 'KILL') in killed(res)  # its process group, though 102 matches no pattern
    assert 2.0 <= res['timings']['term_s'] < 2.2
    assert 101 not in world.procs and 102 not in world.procs


def test_group_holding_an_excluded_pid_is_killed_pid_by_pid():
    clock = Clock()
    world = server_world(clock)
    world.procs[101].term = False
    res = release(world, clock, grace=0.5, exclude_pids=[102])
    assert ('KILL', 101) in world.signals and ('KILL', -100) not in world.signals
    assert 102 in world.procs and 101 not in world.procs
    assert (102, 'KILL') not in killed(res)


def test_stuck_zombie_gets_its_parent_killed():
    clock = Clock()
    world = World([P(1, 0, 1, '/sbin/init'),
                   P(300, 1, 300, 'bash run.sh'),
                   P(301, 300, 301, 'sglang::scheduler_TP0', mib=10, zombie=True)], clock)
    res = release(world, clock, self_pid=None, grace=15)
    assert killed(res) == [(301, 'TERM'), (300, 'KILL')]
    assert res['killed'][1]['reason'] == 'parent of a zombie'
    assert set(world.procs) == {1}
    assert res['timings']['term_s'] < 1.2  # zombies get ZOMBIE_SETTLE_S, not the whole grace


def test_zombie_of_pid1_is_left_alone():
    clock = Clock()
    world = World([P(1, 0, 1, '/sbin/init'), P(301, 1, 301, 'sglang::scheduler_TP0', zombie=True)], clock)
    res = release(world, clock, self_pid=None)
    assert killed(res) == [(301, 'TERM')]
    assert [(s['pid'], s['reason']) for s in res['skipped_protected']] == [(1, 'PID 1')]


def test_check_mode_lists_and_kills_nothing():
    clock = Clock()
    world = server_world(clock, check_mode=True, diff=True)
    res = release(world, clock)
    assert world.signals == [] and not any(c[0] == 'kill' for c in world.calls)
    assert killed(res) == [(100, 'TERM'), (101, 'TERM'), (201, 'KILL')]
    assert res['changed'] is True and res['kill_to_pass_s'] is None
    gate = res['gate']
    assert gate['passed'] is False and gate['polls'] == 1 and 'still holds 82920 MiB' in gate['msg']
    assert res['diff']['before'].startswith('100 /opt/sglang/venv/bin/python -m sglang.launch_server')
    assert res['diff']['after'] == ''


def test_nothing_to_do_is_unchanged():
    clock = Clock()
    world = World([P(1, 0, 1, '/sbin/init'), P(50, 1, 50, 'nvidia-persistenced', holds={'/dev/nvidiactl'})], clock)
    res = release(world, clock, self_pid=None)
    assert res['changed'] is False and res['killed'] == [] and res['kill_to_pass_s'] is None
    assert res['gate']['passed']
    assert [c[0] for c in world.calls] == ['ps', 'ls', 'fuser', 'nvidia-smi']


def test_in_a_pct_container_everything_but_the_gate_runs_inside():
    clock = Clock()
    world = server_world(clock, vmid=101)
    res = release(world, clock, self_pid=None, target='pct', vmid=101)
    assert res['target'] == 'CT 101'
    assert killed(res) == [(100, 'TERM'), (101, 'TERM'), (201, 'KILL'), (500, 'KILL')]  # no self in this namespace


def test_gate_failure_fails_with_what_was_killed():
    clock = Clock()
    world = server_world(clock, other_mib=2048)  # memory held where this target cannot see
    with pytest.raises(ReleaseError) as exc:
        release(world, clock, gate=dict(timeout=0.3))
    assert exc.value.msg.startswith('gate: gate timed out') and 'still holds 2048 MiB' in exc.value.msg
    assert killed(exc.value.result) == [(100, 'TERM'), (101, 'TERM'), (201, 'KILL')]
    assert exc.value.result['changed'] is True and exc.value.result['gate']['passed'] is False


def test_gate_disabled():
    clock = Clock()
    res = release(server_world(clock), clock, gate=dict(enabled=False))
    assert res['gate'] is None and res['kill_to_pass_s'] is None


@pytest.mark.parametrize('answer, needle', [
    ((1, '', 'kill: (101): Operation not permitted'), 'Operation not permitted'),
    ((124, '', ''), 'timed out'),
])
def test_kill_failure_fails_closed(answer, needle):
    clock = Clock()
    world = server_world(clock)
    world.kill_answer = answer
    with pytest.raises(ReleaseError, match='kill -s TERM in this host failed: .*' + needle):
        release(world, clock)


def test_stopped_container_fails_closed():
    clock = Clock()
    world = server_world(clock, vmid=101)
    world.cmd_ps = lambda argv: (255, '', 'CT 101 not running\n')
    with pytest.raises(ReleaseError, match='listing processes in CT 101 failed \\(rc 255\\): CT 101 not running'):
        release(world, clock, self_pid=None, target='pct', vmid=101)


def test_bad_pattern_and_glob():
    clock = Clock()
    with pytest.raises(ReleaseError, match='invalid server pattern'):
        release(server_world(clock), clock, server_patterns=['sglang('])
    with pytest.raises(ReleaseError, match='absolute path'):
        release(server_world(clock), clock, device_globs=['nvidia*'])


def test_extra_protected_and_no_holder_kill():
    clock = Clock()
    world = server_world(clock)
    off = dict(enabled=False)  # train.py keeps its 1000 MiB here
    res = release(world, clock, extra_protected_patterns=['train\\.py'], kill_device_holders=False, gate=off)
    assert killed(res) == [(100, 'TERM'), (101, 'TERM')]
    assert 201 in world.procs and not any(c[0] == 'fuser' for c in world.calls)
    res = release(server_world(clock), clock, extra_protected_patterns=['train\\.py'], gate=off)
    assert (201, 'protected') in [(s['pid'], s['reason']) for s in res['skipped_protected']]


def test_signal_epoch_is_the_wall_clock_just_before_the_first_signal():
    clock = Clock()
    world = server_world(clock)
    walls = iter([1000.5, 2000.5, 3000.5])
    res = Release(world, params(), clock, clock.sleep, '/nonexistent', 500, wall=lambda: next(walls)).run()
    # TERM to the servers and a KILL to a holder: only the first signal is the outside observer's zero.
    assert killed(res) == [(100, 'TERM'), (101, 'TERM'), (201, 'KILL')]
    assert res['signal_epoch'] == 1000.5


def test_the_gates_pass_is_on_the_wall_clock_and_null_when_it_did_not_pass():
    clock = Clock()
    world = server_world(clock)
    res = Release(world, params(), clock, clock.sleep, '/nonexistent', 500, wall=lambda: 1.7e9 + clock()).run()
    assert res['gate_passed_epoch'] == 1.7e9 + clock() and res['gate']['passed']
    assert release(server_world(clock), clock, gate=OFF)['gate_passed_epoch'] is None


def test_signal_epoch_is_null_when_nothing_was_signalled():
    clock = Clock()
    world = server_world(clock, check_mode=True)
    res = Release(world, params(), clock, clock.sleep, '/nonexistent', 500, wall=lambda: 1.0).run()
    assert res['killed'] and res['signal_epoch'] is None


KEYS = {'changed', 'killed', 'skipped_protected', 'device_paths', 'gate', 'timings', 'kill_to_pass_s', 'target',
        'signal_epoch', 'gate_passed_epoch'}
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


def test_grace_ends_at_once_when_every_target_is_gone():
    clock = Clock()
    world = FreeWorld([P(1, 0, 1, '/sbin/init'), P(100, 1, 100, 'sglang::scheduler_TP0')], clock)
    res = release(world, clock, self_pid=None, grace=15.0, grace_poll_interval=0.5, gate=OFF)
    assert clock.slept == [] and res['timings']['term_s'] == 0.0
    assert killed(res) == [(100, 'TERM')]


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


# gpu_release must not SIGKILL what it has to spare, even when the process table changes under it

class RacyWorld(World):
    """A World where processes start between the module's commands and where an exited PID can be reused.

    spawn[(cmd, n)] is a P that starts just before the n-th `cmd` (ps, ls, fuser) answers; reuse[pid] is a P
    that takes pid over as soon as its owner dies.
    """

    def __init__(self, procs, clock, spawn=None, reuse=None, **kw):
        super().__init__(procs, clock, **kw)
        self.spawn, self.reuse, self.seen = dict(spawn or {}), dict(reuse or {}), {}

    def arrive(self, cmd):
        self.seen[cmd] = self.seen.get(cmd, 0) + 1
        proc = self.spawn.pop((cmd, self.seen[cmd]), None)
        if proc is not None:
            assert proc.pid not in self.procs
            self.procs[proc.pid] = proc

    def cmd_ps(self, argv):
        self.arrive('ps')
        return super().cmd_ps(argv)

    def cmd_ls(self, argv):
        self.arrive('ls')
        return super().cmd_ls(argv)

    def cmd_fuser(self, argv):
        self.arrive('fuser')
        return super().cmd_fuser(argv)

    def die(self, proc):
        super().die(proc)
        if proc.pid in self.reuse:
            self.procs[proc.pid] = self.reuse.pop(proc.pid)


def signalled(world, pid):
    return [(sig, num) for sig, num in world.signals if abs(num) == pid]


def skipped(res):
    return sorted((s['pid'], s['reason']) for s in res['skipped_protected'])


def daemons():
    """One daemon per default protected pattern, each matching only its own; each holds a device node, so only
    the policy stands between it and the holder SIGKILL (`fuser -k /dev/nvidia*` would kill them all)."""
    return [
        P(50, 1, 50, '/usr/bin/nvidia-persistenced --user nvidia-persistenced', holds={'/dev/nvidiactl'}),
        P(51, 1, 51, '/usr/bin/nv-hostengine -n', holds={'/dev/nvidia0'}),
        P(52, 1, 52, '/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv', holds={'/dev/nvidia0'}),
        P(53, 1, 53, 'nvidia_gpu_exporter --web.listen-address=:9835', holds={'/dev/nvidia1', '/dev/nvidiactl'}),
        P(54, 1, 54, '/usr/local/bin/node_exporter --collector.textfile', holds={'/dev/nvidiactl'}),
        P(55, 1, 55, '/usr/local/bin/prometheus --storage.tsdb.path=/var/lib/prometheus', holds={'/dev/nvidiactl'}),
    ]


def test_extra_protected_patterns_add_to_the_defaults():
    """extra_protected_patterns exists so a user can spare one more process without restating (or losing) the
    defaults: with it given, every default daemon and the extra one are spared, and other holders still die."""
    clock = Clock()
    spared = daemons()
    world = World([P(1, 0, 1, '/sbin/init')] + spared + [
        P(100, 1, 100, '/opt/sglang/venv/bin/python -m sglang.launch_server --tp 1', holds={'/dev/nvidia0'}),
        P(201, 1, 201, 'python3 train.py', holds={'/dev/nvidia1'}),
        P(202, 1, 202, 'python3 notebook.py', holds={'/dev/nvidia1'}),
    ], clock)
    res = release(world, clock, self_pid=None, extra_protected_patterns=[r'train\.py'], gate=OFF)
    assert killed(res) == [(100, 'TERM'), (202, 'KILL')]
    assert world.signals == [('TERM', 100), ('KILL', 202)]
    assert skipped(res) == [(p.pid, 'protected') for p in spared] + [(201, 'protected')]
    assert {50, 51, 52, 53, 54, 55, 201} <= set(world.procs)


def test_reused_pid_after_sigterm_is_not_killed():
    """A server that exits on SIGTERM can hand its PID to someone else (here an sshd session) before the
    SIGKILL phase; a survivor is the same PID with the same command line, so the newcomer is left alone."""
    clock = Clock()
    sshd = P(300, 1, 300, 'sshd: root@pts/0')
    world = RacyWorld([
        P(1, 0, 1, '/sbin/init'),
        P(100, 1, 100, '/opt/sglang/venv/bin/python -m sglang.launch_server --tp 1'),
        P(101, 100, 100, 'sglang::scheduler_TP0', mib=81920, holds={'/dev/nvidia0'}, term=False),
        P(300, 1, 300, '/usr/local/bin/sglang serve --model /m', mib=1024, holds={'/dev/nvidia1'}),
    ], clock, reuse={300: sshd})
    res = release(world, clock, self_pid=None, grace=1.0, gate=OFF)
    assert ('KILL', -100) in world.signals  # the SIGKILL phase did run, against the real survivor
    assert signalled(world, 300) == [('TERM', 300)]
    assert (300, 'KILL') not in killed(res)
    assert world.procs[300] is sshd


def test_daemon_started_before_the_holder_scan_is_protected():
    """nvidia-persistenced starting after the first listing shows up first in fuser's answer: the module must
    list again and judge it by a fresh protection set, not by the one made before it existed."""
    clock = Clock()
    daemon = P(50, 1, 50, '/usr/bin/nvidia-persistenced --user nvidia-persistenced', holds={'/dev/nvidiactl'})
    world = RacyWorld([
        P(1, 0, 1, '/sbin/init'),
        P(201, 1, 201, 'python3 train.py', holds={'/dev/nvidia1'}),
    ], clock, spawn={('fuser', 1): daemon})
    res = release(world, clock, self_pid=None, gate=OFF)
    assert [c[0] for c in world.calls] == ['ps', 'ls', 'fuser', 'ps', 'kill']
    assert world.signals == [('KILL', 201)]  # the holder scan ran and killed the unprotected holder
    assert signalled(world, 50) == [] and world.procs[50] is daemon
    assert (50, 'protected') in skipped(res)


def test_daemon_started_during_grace_is_protected():
    """A daemon that starts while the servers get their grace is in the table the holder scan reuses; the
    protection set must be made again from that table, not kept from the listing before SIGTERM."""
    clock = Clock()
    daemon = P(50, 1, 50, '/usr/bin/nvidia-persistenced --user nvidia-persistenced', holds={'/dev/nvidiactl'})
    world = RacyWorld([
        P(1, 0, 1, '/sbin/init'),
        P(100, 1, 100, '/opt/sglang/venv/bin/python -m sglang.launch_server --tp 1', holds={'/dev/nvidiactl'}),
        P(101, 100, 100, 'sglang::scheduler_TP0', mib=81920, holds={'/dev/nvidia0'}),
        P(201, 1, 201, 'python3 train.py', holds={'/dev/nvidia1'}),
    ], clock, spawn={('ps', 2): daemon})  # ps 1: before SIGTERM; ps 2: grace's first poll
    res = release(world, clock, self_pid=None, gate=OFF)
    assert killed(res) == [(100, 'TERM'), (101, 'TERM'), (201, 'KILL')]
    assert signalled(world, 50) == [] and world.procs[50] is daemon
    assert (50, 'protected') in skipped(res)


def test_pid_reused_by_a_protected_daemon_before_the_holder_scan_is_spared():
    """A holder in the first listing exits and its PID goes to nvidia-persistenced before fuser answers: fuser
    reports the PID, and the module must judge it by what holds it now, not by the old listing's entry."""
    clock = Clock()
    daemon = P(202, 1, 202, '/usr/bin/nvidia-persistenced --user nvidia-persistenced', holds={'/dev/nvidiactl'})
    notebook = P(202, 1, 202, 'python3 notebook.py', holds={'/dev/nvidia1'})

    class Reuse(RacyWorld):
        def cmd_fuser(self, argv):
            self.procs[202] = daemon  # notebook.py exited after the listing; its PID is the daemon's now
            return super().cmd_fuser(argv)

    world = Reuse([P(1, 0, 1, '/sbin/init'), notebook,
                   P(201, 1, 201, 'python3 train.py', holds={'/dev/nvidia1'})], clock)
    res = release(world, clock, self_pid=None, gate=OFF)
    assert world.signals == [('KILL', 201)]
    assert signalled(world, 202) == [] and world.procs[202] is daemon
    assert (202, 'protected') in skipped(res)


# gpu_release with the gate's health stage: a GPU that cannot serve fails the release, in check mode too (where a

class HealthWorld(World):
    """server_world's processes, the captured H200's health line and a kernel log."""

    dmesg = capture('dmesg_xid')

    def cmd_nvidia_smi(self, argv):
        if 'pcie.link.gen.current' in argv[1]:
            return 0, capture('health_csv_noheader'), ''
        return super().cmd_nvidia_smi(argv)

    def cmd_dmesg(self, argv):
        return 0, self.dmesg, ''

    def warn(self, text):
        pass


def world(clock, dmesg=None, **kw):
    base = server_world(clock, **kw)
    made = HealthWorld(list(base.procs.values()), clock, **kw)
    if dmesg is not None:
        made.dmesg = dmesg
    return made


def test_a_healthy_gpu_releases_and_gates_with_the_health_result():
    clock = Clock()
    res = release(world(clock), clock, gate=dict(health={}))
    assert res['gate']['passed'] and res['gate']['health']['passed']
    assert res['gate']['health']['gpus'][0]['bus_id'] == '0000:00:06.0'


@pytest.mark.parametrize('check_mode', [False, True])
def test_an_xid_fails_the_release_even_in_check_mode(check_mode):
    clock = Clock()
    w = world(clock, dmesg=XID79, check_mode=check_mode)
    with pytest.raises(ReleaseError) as err:
        release(w, clock, gate=dict(health={}))
    assert err.value.msg.startswith('gate: GPU health: not starting')
    assert 'GPU 0 (bus 0000:00:06.0): xid' in err.value.msg
    assert err.value.result['gate']['health']['passed'] is False
    memory_reads = [c for c in w.calls if c[0] == 'nvidia-smi' and 'memory.used' in c[1]]
    assert memory_reads == []


# ------------------------------------------------------------------------- the server's own stop and start around it

STOP = ['gpuserve-sglang', 'stop', '--port', '30000']
START = ['gpuserve-sglang', 'start', '--unit', 'sglang.service']


class Hooks(World):
    """The world with the container helper: its stop ends the server's processes (as SIGKILL to the unit's control
    group does), its start answers; `answers` overrides either's (rc, stdout, stderr)."""

    def __init__(self, *args, answers=None, **kwargs):
        World.__init__(self, *args, **kwargs)
        self.answers = answers or {}

    def cmd_gpuserve_sglang(self, argv):
        if argv[1] == 'stop' and 'stop' not in self.answers:
            for pid in (102, 101, 100):
                self.die(self.procs[pid])
        return self.answers.get(argv[1], (0, '{"how": "%s"}' % argv[1], ''))


def hooks_world(clock, **kw):
    return Hooks(server_world(clock).procs.values(), clock, **kw)


def test_the_servers_own_stop_runs_first_and_its_start_once_the_gate_passed():
    clock = Clock()
    world = hooks_world(clock)
    res = release(world, clock, stop_command=STOP, start_command=START, hook_timeout=120)
    assert [c[0] for c in world.calls] == ['gpuserve-sglang', 'ps', 'ls', 'fuser', 'ps', 'kill', 'nvidia-smi',
                                           'gpuserve-sglang']
    assert killed(res) == [(201, 'KILL')]  # the server was gone already; the stray holder is still killed
    assert res['stop'] == {'rc': 0, 'answer': {'how': 'stop'}, 'stdout': '{"how": "stop"}', 'stderr': ''}
    assert res['start']['answer'] == {'how': 'start'} and res['gate']['passed'] and res['changed'] is True
    assert list(res['timings']) == ['stop_s', 'term_s', 'kill_s', 'holders_s', 'gate_s', 'start_s']


def test_the_commands_run_under_their_own_timeout():
    clock = Clock()
    world = hooks_world(clock)
    seen = []
    run = world.run_command

    def run_command(argv, **kwargs):
        seen.append(argv[:3])
        return run(argv, **kwargs)
    world.run_command = run_command
    release(world, clock, stop_command=STOP, start_command=START, hook_timeout=95)
    assert seen[0] == seen[-1] == ['/usr/bin/timeout', '--kill-after=1', '95s']


def test_a_failed_stop_fails_before_anything_is_released():
    clock = Clock()
    world = hooks_world(clock, answers={'stop': (1, '{"error": "sglang.service: SIGKILL failed"}', '')})
    with pytest.raises(ReleaseError) as exc:
        release(world, clock, stop_command=STOP, start_command=START)
    assert exc.value.msg == 'stop_command in this host failed (rc 1): sglang.service: SIGKILL failed'
    assert [c[0] for c in world.calls] == ['gpuserve-sglang'] and exc.value.result['stop']['rc'] == 1
    assert 'start' not in exc.value.result and exc.value.result['changed'] is True


def test_nothing_starts_on_gpus_the_gate_did_not_pass():
    clock = Clock()
    world = hooks_world(clock, other_mib=2048)
    with pytest.raises(ReleaseError) as exc:
        release(world, clock, stop_command=STOP, start_command=START, gate=dict(timeout=0.3))
    assert exc.value.msg.startswith('gate: gate timed out') and 'start' not in exc.value.result
    assert world.calls[-1][0] == 'nvidia-smi'


def test_a_failed_start_fails_with_what_it_said_after_a_passed_gate():
    clock = Clock()
    world = hooks_world(clock, answers={'start': (1, '', 'Job for sglang.service failed.\n')})
    with pytest.raises(ReleaseError) as exc:
        release(world, clock, stop_command=STOP, start_command=START)
    assert exc.value.msg == 'start_command in this host failed (rc 1): Job for sglang.service failed.'
    assert exc.value.result['gate']['passed'] and exc.value.result['start']['rc'] == 1


def test_a_start_alone_on_an_idle_host_is_a_change():
    """Nothing to stop, release or kill: the start that ran is still the call's change."""
    clock = Clock()
    world = Hooks([P(1, 0, 1, '/sbin/init'), P(50, 1, 50, 'nvidia-persistenced', holds={'/dev/nvidiactl'})], clock)
    res = release(world, clock, self_pid=None, start_command=START)
    assert res['killed'] == [] and 'stop' not in res and res['start']['rc'] == 0
    assert res['changed'] is True


def test_check_mode_runs_neither_command():
    clock = Clock()
    world = hooks_world(clock, check_mode=True)
    res = release(world, clock, stop_command=STOP, start_command=START)
    assert res['stop'] == res['start'] == {'skipped': 'check mode'}
    assert 'gpuserve-sglang' not in [c[0] for c in world.calls]
