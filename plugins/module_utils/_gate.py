# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The zero-memory gate: poll GPU memory until every selected GPU is at or under a limit, else name the holders.

Private to this collection. Used by gpu_memory_gate and, unchanged, by gpu_release; it is also part of the container
helper's package (_helper_cli.PACKAGE), where the unit's ExecStartPre runs run_gate with a runner of its own
(`gpuserve-sglang gate`, _helper_gate). So this file and _nvidia_smi.py import nothing outside the standard library
at load.
"""
from __future__ import annotations

import os
import re
import time

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gpu_health as health
from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_map import (
    INFO_ROOT, GpuMapError, read_information, uuids_of_minors)
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import (
    NvmlReader, SmiError, SmiReader, select)

# Mirrored by doc fragment gpuserve.sglang._gate.
GATE_ARGS = dict(
    gpus=dict(type='list', elements='int', default=[]),
    minors=dict(type='list', elements='int', default=[]),
    gpu_info_root=dict(type='str', default=INFO_ROOT),
    expected_count=dict(type='int'),
    max_used_mib=dict(type='int', default=0),
    timeout=dict(type='float', default=30.0),
    poll_interval=dict(type='float', default=0.05),
    backend=dict(type='str', default='nvidia-smi', choices=['nvidia-smi', 'nvml']),
    nvidia_smi=dict(type='str', default='nvidia-smi'),
    nvidia_smi_timeout=dict(type='float', default=10.0),
    name_holders=dict(type='bool', default=True),
    # The health stage (_gpu_health): off unless given; given (even {}), each check takes its documented default.
    health=dict(type='dict', options=dict((check, dict(type='str', choices=list(health.ACTIONS), default=action))
                                          for check, action in health.DEFAULT_ACTIONS.items())),
    memory=dict(type='bool', default=True),
    dmesg=dict(type='str', default='dmesg'),
    xid_since=dict(type='float'),
)

# Proxmox: 0::/lxc/105/ns/...; upstream LXC: /lxc.payload.NAME, /lxc.payload/NAME; its monitor: /lxc.monitor.NAME.
CGROUP_CT_RE = re.compile(r'(?:^|/)lxc(?:\.(payload|monitor))?[./]([^/\s]+)')


class GateFailed(Exception):
    """The gate did not pass (memory over the limit), or could not read (read_error); `result` goes with it."""

    def __init__(self, msg, result, read_error=False, health_refused=False):
        super().__init__(msg)
        self.msg, self.result, self.read_error, self.health_refused = msg, result, read_error, health_refused


def container_of(pid, proc_root='/proc'):
    """Where pid lives, from /proc/PID/cgroup: 'CT 105', 'the LXC monitor of CT 105', 'the host' or None."""
    try:
        with open(os.path.join(proc_root, str(pid), 'cgroup')) as f:
            text = f.read()
    except OSError:
        return None
    for line in text.splitlines():
        match = CGROUP_CT_RE.search(line.split(':', 2)[-1])
        if match:
            kind, name = match.groups()
            return ('the LXC monitor of CT %s' if kind == 'monitor' else 'CT %s') % name
    return 'the host'


def state_of(pid, proc_root='/proc'):
    """The process state letter from /proc/PID/stat ('R', 'S', 'D', 'Z', ...), or None when it cannot be read
    (the process is gone, or another PID namespace)."""
    try:
        with open(os.path.join(proc_root, str(pid), 'stat')) as f:
            text = f.read()
    except OSError:
        return None
    # "PID (COMM) STATE ...": COMM may hold spaces and parentheses, so the state follows the last ')'.
    fields = text[text.rfind(')') + 1:].split()
    return fields[0] if fields else None


# What to do when the memory does not go: a holder in uninterruptible sleep, or memory no process holds.
STUCK_ADVICE = (
    'A process in state D (uninterruptible sleep) is inside the driver and ends only when that call returns, '
    'SIGKILL or not: a killed SGLang scheduler can take tens of seconds there while its GPU memory is torn down. '
    'Wait and run again (or raise the gate timeout); if it stays in D for minutes, check dmesg for Xid errors: '
    'the GPU then needs a reset (nvidia-smi -r) or the host a reboot')
ORPHAN_ADVICE = (
    'Memory that no listed process holds is still being freed by the driver after its process exited, or '
    'belongs to a process nvidia-smi cannot see from here (another PID namespace: run the gate on the PVE host). '
    'Wait and run again (or raise the gate timeout); if it stays, check dmesg for Xid errors')


def describe(holder):
    where = holder['container']
    if where is None:
        text = 'pid %d (container unknown)' % holder['pid']
    else:
        text = 'pid %d %s %s' % (holder['pid'], 'on' if where == 'the host' else 'in', where)
    if holder.get('state') == 'D':
        text += ' in state D'
    return text


def poll(read, max_used_mib, timeout, interval, clock=time.monotonic, sleep=time.sleep, max_polls=None):
    """Reads until no GPU is over max_used_mib, the timeout passes, or max_polls reads were made.

    Returns within one interval (plus one read) of memory reaching the limit: the wait is the only sleep.
    clear_at_s says when each GPU first read at or under the limit (per-GPU release times).
    """
    start = clock()
    polls = 0
    clear_at = {}  # GPU index -> seconds into the gate of its first read at or under the limit
    while True:
        gpus, raw = read()
        polls += 1
        elapsed = clock() - start
        over = [g for g in gpus if g['used_mib'] > max_used_mib]
        for gpu in gpus:
            if gpu['used_mib'] <= max_used_mib:
                clear_at.setdefault(gpu['index'], round(elapsed, 4))
        if not over or polls == max_polls or elapsed >= timeout:
            return dict(gpus=gpus, polls=polls, elapsed_s=round(elapsed, 4), passed=not over, raw=raw,
                        over=over, clear_at_s=clear_at)
        sleep(max(0.0, min(interval, timeout - elapsed)))


def name_holders(reader, over, local, proc_root='/proc'):
    """Compute apps on the GPUs still over the limit, each with the container it belongs to."""
    uuids = dict((g['uuid'], g['index']) for g in over)
    holders = []
    for app in reader.apps():
        if app['uuid'] in uuids:
            holders.append(dict(gpu=uuids[app['uuid']], pid=app['pid'], used_mib=app['used_mib'],
                                container=container_of(app['pid'], proc_root) if local else None,
                                state=state_of(app['pid'], proc_root) if local else None))
    return holders


def failure_message(over, max_used_mib, holders):
    parts = []
    for gpu in over:
        names = [describe(h) for h in holders if h['gpu'] == gpu['index']]
        parts.append('GPU %d still holds %d MiB (limit %d): %s' % (
            gpu['index'], gpu['used_mib'], max_used_mib, ', '.join(names) or 'no compute process listed'))
    return '; '.join(parts)


def advice(over, holders):
    """What to do, for the failure message: holders in state D, and GPUs whose memory no listed process holds
    (pass only holders that were read: an unknown list proves nothing)."""
    texts = []
    if any(h.get('state') == 'D' for h in holders):
        texts.append(STUCK_ADVICE)
    if any(not any(h['gpu'] == gpu['index'] for h in holders) for gpu in over):
        texts.append(ORPHAN_ADVICE)
    return ''.join('. ' + text for text in texts)


def minor_selection(params, runner):
    """{uuid: minor} of the GPUs behind /dev/nvidia<minor> for params['minors'] (read from the driver's
    gpu_info_root on this host), or None when the gate selects by index. The minor is the N of a container's
    devN entry /dev/nvidiaN; it is not always nvidia-smi's index (_gpu_map)."""
    if not params['minors']:
        return None
    if params['gpus']:
        raise SmiError('give the GPUs to check as minors or as gpus (indexes), not both')
    if not runner.local:
        raise SmiError('minors are read from %s on this host: use target=local (the PVE host) with minors, '
                       'not target=%s' % (params['gpu_info_root'], runner.target))
    try:
        return uuids_of_minors(read_information(params['gpu_info_root']), params['minors'])
    except GpuMapError as exc:
        raise SmiError('cannot map device minors to GPUs: %s' % exc) from None


def select_minors(gpus, wanted, expected_count, raw, info_root=INFO_ROOT):
    """The GPUs whose UUID is wanted ({uuid: minor}), each with its minor; fails when one is not listed."""
    gpus = select(gpus, [], expected_count, raw)
    chosen = [dict(g, minor=wanted[g['uuid']]) for g in gpus if g['uuid'] in wanted]
    if len(chosen) != len(wanted):
        listed = set(g['uuid'] for g in gpus)
        missing = sorted(m for u, m in wanted.items() if u not in listed)
        raise SmiError('nvidia-smi does not list the GPU(s) behind device minor(s) %s (the driver does): '
                       'check `nvidia-smi -L` and %s' % (missing, info_root), raw)
    return chosen


def make_reader(params, runner):
    if params['backend'] == 'nvml':
        if not runner.local:
            raise SmiError('backend=nvml reads this host only: use backend=nvidia-smi with target=%s'
                           % runner.target)
        try:
            import pynvml
        except ImportError:
            raise SmiError('backend=nvml needs nvidia-ml-py importable by the module interpreter; install it '
                           'or use backend=nvidia-smi') from None
        return NvmlReader(pynvml)
    return SmiReader(runner, params['nvidia_smi'], params['nvidia_smi_timeout'])


def boot_time(proc_root='/proc'):
    """The host's boot time (epoch seconds, /proc/stat btime), to place a dmesg stamp in wall time; None unread."""
    try:
        with open(os.path.join(proc_root, 'stat')) as f:
            for line in f:
                if line.startswith('btime '):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def make_health_reader(params, runner):
    if params['backend'] == 'nvml':
        import pynvml  # make_reader already proved it importable, on this host
        return health.NvmlHealthReader(pynvml)
    return health.SmiHealthReader(runner, params['nvidia_smi'], params['nvidia_smi_timeout'])


def health_missing(gpus, params, wanted):
    """What should be listed and is not: the expected count, a selected index, the GPU behind a minor."""
    missing = []
    if params['expected_count'] is not None and len(gpus) != params['expected_count']:
        missing.append('nvidia-smi lists %d GPU(s), %d expected' % (len(gpus), params['expected_count']))
    listed = set(g['uuid'] for g in gpus)
    indexes = set(g['index'] for g in gpus)
    if wanted is not None:
        missing.extend('the GPU behind /dev/nvidia%d (%s) is not listed' % (m, u)
                       for u, m in sorted(wanted.items(), key=lambda i: i[1]) if u not in listed)
    else:
        missing.extend('GPU index %d is not listed' % i for i in sorted(set(params['gpus']) - indexes))
    return missing


def health_stage(params, runner, wanted, actions, proc_root='/proc'):
    """Reads and judges every selected GPU's health (_gpu_health); returns its result, whose `passed` is False
    when a check under `refuse` found something (or could not read it)."""
    reader = make_health_reader(params, runner)
    try:
        gpus, raw = reader.read()
    finally:
        if hasattr(reader, 'close'):
            reader.close()
    if runner.local:
        try:  # the minor of each GPU, for the message and the manifest; only a help, so an unreadable list is none
            minors = dict((i['uuid'], i['minor']) for i in read_information(params['gpu_info_root']))
        except GpuMapError:
            minors = {}
        gpus = [dict(g, minor=minors.get(g['uuid'])) for g in gpus]
    missing = health_missing(gpus, params, wanted)
    if wanted is not None:
        chosen = [g for g in gpus if g['uuid'] in wanted]
    elif params['gpus']:
        chosen = [g for g in gpus if g['index'] in params['gpus']]
    else:
        chosen = gpus
    xids = log_error = since = None
    if actions['xid'] != 'ignore' or actions['xid_other'] != 'ignore':
        xids, log_error = health.read_kernel_log(runner, params['dmesg'], params['nvidia_smi_timeout'])
        if params['xid_since'] is not None:
            # the kernel log counts seconds since boot; /proc/stat names the boot, on this host only
            booted = boot_time(proc_root) if runner.local else None
            since = None if booted is None else max(0.0, params['xid_since'] - booted)
    findings = health.judge(chosen, actions, xids, log_error, since, missing)
    refused = [f for f in findings if f['action'] == 'refuse']
    return dict(passed=not refused, checks=actions, gpus=health.summary(chosen), findings=findings,
                refused=[f['message'] for f in refused],
                warnings=[f['message'] for f in findings if f['action'] == 'warn'],
                kernel_log='read' if xids is not None else log_error,
                xid_since_boot_s=None if since is None else round(since, 3), raw=raw)


def run_gate(module, params, check_mode=False, proc_root='/proc', clock=time.monotonic, sleep=time.sleep,
             runner=None):
    """Runs the gate described by params (GATE_ARGS + runner TARGET_ARGS). Returns the result when it passes,
    raises GateFailed (with the result, or the raw output of a read that failed) when it does not.

    runner: anything with run(argv, timeout) -> Result-like, `local` and `target`; default the module's Runner.
    """
    if runner is None:
        # Imported here: _runner needs ansible, which the container's ExecStartPre gate (its own runner) lacks.
        from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner
        runner = Runner.from_params(module, params)
    base = dict(backend=params['backend'], max_used_mib=params['max_used_mib'], polls=0, passed=False)
    reader = None
    try:
        actions = health.actions_of(params.get('health'))
        wanted = minor_selection(params, runner)
        reader = make_reader(params, runner)
        # The health stage comes first: a GPU that cannot serve is refused before any wait for its memory.
        if actions is not None:
            base['health'] = health_stage(params, runner, wanted, actions, proc_root)
            for warning in base['health']['warnings'] if module is not None else ():
                module.warn('GPU health: ' + warning)
            if not base['health']['passed']:
                raise GateFailed('GPU health: not starting on a GPU that cannot serve (at full speed): %s'
                                 % '; '.join(base['health']['refused']), base, health_refused=True)
        if not params.get('memory', True):
            base.update(passed=True, memory='not checked (memory: false)')
            return base

        def read():
            gpus, raw = reader.read()
            if wanted is not None:
                return select_minors(gpus, wanted, params['expected_count'], raw, params['gpu_info_root']), raw
            return select(gpus, params['gpus'], params['expected_count'], raw), raw

        # Check mode makes exactly one read and judges it.
        res = poll(read, params['max_used_mib'], params['timeout'], params['poll_interval'], clock, sleep,
                   max_polls=1 if check_mode else None)
        over = res.pop('over')
        base.update(res)
        if res['passed']:
            return base
        holders = []
        holder_note = ''
        what_to_do = ''
        if params['name_holders']:
            try:
                smi = reader if isinstance(reader, SmiReader) else SmiReader(
                    runner, params['nvidia_smi'], params['nvidia_smi_timeout'])
                holders = name_holders(smi, over, runner.local, proc_root)
                what_to_do = advice(over, holders)
            except SmiError as exc:
                holder_note = ' (holders unknown: %s)' % exc.msg
        base['holders'] = holders
        msg = 'gate %s after %d poll(s) in %.2f s: %s%s%s' % (
            'read once (check mode)' if check_mode else 'timed out', base['polls'], base['elapsed_s'],
            failure_message(over, params['max_used_mib'], holders), holder_note, what_to_do)
        raise GateFailed(msg, base)
    except SmiError as exc:
        base.update(raw=exc.raw, rc=exc.rc, stderr=exc.stderr, cmd=exc.cmd)
        raise GateFailed(exc.msg, base, read_error=True) from None
    finally:
        if reader is not None:
            reader.close()
