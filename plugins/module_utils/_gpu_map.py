# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which /dev/nvidiaN is which GPU: the device minor N, the PCI bus id and the UUID, from the driver.

nvidia-smi numbers GPUs in PCI bus order; /dev/nvidiaN carries the driver's minor number N. They agree on most
hosts, not on all, so a container's devN entries (minors) must never be taken for the gate's GPU indexes. The
minor is no `--query-gpu` field (driver 580: "Field "minor_number" is not a valid field to query."); it is in
/proc/driver/nvidia/gpus/<bus id>/information ("Device Minor:"), which this reads. The gate then finds each
minor's GPU in nvidia-smi's list by its UUID (_gate.select_minors). Real captures:
tests/fixtures/nvidia-h200-minor/.

Private to this collection; standard library only (it may travel into a container like _nvidia_smi.py).
"""
from __future__ import annotations

import os
import re

INFO_ROOT = '/proc/driver/nvidia/gpus'
BUS_ID_RE = re.compile(r'^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$')
UUID_RE = re.compile(r'^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')


class GpuMapError(Exception):
    """The GPUs cannot be told apart with certainty; the message says what disagrees."""


def bus_id(text):
    """A PCI bus id as /proc writes it, 'dddd:bb:dd.f' in lower case; nvidia-smi writes 8 domain digits."""
    match = BUS_ID_RE.match(text.strip())
    if not match:
        raise GpuMapError('not a PCI bus id: %r' % text)
    domain, bus, device, function = match.groups()
    return '%04x:%s:%s.%s' % (int(domain or '0', 16), bus.lower(), device.lower(), function)


def parse_information(text):
    """One /proc/driver/nvidia/gpus/<bus id>/information file -> {minor, uuid, bus_id}."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(':')
        if sep:
            fields[key.strip()] = value.strip()
    try:
        minor = int(fields['Device Minor'])
        uuid = fields['GPU UUID']
        location = bus_id(fields['Bus Location'])
    except (KeyError, ValueError) as exc:
        raise GpuMapError('unreadable GPU information (%s): %r' % (exc, text[:300])) from None
    if not UUID_RE.match(uuid):
        raise GpuMapError('unreadable GPU UUID %r in the GPU information' % uuid)
    return dict(minor=minor, uuid=uuid, bus_id=location)


def read_information(root=INFO_ROOT):
    """Every GPU the driver knows, from root/<bus id>/information, sorted by minor; the directory name must be
    the bus id the file names."""
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise GpuMapError('cannot list %s (%s): is the nvidia kernel module loaded?' % (root, exc.strerror)) from None
    gpus = []
    for name in names:
        path = os.path.join(root, name, 'information')
        try:
            with open(path) as f:
                info = parse_information(f.read())
        except OSError as exc:
            raise GpuMapError('cannot read %s (%s)' % (path, exc.strerror)) from None
        if info['bus_id'] != bus_id(name):
            raise GpuMapError('%s names bus %s' % (path, info['bus_id']))
        gpus.append(info)
    return sorted(gpus, key=lambda g: g['minor'])


def uuids_of_minors(infos, minors):
    """{uuid: minor} of the GPUs behind /dev/nvidia<minor> for each minor, from read_information's list."""
    by_minor = dict((i['minor'], i['uuid']) for i in infos)
    if len(by_minor) != len(infos) or len(set(by_minor.values())) != len(infos):
        raise GpuMapError('the driver lists a GPU UUID or a device minor twice: %r' % infos)
    missing = [m for m in minors if m not in by_minor]
    if missing:
        raise GpuMapError('no GPU has device minor %s (known: %s)'
                          % (', '.join(str(m) for m in missing), ', '.join(str(m) for m in sorted(by_minor))))
    return dict((by_minor[m], m) for m in minors)
