# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Process table, device-holder listing and the choice of what may be killed.

Private to this collection. Pure functions over text read through the runner, so the rules that keep PID 1,
the module itself and monitoring daemons alive are tested without a process to lose.
"""
from __future__ import annotations

import fnmatch
import os
import re
from collections import namedtuple

PS_ARGV = ['ps', '-ww', '-eo', 'pid=,ppid=,pgid=,stat=,args=']
# Recognises the listing itself (and, locally, its timeout wrapper) in the table it produced.
PS_SIGNATURE = ' '.join(PS_ARGV)

DEFAULT_SERVER_PATTERNS = [
    r'sglang\.launch_server',
    r'(^|[\s/])sglang\s+serve(\s|$)',
    r'^sglang::',  # worker titles SGLang sets: sglang::scheduler_TP0, sglang::detokenizer, ...
]
# `fuser -k /dev/nvidia*` kills these too; on the H200 it killed our own NVML probe.
DEFAULT_PROTECTED_PATTERNS = [
    r'nvidia-persistenced', r'nv-hostengine', r'dcgm', r'nvidia_gpu_exporter', r'node_exporter', r'prometheus',
]

Proc = namedtuple('Proc', 'pid ppid pgid stat args')


class ProcError(Exception):
    pass


def parse_ps(text):
    """`ps -eo pid=,ppid=,pgid=,stat=,args=` -> {pid: Proc}; a line that does not fit raises ProcError."""
    table = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(None, 4)
        if len(parts) < 4 or not all(p.isdigit() for p in parts[:3]):
            raise ProcError('unparseable ps line %r' % line)
        pid, ppid, pgid = (int(p) for p in parts[:3])
        table[pid] = Proc(pid, ppid, pgid, parts[3], parts[4] if len(parts) == 5 else '')
    if not table:
        raise ProcError('ps listed no process at all')
    return table


def compile_patterns(patterns, what):
    try:
        return [re.compile(p) for p in patterns]
    except re.error as exc:
        raise ProcError('invalid %s regex %r: %s' % (what, exc.pattern, exc)) from None


def matches(regexes, args):
    return any(r.search(args) for r in regexes)


def is_zombie(proc):
    # "Zl": the leader exited but other threads still run and may hold the GPU, so that is not a zombie here.
    return proc.stat.startswith('Z') and 'l' not in proc.stat


def ancestors(table, pid):
    """pid and its parents as far as the table (one PID namespace) reaches."""
    chain = set()
    while pid in table and pid not in chain:
        chain.add(pid)
        pid = table[pid].ppid
    return chain


class Policy:
    """What may never be signalled: PID 1, this module and its ancestors, the listing itself, protected ones."""

    def __init__(self, server_patterns, protected_patterns, exclude_pids=(), self_pid=None):
        self.server = compile_patterns(server_patterns, 'server pattern')
        self.protected = compile_patterns(protected_patterns, 'protected pattern')
        self.exclude_pids = set(exclude_pids)
        self.self_pid = self_pid  # os.getpid() when the target is this host's PID namespace, else None

    def never(self, table):
        """{pid: reason} for every process in table that must not be signalled."""
        reasons = {}
        roots = [p.pid for p in table.values() if p.args.endswith(PS_SIGNATURE)]
        if self.self_pid is not None:
            roots.append(self.self_pid)
        for root in roots:
            for pid in ancestors(table, root):
                reasons[pid] = 'this module, its ancestors or its helpers'
        for proc in table.values():
            if matches(self.protected, proc.args):
                reasons[proc.pid] = 'protected'
        for pid in self.exclude_pids:
            reasons[pid] = 'excluded'
        reasons[1] = 'PID 1'
        return reasons

    def servers(self, table):
        return [p for p in table.values() if matches(self.server, p.args)]


def split(procs, never):
    """(killable, skipped) where skipped is [{pid, cmdline, reason}]."""
    killable, skipped = [], []
    for proc in procs:
        if proc.pid in never:
            skipped.append(dict(pid=proc.pid, cmdline=proc.args, reason=never[proc.pid]))
        else:
            killable.append(proc)
    return killable, skipped


def safe_group(table, pgid, never):
    """True when the whole process group may be killed: no member is protected, excluded or PID 1."""
    if pgid <= 1:
        return False
    return not any(p.pgid == pgid and p.pid in never for p in table.values())


def kill_argv(signal, pids=(), groups=()):
    return ['kill', '-s', signal, '--'] + [str(p) for p in sorted(pids)] + ['-%d' % g for g in sorted(groups)]


def kill_errors(res):
    """Errors from kill other than "No such process" (a process that exited meanwhile is what we wanted)."""
    if res.rc == 0:
        return ''
    lines = [ln for ln in (res.out + res.err).splitlines() if ln.strip()]
    other = [ln for ln in lines if 'No such process' not in ln]
    if other or not lines or res.timed_out:
        return 'rc %s%s: %s' % (res.rc, ' (timed out)' if res.timed_out else '', '; '.join(other) or 'no output')
    return ''


def listing_dirs(globs):
    dirs = []
    for pattern in globs:
        directory = os.path.dirname(pattern)
        if not os.path.isabs(pattern) or glob_chars(directory):
            raise ProcError('device glob %r: give an absolute path with wildcards in the last part only'
                            % pattern)
        if directory not in dirs:
            dirs.append(directory)
    return dirs


def glob_chars(text):
    return any(c in text for c in '*?[')


def expand(globs, listings):
    """Device paths matching globs, from `ls -1 -p DIR` listings {dir: text}; directories (name/) are skipped."""
    paths = set()
    for pattern in globs:
        directory, base = os.path.split(pattern)
        for name in listings[directory].splitlines():
            if name and not name.endswith('/') and fnmatch.fnmatchcase(name, base):
                paths.add(os.path.join(directory, name))
    return sorted(paths)


def parse_fuser(res):
    """PIDs from `fuser PATH...` (PIDs on stdout, access letters and names on stderr; rc 1 = no holder)."""
    pids = set(int(p) for p in re.findall(r'\d+', res.out))
    if res.timed_out or res.rc not in (0, 1) or (res.rc == 1 and pids):
        raise ProcError('fuser failed (rc %s): %s%s' % (res.rc, res.err.strip() or res.out.strip(),
                                                        ' (timed out)' if res.timed_out else ''))
    return pids
