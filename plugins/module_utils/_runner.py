# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exec runner for the three places a command can run: here, `pct exec VMID --`, `lxc-attach -n NAME --`.

Private to this collection. Every command is an argv list, wrapped in coreutils `timeout` because nvidia-smi (or a
stuck container) can hang, and run by spawn() below: module.run_command, minus its one-second race.
"""
from __future__ import annotations

import select

TARGETS = ('local', 'pct', 'lxc')

# Shared by every module that runs something in a target; mirrored by doc fragment gpuserve.sglang._target.
TARGET_ARGS = dict(
    target=dict(type='str', default='local', choices=list(TARGETS)),
    vmid=dict(type='int'),
    container_name=dict(type='str'),
)
TARGET_REQUIRED_IF = [('target', 'pct', ('vmid',)), ('target', 'lxc', ('container_name',))]

# `timeout` exits 124 when it fired, 137 when the command also ignored SIGTERM and took the --kill-after SIGKILL.
TIMEOUT_RCS = (124, 137)


def spawn(module, argv, environ_update):
    """Runs argv to its end through module.run_command; returns (rc, stdout, stderr) as text.

    run_command's read loop (ansible-core 2.21, basic.py) asks whether the child has exited twice in a row once
    both pipes are at EOF. A child that exits between the two questions sends the loop into a select(1) on no
    pipes at all, and the call returns one whole second late: the 1-2 s stall in 4 of 9 gpu_release runs on the
    H200 (the same race shows on any busy host). wait_once_closed() closes that window.
    """
    return module.run_command(argv, environ_update=environ_update, before_communicate_callback=wait_once_closed)


def wait_once_closed(proc):
    """run_command's before_communicate_callback: from now on, proc.poll() waits for the child when both of its
    output pipes are closed and drained, so the loop's first question gets the exit status and the loop ends."""
    poll = proc.poll

    def poll_or_reap():
        status = poll()
        if status is None and pipes_closed(proc.stdout, proc.stderr):
            return proc.wait()
        return status

    proc.poll = poll_or_reap


def pipes_closed(*pipes):
    """True when every pipe's write end is closed and nothing is left to read (POLLHUP without POLLIN)."""
    watch = select.poll()
    for pipe in pipes:
        watch.register(pipe)
    hung_up = [fd for fd, event in watch.poll(0) if event & (select.POLLHUP | select.POLLIN) == select.POLLHUP]
    return len(hung_up) == len(pipes)


class Result:
    __slots__ = ('argv', 'rc', 'out', 'err')

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    @property
    def timed_out(self):
        return self.rc in TIMEOUT_RCS

    @property
    def cmd(self):
        return ' '.join(self.argv)


class Runner:
    """Runs argv lists in one target; `prefix` is what enters the target (empty for local)."""

    def __init__(self, module, target='local', vmid=None, container_name=None, timeout=30.0):
        if target not in TARGETS:
            raise ValueError('unknown target %r' % (target,))
        self.module = module
        self.target = target
        self.timeout = timeout
        if target == 'pct':
            self.prefix = [module.get_bin_path('pct', required=True), 'exec', str(vmid), '--']
            self.where = 'CT %s' % vmid
        elif target == 'lxc':
            self.prefix = [module.get_bin_path('lxc-attach', required=True), '-n', container_name, '--']
            self.where = 'container %s' % container_name
        else:
            self.prefix = []
            self.where = 'this host'
        self._timeout_bin = module.get_bin_path('timeout', required=True)

    @classmethod
    def from_params(cls, module, params):
        return cls(module, params['target'], params.get('vmid'), params.get('container_name'),
                   params.get('command_timeout', 30.0))

    @property
    def local(self):
        return self.target == 'local'

    def argv(self, argv, timeout=None):
        limit = self.timeout if timeout is None else timeout
        if limit <= 0:
            # coreutils timeout treats 0 as "no limit": a hung nvidia-smi or container would block forever
            self.module.fail_json(msg='command timeouts must be more than 0 seconds (got %r for %s)'
                                  % (limit, ' '.join(argv)))
        return [self._timeout_bin, '--kill-after=1', '%gs' % limit] + self.prefix + list(argv)

    def run(self, argv, timeout=None):
        full = self.argv(argv, timeout)
        rc, out, err = spawn(self.module, full, {'LC_ALL': 'C'})
        return Result(full, rc, out, err)
