# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exec runner for the three places a command can run: here, `pct exec VMID --`, `lxc-attach -n NAME --`.

Private to this collection. Every command is an argv list handed to module.run_command, wrapped in coreutils
`timeout` because run_command has no timeout of its own and nvidia-smi (or a stuck container) can hang.
"""
from __future__ import annotations

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
        rc, out, err = self.module.run_command(full, environ_update={'LC_ALL': 'C'})
        return Result(full, rc, out, err)
