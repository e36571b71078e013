# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_release: stop what holds the GPUs inside one target, sparing what must live, then prove memory is free.

Private to this collection. Phases: the server's own stop (stop_command, optional), SIGTERM to server processes,
grace, SIGKILL to survivors' process groups and to zombies' parents, SIGKILL to what still holds a device node, then
the gate (_gate.run_gate, the same code gpu_memory_gate runs), then the server's start (start_command, optional,
only once the gate passed). Every command runs through one Runner, so a `pct exec` target can never reach another
container's processes. The two commands make a restart one call on the PVE host instead of three round trips
(the sglang_server lifecycle of one node: docs/server.md).
"""
from __future__ import annotations

import json
import os
import time

from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS, GateFailed, run_gate
from ansible_collections.gpuserve.sglang.plugins.module_utils._procs import (
    DEFAULT_PROTECTED_PATTERNS, DEFAULT_SERVER_PATTERNS, PS_ARGV, Policy, ProcError, expand, is_zombie, kill_argv,
    kill_errors, listing_dirs, parse_fuser, parse_ps, safe_group, split)
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import (
    TARGET_ARGS, TARGET_REQUIRED_IF, Runner)

GATE_OPTIONS = dict(enabled=dict(type='bool', default=True), **TARGET_ARGS, **GATE_ARGS)

# Mirrored by the module's DOCUMENTATION.
RELEASE_ARGS = dict(
    server_patterns=dict(type='list', elements='str', default=list(DEFAULT_SERVER_PATTERNS)),
    protected_patterns=dict(type='list', elements='str', default=list(DEFAULT_PROTECTED_PATTERNS)),
    extra_protected_patterns=dict(type='list', elements='str', default=[]),
    exclude_pids=dict(type='list', elements='int', default=[]),
    command_timeout=dict(type='float', default=30.0),
    grace=dict(type='float', default=15.0),
    grace_poll_interval=dict(type='float', default=0.05),
    device_globs=dict(type='list', elements='str', default=['/dev/nvidia*']),
    kill_device_holders=dict(type='bool', default=True),
    stop_command=dict(type='list', elements='str', default=[]),
    start_command=dict(type='list', elements='str', default=[]),
    hook_timeout=dict(type='float', default=600.0),
    gate=dict(type='dict', apply_defaults=True, options=GATE_OPTIONS, required_if=TARGET_REQUIRED_IF),
)

# A zombie whose parent is alive is normally reaped within milliseconds; one still there after this is stuck.
ZOMBIE_SETTLE_S = 1.0


class ReleaseError(Exception):
    def __init__(self, msg, result=None):
        super().__init__(msg)
        self.msg, self.result = msg, result


class Release:
    def __init__(self, module, params, clock=time.monotonic, sleep=time.sleep, proc_root='/proc', self_pid=None,
                 wall=time.time):
        self.module, self.params, self.clock, self.sleep, self.proc_root = module, params, clock, sleep, proc_root
        self.wall = wall
        self.check = module.check_mode
        self.runner = Runner.from_params(module, params)
        if self_pid is None and self.runner.local:
            self_pid = os.getpid()
        try:
            self.policy = Policy(params['server_patterns'],
                                 params['protected_patterns'] + params['extra_protected_patterns'],
                                 params['exclude_pids'], self_pid)
        except ProcError as exc:
            raise ReleaseError(str(exc)) from None
        self.killed, self.skipped, self.device_paths = [], {}, []
        self.first_signal = self.signal_epoch = None

    def ps(self):
        res = self.runner.run(PS_ARGV)
        if res.rc != 0:
            raise ReleaseError('listing processes in %s failed (rc %s%s): %s; is it running?' % (
                self.runner.where, res.rc, ', timed out' if res.timed_out else '', (res.err or res.out).strip()))
        return parse_ps(res.out)

    def skip(self, skipped):
        for entry in skipped:
            self.skipped.setdefault(entry['pid'], entry)

    def send(self, signal, procs, reason, groups=()):
        """Signals procs (and whole groups, whose members procs must list); records each as killed."""
        if not procs:
            return
        if not self.check:
            if self.first_signal is None:
                self.signal_epoch = self.wall()
                self.first_signal = self.clock()
            grouped = set(groups)
            pids = set(p.pid for p in procs if p.pgid not in grouped)
            res = self.runner.run(kill_argv(signal, pids, grouped))
            errors = kill_errors(res)
            if errors:
                raise ReleaseError('kill -s %s in %s failed: %s' % (signal, self.runner.where, errors))
        self.killed.extend(dict(pid=p.pid, cmdline=p.args, signal=signal, reason=reason)
                           for p in sorted(procs, key=lambda p: p.pid))

    def grace(self, targets):
        """Polls until no target is alive (zombies get ZOMBIE_SETTLE_S to be reaped) or grace runs out."""
        start = self.clock()
        zombie_since = None
        while True:
            table = self.ps()
            alive, zombies = survivors(table, targets)
            now = self.clock()
            if not (alive or zombies) or now - start >= self.params['grace']:
                return table
            if not alive:
                zombie_since = now if zombie_since is None else zombie_since
                if now - zombie_since >= ZOMBIE_SETTLE_S:
                    return table
            self.sleep(self.params['grace_poll_interval'])

    def kill_survivors(self, table, targets, never):
        alive, zombies = survivors(table, targets)
        groups = sorted(set(p.pgid for p in alive if safe_group(table, p.pgid, never)))
        members = [p for p in table.values() if p.pgid in groups]
        loners = [p for p in alive if p.pgid not in groups]
        self.send('KILL', members + loners, 'survived SIGTERM', groups)
        # A zombie is reaped only by its parent: killing a stuck parent hands it to init, which reaps it.
        done = set(p.pid for p in members + loners)
        parents = dict((z.ppid, table[z.ppid]) for z in zombies if z.ppid in table and z.ppid not in done)
        killable, skipped = split(parents.values(), never)
        self.skip(skipped)
        self.send('KILL', killable, 'parent of a zombie')

    def kill_holders(self, table, never):
        listings = {}
        for directory in listing_dirs(self.params['device_globs']):
            res = self.runner.run(['ls', '-1', '-p', directory])
            if res.rc != 0:
                raise ReleaseError('listing %s in %s failed (rc %s): %s' % (
                    directory, self.runner.where, res.rc, (res.err or res.out).strip()))
            listings[directory] = res.out
        self.device_paths = expand(self.params['device_globs'], listings)
        if not self.device_paths:
            return
        pids = parse_fuser(self.runner.run(['fuser'] + self.device_paths))
        pids -= set(k['pid'] for k in self.killed if k['signal'] == 'KILL' or self.check)
        if any(p not in table or p not in never for p in pids):
            # Before a SIGKILL, judge by a listing taken after fuser answered: the earlier one may show a PID that
            # has since exited and been reused, e.g. by a protected daemon that now holds /dev/nvidiactl.
            table = self.ps()
            never = self.policy.never(table)
        holders = [table[p] for p in sorted(pids) if p in table]
        killable, skipped = split(holders, never)
        self.skip(skipped)
        self.send('KILL', killable, 'holds ' + ' '.join(self.device_paths))

    def hook(self, key):
        """Runs stop_command or start_command in the target: {rc, answer (its stdout as JSON, else None), stdout,
        stderr}; a non-zero exit fails the release with what the command said."""
        res = self.runner.run(self.params[key], timeout=self.params['hook_timeout'])
        try:
            answer = json.loads(res.out)
        except ValueError:
            answer = None
        out = dict(rc=res.rc, answer=answer, stdout=res.out[-2000:], stderr=res.err[-2000:])
        if res.rc != 0:
            said = answer.get('error') or answer.get('msg') if isinstance(answer, dict) else None
            raise ReleaseError('%s in %s failed (rc %s%s): %s' % (
                key, self.runner.where, res.rc, ', timed out' if res.timed_out else '',
                said or (res.err or res.out).strip()[-1000:]), {key[:-len('_command')]: out})
        return out

    def gate(self):
        params = self.params['gate']
        if not params['enabled']:
            return None
        try:
            return run_gate(self.module, params, check_mode=self.check, proc_root=self.proc_root,
                            clock=self.clock, sleep=self.sleep)
        except GateFailed as exc:
            # In check mode nothing was killed, so memory still in use is the expected answer, not a failure.
            if self.check and not exc.read_error and not exc.health_refused:
                return dict(exc.result, msg=exc.msg)
            raise ReleaseError('gate: ' + exc.msg, exc.result) from None

    def run(self):
        timings = {}
        result = dict(changed=False, killed=self.killed, skipped_protected=[], device_paths=[], gate=None,
                      timings=timings, kill_to_pass_s=None, gate_passed_epoch=None, target=self.runner.where)
        mark = self.clock()

        def phase(name):
            nonlocal mark
            now = self.clock()
            timings[name] = round(now - mark, 4)
            mark = now

        try:
            if self.params['stop_command']:
                result['stop'] = dict(skipped='check mode') if self.check else self.hook('stop_command')
                phase('stop_s')
            try:
                table = self.ps()
                never = self.policy.never(table)
                targets, skipped = split(self.policy.servers(table), never)
                self.skip(skipped)
                self.send('TERM', targets, 'matches a server pattern')
                if targets and not self.check:
                    table = self.grace(targets)
                    never = self.policy.never(table)
                phase('term_s')
                if targets and not self.check:
                    self.kill_survivors(table, targets, never)
                phase('kill_s')
                if self.params['kill_device_holders']:
                    self.kill_holders(table, never)
                phase('holders_s')
            except ProcError as exc:
                raise ReleaseError(str(exc)) from None
            gate = result['gate'] = self.gate()
            phase('gate_s')
            result['gate_passed_epoch'] = self.wall() if gate and gate['passed'] else None
            if gate and gate['passed'] and self.first_signal is not None:
                result['kill_to_pass_s'] = round(self.clock() - self.first_signal, 4)
            if self.params['start_command']:
                result['start'] = dict(skipped='check mode') if self.check else self.hook('start_command')
                phase('start_s')
        except ReleaseError as exc:
            if exc.result is not None and set(exc.result) <= {'stop', 'start'}:  # a command's own answer
                result.update(exc.result)
            elif exc.result is not None:  # the gate's own result
                result['gate'] = exc.result
            raise ReleaseError(exc.msg, self.finish(result)) from None
        return self.finish(result)

    def finish(self, result):
        ran = any('rc' in (result.get(key) or {}) for key in ('stop', 'start'))  # a command that ran changed things
        result.update(changed=bool(self.killed) or ran, skipped_protected=list(self.skipped.values()),
                      device_paths=self.device_paths, signal_epoch=self.signal_epoch)
        if self.module._diff:
            result['diff'] = dict(before=''.join('%(pid)d %(cmdline)s\n' % k for k in self.killed), after='')
        return result


def survivors(table, targets):
    """(alive, zombies) among targets, by pid and unchanged cmdline (a reused pid is someone else); a zombie's
    cmdline reads `[comm] <defunct>`, so a zombie is matched by pid alone."""
    alive, zombies = [], []
    for target in targets:
        proc = table.get(target.pid)
        if proc is None:
            continue
        if is_zombie(proc):
            zombies.append(proc)
        elif proc.args == target.args:
            alive.append(proc)
    return alive, zombies
