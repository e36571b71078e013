# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health on the PVE host: can each GPU serve at full speed, not only is it empty.

Private to this collection. Used by the gate's health stage (_gate.run_gate, so by gpu_memory_gate, gpu_release and
the unit's ExecStartPre gate); standard library only at load, like _nvidia_smi.py, because it travels into the
container with the gate. Per GPU (index, bus id, UUID, and the minor where the driver's list was read) it reads:
the PCIe link generation and width (current and max), remapped rows pending / failed (retired pages pending on GPUs
without row remapping), volatile uncorrectable ECC errors, the clock event reasons and persistence mode, from one
`nvidia-smi --query-gpu` (or NVML), and the NVIDIA Xid events of the kernel log (`dmesg`), attributed by bus id.

Every value the driver cannot give (`[N/A]`, `[Not Supported]`, an NVML NotSupported, a kernel log that cannot be
read) is None, "unknown", and judge() never counts unknown as healthy: under `refuse` it refuses, saying so.
The field names are checked against a real H200's `nvidia-smi --help-query-gpu` (tests/fixtures/nvidia-smi-h200-health).
"""
from __future__ import annotations

import re

from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_map import GpuMapError, bus_id as normal_bus_id
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import (
    CSV, NOT_A_NUMBER_RE, UUID_RE, SmiError, check_result)

HEALTH_FIELDS = (
    'index', 'pci.bus_id', 'uuid',
    'pcie.link.gen.current', 'pcie.link.gen.max', 'pcie.link.width.current', 'pcie.link.width.max',
    'ecc.errors.uncorrected.volatile.total', 'retired_pages.pending', 'remapped_rows.pending',
    'remapped_rows.failure', 'clocks_event_reasons.active', 'persistence_mode',
)

ACTIONS = ('refuse', 'warn', 'ignore')
# check -> default action. Refused: what makes a launch fail or compute wrong; warned: what only slows.
# Mirrored by the doc fragment gpuserve.sglang._gate (option health).
DEFAULT_ACTIONS = dict(
    xid='refuse',           # a fatal Xid (FATAL_XIDS) since xid_since (else since boot)
    xid_other='warn',       # any other Xid in that time (often an application's fault: 13, 31, 43, 45)
    row_remap='refuse',     # remapped rows pending or failed (retired pages pending on GPUs without remapping)
    ecc='refuse',           # volatile uncorrectable ECC errors (since the last driver load or GPU reset)
    missing='refuse',       # a GPU expected (expected_count, gpus, minors) that nvidia-smi does not list
    pcie_link='warn',       # PCIe link below its max generation or width
    persistence='warn',     # persistence mode off (the driver tears down state between clients)
    clocks='warn',          # thermal or power slowdown while the GPU is idle
)
CHECKS = tuple(DEFAULT_ACTIONS)

# NVIDIA's Xid catalog: a double bit ECC error (48), internal micro-controller halt (61, 62), row remapping
# pending / failed or page retirement (63, 64), NVLink error (74), fallen off the bus (79), high single-bit ECC rate
# (92), contained / uncontained ECC error (94, 95), GSP RPC timeout / error (119, 120), unrecovered ECC (140), GPU
# recovery action needed (154). Each means the GPU needs a reset (or the host a reboot) before it can be trusted.
FATAL_XIDS = (48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154)

# clocks_event_reasons bits that slow an idle GPU: SW power cap, HW slowdown, SW thermal, HW thermal, HW power brake.
SLOWDOWN_REASONS = ((0x4, 'SW power cap'), (0x8, 'HW slowdown'), (0x20, 'SW thermal slowdown'),
                    (0x40, 'HW thermal slowdown'), (0x80, 'HW power brake slowdown'))

# `[  123.456789] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.`
XID_RE = re.compile(r'NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?\): (\d+)(.*)$')
STAMP_RE = re.compile(r'^\[\s*(\d+\.\d+)\]')

ADVICE = dict(
    xid='reset the GPU (nvidia-smi -r -i INDEX with nothing using it) or reboot the host; after a reset, an Xid '
        'logged before it no longer counts once xid_since is the reset time',
    xid_other='look at the kernel log (dmesg | grep Xid) for what failed; an application fault needs no reset',
    row_remap='reset the GPU or reboot the host (pending remaps are applied at the next reset); a remap failure '
              'that stays means the GPU has run out of spare rows and should be replaced',
    ecc='reset the GPU or reboot the host (the volatile count clears); if it comes back, see '
        'nvidia-smi -q -d ECC,ROW_REMAPPER',
    missing='check nvidia-smi -L, lspci and dmesg (Xid 79: fallen off the bus); reboot the host',
    pcie_link='check the slot, riser and the BIOS PCIe settings (a link that trained low stays low until a '
              'reboot); a GPU that lowers its link at idle to save power shows it rising under load: then set '
              'this check to ignore',
    persistence='enable persistence mode (nvidia-persistenced, or nvidia-smi -pm 1)',
    clocks='check the cooling and power limits (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE)',
)
UNKNOWN_ADVICE = ('the driver gives no value for it here; if this GPU or host cannot report it, set this check to '
                  'warn or ignore')


def health_query(nvidia_smi):
    """The health query: every GPU, so a missing one is seen; `csv,noheader,nounits` as the gate's query."""
    return [nvidia_smi, '--query-gpu=' + ','.join(HEALTH_FIELDS), CSV]


def kernel_log_argv(dmesg='dmesg'):
    """The kernel log with its seconds-since-boot stamps, as dmesg prints it by default (root, or
    kernel.dmesg_restrict=0). journalctl -k would need a journal; a host without one still has dmesg."""
    return [dmesg]


def _number(value, name):
    if value == '' or NOT_A_NUMBER_RE.match(value):
        return None
    if not value.isdigit():
        raise ValueError('%s %r is not a number' % (name, value))
    return int(value)


def _flag(value, name, yes, no):
    if value == '' or NOT_A_NUMBER_RE.match(value):
        return None
    if value not in (yes, no):
        raise ValueError('%s %r is neither %s nor %s' % (name, value, yes, no))
    return value == yes


def _hex(value, name):
    if value == '' or NOT_A_NUMBER_RE.match(value):
        return None
    if not re.match(r'^0x[0-9a-fA-F]+$', value):
        raise ValueError('%s %r is not a hex bit mask' % (name, value))
    return int(value, 16)


def parse_health(text):
    """health_query output -> [{index, bus_id, uuid, minor, pcie, ecc_uncorrected, ...}], None where unknown.

    The line's shape must be right (13 fields, an index, a bus id, a UUID) or SmiError; a value the driver did
    not give is None, never a healthy default."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(',')]
        try:
            if len(fields) != len(HEALTH_FIELDS):
                raise ValueError('expected %d fields, got %d' % (len(HEALTH_FIELDS), len(fields)))
            (index, bus, uuid, gen, gen_max, width, width_max, ecc, retired, remap_pending, remap_failure,
             reasons, persistence) = fields
            if not index.isdigit():
                raise ValueError('index %r is not a number' % index)
            if not UUID_RE.match(uuid):
                raise ValueError('uuid %r is not a GPU UUID' % uuid)
            gpus.append(dict(
                index=int(index), bus_id=normal_bus_id(bus), uuid=uuid, minor=None,
                pcie=dict(gen=_number(gen, 'pcie.link.gen.current'), gen_max=_number(gen_max, 'pcie.link.gen.max'),
                          width=_number(width, 'pcie.link.width.current'),
                          width_max=_number(width_max, 'pcie.link.width.max')),
                ecc_uncorrected=_number(ecc, 'ecc.errors.uncorrected.volatile.total'),
                retired_pages_pending=_flag(retired, 'retired_pages.pending', 'Yes', 'No'),
                remap_pending=_flag(remap_pending, 'remapped_rows.pending', 'Yes', 'No'),
                remap_failure=_flag(remap_failure, 'remapped_rows.failure', 'Yes', 'No'),
                clock_reasons=_hex(reasons, 'clocks_event_reasons.active'),
                persistence=_flag(persistence, 'persistence_mode', 'Enabled', 'Disabled')))
        except (ValueError, GpuMapError) as exc:
            raise SmiError('unparseable nvidia-smi health line %r: %s' % (line, exc), text) from None
    if not gpus:
        raise SmiError('nvidia-smi listed no GPU at all: check `nvidia-smi -L` and the device passthrough', text)
    return gpus


def parse_xids(text):
    """Kernel log text -> [{t, bus, code, text}]: t seconds since boot (None without a dmesg stamp), bus the
    'dddd:bb:dd' the driver names (no function), code the Xid number."""
    events = []
    for line in text.splitlines():
        match = XID_RE.search(line)
        if not match:
            continue
        bus, code, rest = match.groups()
        stamp = STAMP_RE.match(line.strip())
        domain, rest_bus = bus.split(':', 1)
        events.append(dict(t=float(stamp.group(1)) if stamp else None,
                           bus='%04x:%s' % (int(domain, 16), rest_bus.lower()), code=int(code),
                           text=rest.lstrip(', ').strip()))
    return events


def read_kernel_log(runner, dmesg='dmesg', timeout=10.0):
    """(xid events, None) or (None, why the kernel log could not be read): a log not read proves nothing."""
    res = runner.run(kernel_log_argv(dmesg), timeout=timeout)
    if res.timed_out or res.rc != 0:
        why = (res.err or res.out).strip() or 'no output'
        return None, '%s failed (rc %s%s): %s' % (dmesg, res.rc, ', timed out' if res.timed_out else '', why[:300])
    return parse_xids(res.out), None


class SmiHealthReader:
    """One nvidia-smi health query per read, through the runner."""

    def __init__(self, runner, nvidia_smi='nvidia-smi', timeout=10.0):
        self.runner, self.nvidia_smi, self.timeout = runner, nvidia_smi, timeout

    def read(self):
        res = self.runner.run(health_query(self.nvidia_smi), timeout=self.timeout)
        check_result(res, 'nvidia-smi health query')
        try:
            return parse_health(res.out), res.out
        except SmiError as exc:
            exc.rc, exc.stderr, exc.cmd = res.rc, res.err, res.cmd
            raise


class NvmlHealthReader:
    """The same facts through NVML in this process (0.5 ms for one H200 against 30 ms for nvidia-smi); a call the
    GPU does not support (NotSupported, as retired pages on an H200) is None, the device list itself must read."""

    def __init__(self, pynvml):
        self.nvml = pynvml
        self._must(pynvml.nvmlInit)

    def _must(self, fn, *args):
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            raise SmiError('NVML %s failed: %s' % (getattr(fn, '__name__', fn), exc), str(exc)) from None

    def _may(self, name, *args):
        fn = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError:
            return None

    @staticmethod
    def _text(value):
        return value.decode() if isinstance(value, bytes) else value

    def read(self):
        nvml, gpus = self.nvml, []
        for i in range(self._must(nvml.nvmlDeviceGetCount)):
            handle = self._must(nvml.nvmlDeviceGetHandleByIndex, i)
            pci = self._must(nvml.nvmlDeviceGetPciInfo, handle)
            remapped = self._may('nvmlDeviceGetRemappedRows', handle)
            reasons = self._may('nvmlDeviceGetCurrentClocksEventReasons', handle)
            if reasons is None:
                reasons = self._may('nvmlDeviceGetCurrentClocksThrottleReasons', handle)
            persistence = self._may('nvmlDeviceGetPersistenceMode', handle)
            retired = self._may('nvmlDeviceGetRetiredPagesPendingStatus', handle)
            ecc = self._may('nvmlDeviceGetTotalEccErrors', handle, getattr(nvml, 'NVML_MEMORY_ERROR_TYPE_UNCORRECTED', 1),
                            getattr(nvml, 'NVML_VOLATILE_ECC', 0))
            try:
                bus = normal_bus_id(self._text(pci.busId))
            except GpuMapError as exc:
                raise SmiError('NVML gave GPU %d an unreadable bus id: %s' % (i, exc)) from None
            gpus.append(dict(
                index=self._must(nvml.nvmlDeviceGetIndex, handle), bus_id=bus,
                uuid=self._text(self._must(nvml.nvmlDeviceGetUUID, handle)), minor=None,
                pcie=dict(gen=self._may('nvmlDeviceGetCurrPcieLinkGeneration', handle),
                          gen_max=self._may('nvmlDeviceGetMaxPcieLinkGeneration', handle),
                          width=self._may('nvmlDeviceGetCurrPcieLinkWidth', handle),
                          width_max=self._may('nvmlDeviceGetMaxPcieLinkWidth', handle)),
                ecc_uncorrected=ecc,
                retired_pages_pending=None if retired is None else bool(retired),
                # (corrected rows, uncorrected rows, pending, failure)
                remap_pending=None if remapped is None else bool(remapped[2]),
                remap_failure=None if remapped is None else bool(remapped[3]),
                clock_reasons=reasons,
                persistence=None if persistence is None else bool(persistence)))
        return gpus, ''.join('%(index)d, %(bus_id)s, %(uuid)s\n' % g for g in gpus)

    def close(self):
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass


def actions_of(health):
    """{check: action} from the gate's health option (None: the stage is off); an unknown check or action fails."""
    if health is None:
        return None
    actions = dict(DEFAULT_ACTIONS)
    for check, action in health.items():
        if check not in DEFAULT_ACTIONS:
            raise SmiError('health: no check %r (the checks are %s)' % (check, ', '.join(CHECKS)))
        if action is None:
            continue
        if action not in ACTIONS:
            raise SmiError('health.%s: %r is none of %s' % (check, action, ', '.join(ACTIONS)))
        actions[check] = action
    return actions


def slowdowns(mask):
    return [name for bit, name in SLOWDOWN_REASONS if mask & bit]


def _gpu_values(gpu):
    """(check, value text or None when unknown, bad) for each per-GPU check read from nvidia-smi / NVML."""
    pcie = gpu['pcie']
    if None in pcie.values():
        yield 'pcie_link', None, False
    else:
        low = pcie['gen'] < pcie['gen_max'] or pcie['width'] < pcie['width_max']
        yield 'pcie_link', 'Gen %(gen)d x%(width)d (max Gen %(gen_max)d x%(width_max)d)' % pcie, low
    if gpu['remap_pending'] is not None and gpu['remap_failure'] is not None:
        bad = [name for name in ('pending', 'failure') if gpu['remap_' + name]]
        yield 'row_remap', 'remapped rows ' + (' and '.join(bad) or 'none pending, no failure'), bool(bad)
    elif gpu['retired_pages_pending'] is not None:  # a GPU with page retirement instead of row remapping
        pending = gpu['retired_pages_pending']
        yield 'row_remap', 'retired pages %s' % ('pending' if pending else 'none pending'), pending
    else:
        yield 'row_remap', None, False
    ecc = gpu['ecc_uncorrected']
    yield 'ecc', None if ecc is None else '%d volatile uncorrectable ECC error(s)' % ecc, bool(ecc)
    mode = gpu['persistence']
    yield 'persistence', None if mode is None else 'persistence mode %s' % ('on' if mode else 'off'), mode is False
    mask = gpu['clock_reasons']
    if mask is None:
        yield 'clocks', None, False
    else:
        slow = slowdowns(mask)
        yield 'clocks', 'clock event reasons 0x%016x%s' % (mask, ' (%s)' % ', '.join(slow) if slow else ''), bool(slow)


def judge(gpus, actions, xids=None, kernel_log_error=None, xid_since=None, missing=()):
    """The findings about gpus (already selected) under actions: [{gpu, bus_id, uuid, check, value, action,
    unknown, message}], one per check that is bad or unknown and not ignored; `missing` names GPUs that should
    be there and are not. xids: parse_xids' events, or None with kernel_log_error when the log was not read;
    xid_since: seconds since boot before which an Xid no longer counts (None: since boot)."""
    findings = []

    def add(gpu, check, value, unknown):
        action = actions[check]
        if action == 'ignore':
            return
        if gpu is None:
            where = 'host'
        else:
            where = 'GPU %d (bus %s%s)' % (gpu['index'], gpu['bus_id'],
                                           '' if gpu.get('minor') is None else ', /dev/nvidia%d' % gpu['minor'])
        what = ADVICE[check].replace('INDEX', str(gpu['index']) if gpu else 'INDEX')
        text = '%s: %s is unknown (%s); %s' % (where, check, value, UNKNOWN_ADVICE) if unknown else \
            '%s: %s: %s: %s' % (where, check, value, what)
        findings.append(dict(gpu=None if gpu is None else gpu['index'], bus_id=None if gpu is None else gpu['bus_id'],
                             uuid=None if gpu is None else gpu['uuid'], check=check, value=value, action=action,
                             unknown=unknown, message=text))

    for text in missing:
        add(None, 'missing', text, False)
    for gpu in gpus:
        for check, value, bad in _gpu_values(gpu):
            if value is None:
                add(gpu, check, 'the driver gives [N/A] or no value', True)
            elif bad:
                add(gpu, check, value, False)
        for check in ('xid', 'xid_other'):
            if xids is None and actions[check] != 'ignore':
                add(gpu, check, 'the kernel log could not be read: %s' % kernel_log_error, True)
        if xids is None:
            continue
        mine = [x for x in xids if x['bus'] == gpu['bus_id'][:-2]
                and (xid_since is None or x['t'] is None or x['t'] >= xid_since)]
        for check, events in (('xid', [x for x in mine if x['code'] in FATAL_XIDS]),
                              ('xid_other', [x for x in mine if x['code'] not in FATAL_XIDS])):
            if events:
                last = events[-1]
                value = '%d Xid event(s) %s%s, last: Xid %d%s%s' % (
                    len(events), 'since boot' if xid_since is None else 'since %.1f s after boot' % xid_since,
                    ' (codes %s)' % ', '.join(str(c) for c in sorted(set(x['code'] for x in events))),
                    last['code'], '' if last['t'] is None else ' at %.1f s after boot' % last['t'],
                    ' (%s)' % last['text'] if last['text'] else '')
                add(gpu, check, value, False)
    return findings


def summary(gpus):
    """What the result and the manifest keep of each GPU's health (the fields, without the raw line)."""
    keep = ('index', 'minor', 'bus_id', 'uuid', 'pcie', 'ecc_uncorrected', 'retired_pages_pending', 'remap_pending',
            'remap_failure', 'clock_reasons', 'persistence')
    return [dict((k, g.get(k)) for k in keep) for g in gpus]
