# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which /dev/nvidiaN is which GPU: nvidia-smi's index, the device minor N, the PCI bus id and the UUID, joined.

nvidia-smi numbers GPUs in PCI bus order; /dev/nvidiaN carries the driver's minor number N. They agree on most
hosts, not on all, so a container's devN entries (minors) must never be taken for the gate's GPU indexes. The
minor is no `--query-gpu` field (driver 580: "Field "minor_number" is not a valid field to query."); it is in
/proc/driver/nvidia/gpus/<bus id>/information ("Device Minor:"), which this reads and joins to nvidia-smi's
`index,pci.bus_id,uuid` by UUID, checking the bus id as well. Real captures: tests/fixtures/nvidia-h200-minor/.

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


def parse_smi(text):
    """`nvidia-smi --query-gpu=index,pci.bus_id,uuid --format=csv,noheader` -> [{index, bus_id, uuid}]."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(',')]
        if len(fields) != 3 or not fields[0].isdigit() or not UUID_RE.match(fields[2]):
            raise GpuMapError('unparseable nvidia-smi line %r: expected "index, bus id, uuid"' % line)
        rows.append(dict(index=int(fields[0]), bus_id=bus_id(fields[1]), uuid=fields[2]))
    return rows


def join(smi_rows, infos):
    """[{index, minor, uuid, bus_id}] for every GPU, sorted by index. Fails unless both sides list the same GPUs
    (by UUID) at the same bus ids, each index and each minor once."""
    by_uuid = dict((i['uuid'], i) for i in infos)
    if len(by_uuid) != len(infos) or len(set(i['minor'] for i in infos)) != len(infos):
        raise GpuMapError('the driver lists a GPU UUID or a device minor twice: %r' % infos)
    if len(set(r['index'] for r in smi_rows)) != len(smi_rows):
        raise GpuMapError('nvidia-smi lists an index twice: %r' % smi_rows)
    smi_uuids = set(r['uuid'] for r in smi_rows)
    if smi_uuids != set(by_uuid):
        raise GpuMapError('nvidia-smi and the driver list different GPUs: only nvidia-smi %s, only the driver %s'
                          % (sorted(smi_uuids - set(by_uuid)), sorted(set(by_uuid) - smi_uuids)))
    joined = []
    for row in sorted(smi_rows, key=lambda r: r['index']):
        info = by_uuid[row['uuid']]
        if info['bus_id'] != row['bus_id']:
            raise GpuMapError('GPU %s is at bus %s for nvidia-smi and %s for the driver'
                              % (row['uuid'], row['bus_id'], info['bus_id']))
        joined.append(dict(index=row['index'], minor=info['minor'], uuid=row['uuid'], bus_id=row['bus_id']))
    return joined


def indexes_of_minors(joined, minors):
    """nvidia-smi indexes of the GPUs behind /dev/nvidia<minor> for each minor, in the order given."""
    by_minor = dict((g['minor'], g['index']) for g in joined)
    missing = [m for m in minors if m not in by_minor]
    if missing:
        raise GpuMapError('no GPU has device minor %s (known: %s)'
                          % (', '.join(str(m) for m in missing), ', '.join(str(m) for m in sorted(by_minor))))
    return [by_minor[m] for m in minors]


def uuids_of_minors(infos, minors):
    """{uuid: minor} of the GPUs behind /dev/nvidia<minor> for each minor, from read_information's list."""
    by_minor = dict((i['minor'], i['uuid']) for i in infos)
    if len(by_minor) != len(infos):
        raise GpuMapError('the driver lists a device minor twice: %r' % infos)
    missing = [m for m in minors if m not in by_minor]
    if missing:
        raise GpuMapError('no GPU has device minor %s (known: %s)'
                          % (', '.join(str(m) for m in missing), ', '.join(str(m) for m in sorted(by_minor))))
    return dict((by_minor[m], m) for m in minors)
