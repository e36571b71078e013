"""gpu_release's phases against a simulated process table, device nodes and GPU memory behind run_command."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._release import (
    GATE_OPTIONS, RELEASE_ARGS, Release, ReleaseError)
from ansible_collections.gpuserve.sglang.plugins.module_utils._procs import PS_SIGNATURE

from ansible_collections.gpuserve.sglang.tests.unit.plugins.module_utils.test_gate import Clock

DEV = 'autofs\ncpu/\nnull\nnvidia-caps/\nnvidia-uvm\nnvidia0\nnvidia1\nnvidiactl\n'
UUID = 'GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7'


class P:
    def __init__(self, pid, ppid, pgid, args, mib=0, holds=(), term=True, zombie=False):
        self.pid, self.ppid, self.pgid, self.args, self.mib = pid, ppid, pgid, args, mib
        self.holds, self.term, self.zombie, self.stat = set(holds), term, zombie, 'S'


class World:
    """Processes in one PID namespace; the fake module whose run_command answers ps/kill/ls/fuser/nvidia-smi."""

    def __init__(self, procs, clock, check_mode=False, diff=False, vmid=None, other_mib=0):
        self.procs = dict((p.pid, p) for p in procs)
        self.clock, self.check_mode, self._diff, self.vmid, self.other_mib = clock, check_mode, diff, vmid, other_mib
        self.calls, self.signals, self.kill_answer = [], [], None

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def run_command(self, argv, **kwargs):
        self.clock.now += 0.01
        assert argv[:2] == ['/usr/bin/timeout', '--kill-after=1']
        inner = argv[3:]
        if inner[0] == '/usr/bin/pct':
            assert inner[1:4] == ['exec', str(self.vmid), '--']
            inner = inner[4:]
        elif self.vmid is not None:
            assert inner[0] == 'nvidia-smi', 'only the gate may run outside the container: %r' % inner
        self.calls.append(inner)
        return getattr(self, 'cmd_' + inner[0].replace('-', '_'))(inner)

    def cmd_ps(self, argv):
        assert ' '.join(argv) == PS_SIGNATURE
        rows = ['%5d %5d %5d %-4s %s' % (p.pid, p.ppid, p.pgid, p.stat, p.args) for p in self.procs.values()]
        rows.append('  999     0   999 R    ' + PS_SIGNATURE)
        return 0, '\n'.join(rows) + '\n', ''

    def die(self, proc):
        proc.holds, proc.mib = set(), 0
        for child in self.procs.values():
            if child.ppid == proc.pid and child.stat == 'Z':
                child.ppid = 1  # init reaps it
                del self.procs[child.pid]
                break
        if proc.zombie:
            proc.stat, proc.args = 'Z', '[%s] <defunct>' % proc.args.split()[0][:15]
        else:
            del self.procs[proc.pid]

    def cmd_kill(self, argv):
        assert argv[:2] == ['kill', '-s'] and argv[3] == '--'
        if self.kill_answer:
            return self.kill_answer
        sig, errors = argv[2], []
        for target in argv[4:]:
            num = int(target)
            self.signals.append((sig, num))
            # Loud, whatever the test asserts: kill(1) reads 1 as init, 0 as its own group, -1 as every process.
            assert num not in (1, 0, -1), 'kill -s %s -- %d reached init, a whole group or everyone' % (sig, num)
            members = [p for p in self.procs.values() if (p.pgid == -num if num < 0 else p.pid == num)]
            if not members:
                errors.append('kill: (%d): No such process' % num)
            for proc in members:
                assert proc.pid != 1, 'kill -s %s -- %d reached PID 1' % (sig, num)
                # Only a group SIGKILL may reach a zombie; a SIGTERM to one was aimed from a stale table.
                assert proc.stat != 'Z' or sig == 'KILL', 'kill -s %s -- %d reached zombie %d' % (sig, num, proc.pid)
                if proc.stat != 'Z' and (sig == 'KILL' or proc.term):
                    self.die(proc)
        return (1 if errors else 0), '', '\n'.join(errors)

    def cmd_ls(self, argv):
        assert argv == ['ls', '-1', '-p', '/dev']
        return 0, DEV, ''

    def cmd_fuser(self, argv):
        pids = sorted(p.pid for p in self.procs.values() if p.holds & set(argv[1:]))
        return (0 if pids else 1), ''.join(' %5d' % p for p in pids), ''.join('%s: m\n' % a for a in argv[1:])

    def cmd_nvidia_smi(self, argv):
        used = sum(p.mib for p in self.procs.values()) + self.other_mib
        return 0, '0, %s, %d, 143771\n' % (UUID, used), ''


def server_world(clock, **kw):
    return World([
        P(1, 0, 1, '/sbin/init'),
        P(50, 1, 50, '/usr/bin/nvidia-persistenced --user nvidia-persistenced', holds={'/dev/nvidiactl'}),
        P(60, 1, 60, 'nvidia_gpu_exporter --web.listen-address=:9835', holds={'/dev/nvidia0', '/dev/nvidiactl'}),
        P(100, 1, 100, '/opt/sglang/venv/bin/python -m sglang.launch_server --tp 1', holds={'/dev/nvidiactl'}),
        P(101, 100, 100, 'sglang::scheduler_TP0', mib=81920, holds={'/dev/nvidia0', '/dev/nvidia-uvm'}),
        P(102, 100, 100, '/opt/sglang/venv/bin/python -c from multiprocessing.spawn import spawn_main'),
        P(201, 1, 201, 'python3 train.py', mib=1000, holds={'/dev/nvidia1'}),
        P(400, 1, 400, '/usr/bin/python3 /usr/bin/ansible-playbook site.yml'),
        P(500, 400, 400, '/usr/bin/python3 AnsiballZ_gpu_release.py', holds={'/dev/nvidiactl'}),
    ], clock, **kw)


def params(**kw):
    p = dict((k, v.get('default')) for k, v in RELEASE_ARGS.items())
    p.update(target='local', vmid=None, container_name=None)
    gate = dict((k, v.get('default')) for k, v in GATE_OPTIONS.items())
    gate.update(kw.pop('gate', {}))
    p.update(kw, gate=gate)
    for key in ('server_patterns', 'protected_patterns', 'device_globs'):
        p[key] = list(p[key])
    return p


def release(world, clock, self_pid=500, **kw):
    return Release(world, params(**kw), clock, clock.sleep, '/nonexistent', self_pid).run()


def killed(res):
    return [(k['pid'], k['signal']) for k in res['killed']]


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


def test_signal_epoch_is_null_when_nothing_was_signalled():
    clock = Clock()
    world = server_world(clock, check_mode=True)
    res = Release(world, params(), clock, clock.sleep, '/nonexistent', 500, wall=lambda: 1.0).run()
    assert res['killed'] and res['signal_epoch'] is None
