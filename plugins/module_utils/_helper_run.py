# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container helper's one way to run a command: run() (an argv, never a shell; under coreutils timeout when given
one; LC_ALL=C, so every tool answers in the words its parser reads; stdin from /dev/null, so a command never reads
the unit's; text that keeps a byte that is not UTF-8 for the message), systemctl() on top of it, and LocalRunner, the
gate's runner in the container.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package. On the
controller side the same job is _runner's (module.run_command), which needs ansible.
"""
import os
import subprocess

# A program run without Ansible (systemd, the role's command tasks, an operator): it runs its commands itself, with
# no AnsibleModule to run_command through.
# pylint: disable=ansible-bad-function


class Result:
    """What a command did (the shape of _runner.Result, which needs ansible to import)."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    @property
    def timed_out(self):
        return self.rc in (124, 137)  # coreutils timeout: fired, or fired and had to SIGKILL

    @property
    def cmd(self):
        return " ".join(self.argv)


def run(argv, timeout=None):
    """Runs argv (under `timeout --kill-after=1 Ns` when timeout is given); a command that cannot start is rc 127."""
    full = (["timeout", "--kill-after=1", "%gs" % timeout] if timeout is not None else []) + list(argv)
    try:
        # errors= makes the pipes text; surrogateescape keeps a byte that is not UTF-8 for the failure message
        out = subprocess.run(full, stdin=subprocess.DEVNULL, capture_output=True, errors="surrogateescape",
                             env=dict(os.environ, LC_ALL="C"), check=False)
    except OSError as exc:
        return Result(full, 127, "", str(exc))
    return Result(full, out.returncode, out.stdout, out.stderr)


def systemctl(*args):
    """systemctl with args: the helper's only way to ask systemd."""
    return run(["systemctl"] + list(args))


def properties(unit, *names):
    """{name: value} of the unit's properties, as `systemctl show` prints them (what it printed, if it failed); of
    the service manager itself when unit is None."""
    out = systemctl("show", *([unit] if unit is not None else []), "--property=" + ",".join(names)).out
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


class LocalRunner:
    """The gate's runner in the container (_gate.run_gate's runner argument). Not `local` for the gate:
    /proc/PID/cgroup inside a container cannot tell where a holder lives."""

    local = False
    target = "local"

    def run(self, argv, timeout):
        return run(argv, timeout)
