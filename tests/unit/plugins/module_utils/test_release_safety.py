"""gpu_release must not SIGKILL what it has to spare, even when the process table changes under it."""
from ansible_collections.gpuserve.sglang.tests.support.gate import Clock
from ansible_collections.gpuserve.sglang.tests.support.release import OFF, P, World, killed, release


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
