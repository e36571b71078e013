# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""This ansible-playbook run's identity as the sglang_server lifecycle lock records it, and whether a recorded run
still lives, read on the controller from /proc.

Private to this collection. Used by the lookup gpuserve.sglang.controller_run (a playbook's view) and the action
gpuserve.sglang.lifecycle_lock (which names this run as the lock's owner and takes over from a run that is gone).
"""
from __future__ import annotations

import getpass
import os
import socket
import time


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read()


def _stat(pid, proc):
    """(ppid, start ticks) of pid from /proc/PID/stat (the command name may hold spaces and parentheses)."""
    fields = _read(os.path.join(proc, str(pid), 'stat')).rsplit(b')', 1)[1].split()
    return int(fields[1]), int(fields[19])


def _cmdline(pid, proc):
    try:
        return _read(os.path.join(proc, str(pid), 'cmdline'))
    except OSError:
        return None


def controller_pid(pid, proc='/proc'):
    """The outermost ancestor of pid (itself included) with pid's command line."""
    own = _cmdline(pid, proc)
    while True:
        ppid = _stat(pid, proc)[0]
        if ppid <= 1 or _cmdline(ppid, proc) != own:
            return pid
        pid = ppid


def boot_id(proc='/proc'):
    return _read(os.path.join(proc, 'sys', 'kernel', 'random', 'boot_id')).decode().strip()


def boot_time(proc='/proc'):
    for line in _read(os.path.join(proc, 'stat')).decode().splitlines():
        if line.startswith('btime '):
            return int(line.split()[1])
    raise ValueError('no btime in %s/stat' % proc)


def playbooks_of(argv):
    """The playbooks on a command line [python, .../ansible-playbook, ARGS...]: ansible-playbook's own parser's
    positional arguments (an option's value, such as -i inventory/x.yml, is none), read after the ansible-playbook
    program itself. A line that parser refuses falls back to every argument ending in .yml or .yaml."""
    rest = list(argv[1:])
    for i, arg in enumerate(argv):
        if os.path.basename(arg).startswith('ansible-playbook'):
            rest = list(argv[i + 1:])
            break
    try:
        # controller side only (the lookup controller_run and the action lifecycle_lock import this file)
        from ansible.cli.playbook import PlaybookCLI  # pylint: disable=import-outside-toplevel,ansible-bad-module-import
        cli = PlaybookCLI(['ansible-playbook'] + rest)
        cli.init_parser()
        return list(cli.parser.parse_known_args(rest)[0].args)
    except (Exception, SystemExit):  # pylint: disable=broad-except
        return [a for a in rest if a.endswith(('.yml', '.yaml'))]


def identity(pid=None, proc='/proc', hostname=socket.gethostname, user=getpass.getuser):
    pid = controller_pid(os.getpid() if pid is None else pid, proc)
    ticks = _stat(pid, proc)[1]
    started = boot_time(proc) + ticks / os.sysconf('SC_CLK_TCK')
    argv = [a.decode(errors='replace') for a in (_cmdline(pid, proc) or b'').split(b'\0') if a]
    return dict(host=hostname(), boot_id=boot_id(proc), pid=pid, start_ticks=ticks,
                started=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(started)), user=user(),
                playbooks=playbooks_of(argv))


def state(run, proc='/proc', hostname=socket.gethostname):
    """alive | dead | unknown for a run identity."""
    if any(run.get(key) is None for key in ('host', 'boot_id', 'pid', 'start_ticks')) or run['host'] != hostname():
        return 'unknown'
    if run.get('boot_id') != boot_id(proc):
        return 'dead'  # this controller booted since that run started
    try:
        ticks = _stat(run['pid'], proc)[1]
    except (OSError, IndexError, ValueError):
        return 'dead'
    return 'alive' if ticks == run['start_ticks'] else 'dead'  # else the PID was reused
