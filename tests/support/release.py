"""gpu_release's world: a simulated process table, device nodes and GPU memory behind run_command, and the release
run on it; shared by the tests of _release, of its safety against races and of its health stage."""
from ansible_collections.gpuserve.sglang.plugins.module_utils._release import GATE_OPTIONS, RELEASE_ARGS, Release
from ansible_collections.gpuserve.sglang.plugins.module_utils._procs import PS_SIGNATURE

from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import UUID

OFF = dict(enabled=False)  # the gate off: for tests about what gets signalled, not about memory
DEV = 'autofs\ncpu/\nnull\nnvidia-caps/\nnvidia-uvm\nnvidia0\nnvidia1\nnvidiactl\n'


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
