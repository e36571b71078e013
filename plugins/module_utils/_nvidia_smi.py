# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi queries and their strict parsers, plus the optional NVML (v2 memory info only) reader.

Private to this collection. Every parser fails closed: a line it cannot prove right raises SmiError carrying
the raw output, because a gate that guesses "0" on a line it did not understand would start a server on a
GPU that is still full.
"""
from __future__ import annotations

import re

GPU_FIELDS = ('index', 'uuid', 'memory.used', 'memory.total')
APP_FIELDS = ('gpu_uuid', 'pid', 'used_memory')
CSV = '--format=csv,noheader,nounits'
CSV_WITH_UNITS = '--format=csv,noheader'
MIB = 1024 * 1024

UUID_RE = re.compile(r'^(GPU|MIG)-[0-9A-Fa-f-]+$')
# /proc/driver/nvidia/version, the loaded kernel module: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
# 580.159.04  Release Build ..."
KERNEL_MODULE_RE = re.compile(r'^NVRM version:.*?[ \t](\d+\.\d+(?:\.\d+)?)[ \t]', re.M)
# nvidia-smi after a kernel module and userspace of different versions: "NVML library version: 580.95"
MISMATCH_RE = re.compile(r'Driver/library version mismatch', re.I)
NVML_LIBRARY_RE = re.compile(r'NVML library version:\s*(\d+\.\d+(?:\.\d+)?)')
# [N/A], [Not Supported], [Unknown Error], [GPU is lost]...: each means "no figure", never "zero".
NOT_A_NUMBER_RE = re.compile(r'^\[.*\]$')

# Known failure texts -> what the operator should do. Checked in order against stdout + stderr.
DIAGNOSES = (
    (MISMATCH_RE,
     'the loaded kernel module and the NVIDIA userspace differ (driver upgraded without a reboot, or a '
     'container userspace that does not match the host driver): reboot the host or install the matching '
     'userspace version'),
    (re.compile(r"couldn't communicate with the NVIDIA driver|Failed to initialize NVML", re.I),
     'nvidia-smi cannot reach the driver: check that the nvidia kernel module is loaded (lsmod, dmesg for Xid '
     'errors) and, in a container, that /dev/nvidia* are passed through'),
    # 'No devices were found' (a query, rc 6); 'No devices found.' (-L, rc 0): driver 580, a GPU without its node
    (re.compile(r'No devices (were )?found', re.I),
     'nvidia-smi sees no GPU: check `nvidia-smi -L`, the /dev/nvidia* nodes and, in a container, the '
     'device passthrough'),
    (re.compile(r'is not a valid field to query', re.I),
     'this nvidia-smi does not know a queried field: the driver is older than this collection expects; '
     'upgrade it'),
)


class SmiError(Exception):
    """A read that cannot be trusted; `raw` is what was read, for the failure message."""

    def __init__(self, msg, raw='', rc=None, stderr='', cmd=''):
        super().__init__(msg)
        self.msg, self.raw, self.rc, self.stderr, self.cmd = msg, raw, rc, stderr, cmd


def query(nvidia_smi, kind, fields, units=False, ids=()):
    """The argv of every nvidia-smi query this collection makes (docs/CONVENTIONS.md lists them):
    `--query-KIND=FIELDS --format=csv,noheader[,nounits] [--id=I,J]`; run it through the runner, which adds
    the timeout."""
    argv = [nvidia_smi, '--query-%s=%s' % (kind, ','.join(fields)), CSV_WITH_UNITS if units else CSV]
    if ids:
        argv.append('--id=' + ','.join(str(i) for i in ids))
    return argv


def gpu_query(nvidia_smi):
    # Every GPU is read, and selection happens in Python, so a missing index is seen rather than answered
    # with nvidia-smi's rc 6 for the whole query.
    return query(nvidia_smi, 'gpu', GPU_FIELDS)


def apps_query(nvidia_smi):
    return query(nvidia_smi, 'compute-apps', APP_FIELDS)


def driver_query(nvidia_smi, ids=()):
    return query(nvidia_smi, 'gpu', ('driver_version',), units=True, ids=ids)


def version_count_query(nvidia_smi):
    """The driver version and the GPU count on each line (nvidia_userspace's check of a container's userspace)."""
    return query(nvidia_smi, 'gpu', ('driver_version', 'count'), units=True)


def list_query(nvidia_smi):
    """`nvidia-smi -L`: one line per GPU, with its name and UUID."""
    return [nvidia_smi, '-L']


def parse_driver_version(text):
    """The one driver version in text, the collection's only reader of it: /proc/driver/nvidia/version (the loaded
    kernel module's), or `--query-gpu=driver_version[,count]` output (one line per GPU, the version first), which
    every GPU must report alike."""
    module = KERNEL_MODULE_RE.search(text)
    if module:
        return module.group(1)
    versions = sorted(set(line.split(',')[0].strip() for line in text.splitlines() if line.strip()))
    if len(versions) != 1 or not versions[0][:1].isdigit():
        raise SmiError('nvidia-smi driver_version query gave %r: expected one version for every GPU' % text[:500],
                       text)
    return versions[0]


def parse_nvml_library_version(text):
    """The userspace's NVML version nvidia-smi names after a driver/library version mismatch, or None."""
    match = NVML_LIBRARY_RE.search(text)
    return match.group(1) if match else None


def check_result(res, what):
    """Raises SmiError for a timeout or a non-zero exit, with a diagnosis where the text is known."""
    if res.timed_out:
        raise SmiError('%s did not answer within its timeout (rc %s): the driver may be stuck; check dmesg '
                       'for Xid errors and whether other nvidia-smi calls hang' % (what, res.rc),
                       res.out, res.rc, res.err, res.cmd)
    if res.rc != 0:
        raise SmiError('%s failed (rc %s): %s' % (what, res.rc, diagnose(res.out + res.err)),
                       res.out, res.rc, res.err, res.cmd)


def diagnose(text):
    for regex, advice in DIAGNOSES:
        if regex.search(text):
            return '%s; output: %s' % (advice, text.strip())
    return 'unexpected output: %r' % text.strip()


def _fields(line, count):
    fields = [f.strip() for f in line.split(',')]
    if len(fields) != count:
        raise ValueError('expected %d fields, got %d' % (count, len(fields)))
    return fields


def _mib(value, name):
    if NOT_A_NUMBER_RE.match(value):
        raise ValueError('%s is %s: no figure, so the GPU cannot be proven free (MIG mode, a GPU fallen off '
                         'the bus, or a driver fault)' % (name, value))
    if not value.isdigit():
        raise ValueError('%s %r is not a whole number of MiB' % (name, value))
    return int(value)


def parse_gpus(text):
    """`--query-gpu=index,uuid,memory.used,memory.total` output -> [{index, uuid, used_mib, total_mib}]."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            index, uuid, used, total = _fields(line, len(GPU_FIELDS))
            if not index.isdigit():
                raise ValueError('index %r is not a number' % index)
            if not UUID_RE.match(uuid):
                raise ValueError('uuid %r is not a GPU UUID' % uuid)
            gpus.append(dict(index=int(index), uuid=uuid, used_mib=_mib(used, 'memory.used'),
                             total_mib=_mib(total, 'memory.total')))
        except ValueError as exc:
            raise SmiError('unparseable nvidia-smi line %r: %s' % (line, exc), text) from None
    if not gpus:
        raise SmiError('nvidia-smi listed no GPU at all: check `nvidia-smi -L` and the device passthrough', text)
    seen = set()
    for gpu in gpus:
        if gpu['index'] in seen:
            raise SmiError('GPU index %d is listed twice: the output cannot be trusted' % gpu['index'], text)
        seen.add(gpu['index'])
    return gpus


def select(gpus, indexes, expected_count, raw):
    """The GPUs to judge; fails on a GPU count other than expected or a selected index that is missing."""
    if expected_count is not None and len(gpus) != expected_count:
        raise SmiError('nvidia-smi lists %d GPU(s), %d expected: a GPU fell off the bus, the driver lost one, '
                       'or expected_count is wrong' % (len(gpus), expected_count), raw)
    if not indexes:
        return gpus
    by_index = dict((g['index'], g) for g in gpus)
    missing = sorted(set(indexes) - set(by_index))
    if missing:
        raise SmiError('GPU index(es) %s not listed by nvidia-smi (it lists %s): check the selection and '
                       '`nvidia-smi -L`' % (missing, sorted(by_index)), raw)
    return [by_index[i] for i in sorted(set(indexes))]


def parse_apps(text):
    """`--query-compute-apps=gpu_uuid,pid,used_memory` -> [{uuid, pid, used_mib}].

    Holder naming only explains a failure, so a line it cannot read is kept with what it has rather than
    raised; extra trailing fields (process_name) are ignored.
    """
    apps = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(',')]
        if len(fields) < len(APP_FIELDS) or not fields[1].isdigit():
            continue
        used = fields[2]
        apps.append(dict(uuid=fields[0], pid=int(fields[1]), used_mib=int(used) if used.isdigit() else None))
    return apps


class SmiReader:
    """One nvidia-smi call per read, through the runner, with its own timeout."""

    def __init__(self, runner, nvidia_smi='nvidia-smi', timeout=10.0):
        self.runner, self.nvidia_smi, self.timeout = runner, nvidia_smi, timeout

    def read(self):
        res = self.runner.run(gpu_query(self.nvidia_smi), timeout=self.timeout)
        check_result(res, 'nvidia-smi')
        try:
            return parse_gpus(res.out), res.out
        except SmiError as exc:
            exc.rc, exc.stderr, exc.cmd = res.rc, res.err, res.cmd
            raise

    def apps(self):
        res = self.runner.run(apps_query(self.nvidia_smi), timeout=self.timeout)
        check_result(res, 'nvidia-smi --query-compute-apps')
        return parse_apps(res.out)

    def close(self):
        pass


class NvmlReader:
    """NVML in this process; only v2 memory info, whose `used` reads 0 when idle (v1 adds ~615 MiB reserved)."""

    def __init__(self, pynvml):
        self.nvml = pynvml
        if not hasattr(pynvml, 'nvmlMemory_v2'):
            raise SmiError('this nvidia-ml-py has no nvmlMemory_v2: v1 memory info counts reserved memory and '
                           'never reads 0; upgrade nvidia-ml-py or use backend=nvidia-smi')
        self._call(pynvml.nvmlInit)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self.nvml.NVMLError as exc:
            raise SmiError('NVML %s failed: %s: %s' % (getattr(fn, '__name__', fn), exc, diagnose(str(exc))),
                           str(exc)) from None

    def read(self):
        nvml, gpus = self.nvml, []
        for i in range(self._call(nvml.nvmlDeviceGetCount)):
            handle = self._call(nvml.nvmlDeviceGetHandleByIndex, i)
            mem = self._call(nvml.nvmlDeviceGetMemoryInfo, handle, version=nvml.nvmlMemory_v2)
            uuid = self._call(nvml.nvmlDeviceGetUUID, handle)
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            gpus.append(dict(index=self._call(nvml.nvmlDeviceGetIndex, handle), uuid=uuid,
                             used_mib=mem.used // MIB, total_mib=mem.total // MIB))
        raw = ''.join('%(index)d, %(uuid)s, %(used_mib)d, %(total_mib)d\n' % g for g in gpus)
        return parse_gpus(raw), raw

    def close(self):
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass
