# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU health drift: what got worse in each GPU's health since a recorded reading, and what differs between two.

Private to this collection. A reading is the result of the gate's health stage (_gate.health_stage: `gpus` as
_gpu_health.summary keeps them, `findings` as _gpu_health.judge makes them, `xid_since_boot_s`), as the deployment
manifest records it (`gate.health`, read before the verified start) and as a later read gives it. Two callers:
the audit (from_manifest, for the filters gpuserve.sglang.health_drift and sglang_audit: the manifest's reading
against one now, since the verified start) and the benchmark's verdict (_bench_verdict: each arm's readings against its adjacent baselines'). Standard
library and _gpu_health only. A value either side does not know is reported as unknown, never as unchanged.
"""
from __future__ import annotations

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gpu_health as health

XID_CHECKS = ('xid', 'xid_other')
NOT_RECORDED = ('the manifest of the verified start records no GPU health (written before the role recorded it, '
                'or with sglang_server_gate_health_enabled false): there is nothing to compare with; the next '
                'verified restart records it')


def where(gpu):
    """'GPU 0 (bus 0000:00:06.0)', as the gate's messages name a GPU."""
    return 'GPU %s (bus %s)' % (gpu.get('index'), gpu.get('bus_id'))


def link(gpu):
    """The PCIe link as 'Gen 5 x16', or None when any part of it is unknown."""
    pcie = gpu.get('pcie') or {}
    if pcie.get('gen') is None or pcie.get('width') is None:
        return None
    return 'Gen %d x%d' % (pcie['gen'], pcie['width'])


def memory_faults(gpu):
    """The row-remap faults of a GPU as a set ('remapped rows pending', ...), or None when unknown; a GPU without
    row remapping (retired pages instead) reports 'retired pages pending'."""
    if gpu.get('remap_pending') is not None and gpu.get('remap_failure') is not None:
        return set(name for name, bad in (('remapped rows pending', gpu['remap_pending']),
                                          ('remapped rows failed', gpu['remap_failure'])) if bad)
    if gpu.get('retired_pages_pending') is not None:
        return {'retired pages pending'} if gpu['retired_pages_pending'] else set()
    return None


def xid_findings(reading, gpu):
    """The reading's Xid findings (checks xid and xid_other) about gpu, by UUID."""
    return [f for f in (reading or {}).get('findings') or ()
            if f.get('check') in XID_CHECKS and f.get('uuid') == gpu.get('uuid')]


def _item(gpu, check, was, now, message, unknown=False):
    return dict(gpu=gpu.get('index'), bus_id=gpu.get('bus_id'), uuid=gpu.get('uuid'), check=check, was=was,
                now=now, unknown=unknown, message='%s: %s: %s' % (where(gpu), check, message))


def _gpu_drift(was, now, reading, placed):
    """The drift items of one GPU: was from the recorded reading, now from the current one (None: not listed)."""
    if now is None:
        yield _item(was, 'missing', 'listed', 'not listed',
                    'listed at the verified start, nvidia-smi does not list it now: ' + health.ADVICE['missing'])
        return
    old, new = link(was), link(now)
    if new is None:
        yield _item(now, 'pcie_link', old, None, 'the PCIe link is unknown now (the driver gives no value)', True)
    elif old is None:
        yield _item(now, 'pcie_link', None, new, 'the PCIe link was unknown at the verified start, it is %s now: '
                    'a drop cannot be told' % new, True)
    elif now['pcie']['gen'] < was['pcie']['gen'] or now['pcie']['width'] < was['pcie']['width']:
        yield _item(now, 'pcie_link', old, new, 'the PCIe link dropped from %s at the verified start to %s: %s'
                    % (old, new, health.ADVICE['pcie_link']))
    old, new = memory_faults(was), memory_faults(now)
    if new is None:
        yield _item(now, 'row_remap', None if old is None else sorted(old), None,
                    'remapped rows / retired pages are unknown now (the driver gives no value)', True)
    elif new - (old or set()):
        yield _item(now, 'row_remap', None if old is None else sorted(old), sorted(new), '%s now, %s at the verified '
                    'start: %s' % (' and '.join(sorted(new)), 'unknown' if old is None else
                                   (' and '.join(sorted(old)) or 'none'), health.ADVICE['row_remap']))
    old, new = was.get('ecc_uncorrected'), now.get('ecc_uncorrected')
    if new is None:
        yield _item(now, 'ecc', old, None, 'the uncorrectable ECC count is unknown now (the driver gives no value)',
                    True)
    elif new > (old or 0):
        yield _item(now, 'ecc', old, new, '%d volatile uncorrectable ECC error(s) now, %s at the verified start: %s'
                    % (new, 'unknown' if old is None else old, health.ADVICE['ecc']))
    for finding in xid_findings(reading, now):
        if finding.get('unknown'):
            yield _item(now, finding['check'], None, None, 'Xid events are unknown: %s' % finding['value'], True)
        elif not placed:
            yield _item(now, finding['check'], None, finding['value'], '%s; whether after the verified start is '
                        'unknown (its time could not be placed in the kernel log: no start time in the manifest, '
                        'or the PVE host\'s boot time unread)' % finding['value'], True)
        else:
            yield _item(now, finding['check'], None, finding['value'], 'new since the verified start: %s: %s'
                        % (finding['value'], health.ADVICE[finding['check']]))


def drift(recorded, current, started_epoch=None, checks=None, read_error=None):
    """The health drift since the verified start: recorded is the manifest's `gate.health` (None or {} for an old
    manifest), current a health stage result read now with xid_since = started_epoch (None with read_error when the
    read failed), checks the gate's health option (a check set to ignore is not compared).

    Returns {status, ok, failed, drift, unknown, notes, items}: status 'no drift', 'drift', 'unknown' or 'not
    recorded'; failed the messages that fail the audit: every drift, and an unknown where the check's action is
    refuse (unknown is never healthy); ok when there is none."""
    actions = health.actions_of(checks or {})
    if not recorded or not isinstance(recorded.get('gpus'), list):
        return dict(status='not recorded', ok=True, failed=[], drift=[], unknown=[], notes=[NOT_RECORDED], items=[])
    if current is None:
        item = dict(gpu=None, bus_id=None, uuid=None, check='read', was=None, now=None, unknown=True,
                    message='GPU health could not be read now: %s' % (read_error or 'no result'))
        return dict(status='unknown', ok=False, failed=[item['message']], drift=[], unknown=[item['message']],
                    notes=[], items=[item])
    placed = started_epoch is not None and current.get('xid_since_boot_s') is not None
    listed = dict((g.get('uuid'), g) for g in current.get('gpus') or ())
    items = []
    for was in recorded['gpus']:
        items.extend(i for i in _gpu_drift(was, listed.get(was.get('uuid')), current, placed)
                     if actions[i['check']] != 'ignore')
    unknown = [i['message'] for i in items if i['unknown']]
    found = [i['message'] for i in items if not i['unknown']]
    failed = [i['message'] for i in items if not i['unknown'] or actions[i['check']] == 'refuse']
    return dict(status='drift' if found else 'unknown' if unknown else 'no drift', ok=not failed, failed=failed,
                drift=found, unknown=unknown, notes=[], items=items)


def from_manifest(manifest, read, checks=None):
    """drift() of a deployment manifest (a dict, or empty when there is none) against the registered result of a
    health read now (its `health`, or its `msg` when it failed); checks: the gate's health option. An unknown check
    or action in checks raises _nvidia_smi.SmiError."""
    manifest = manifest if isinstance(manifest, dict) else {}
    read = read if isinstance(read, dict) else {}
    started = (manifest.get('times') or {}).get('started_epoch')
    try:
        started = None if started in (None, '') else float(started)
    except (TypeError, ValueError):
        started = None
    current = read.get('health') if isinstance(read.get('health'), dict) else None
    return drift((manifest.get('gate') or {}).get('health'), current, started, checks,
                 read_error=None if current is not None else read.get('msg') or 'the health read did not run')


def differences(a, b):
    """What differs between two readings of the same GPUs (the benchmark's arms): [(gpu, what, value in a, value
    in b)] for a GPU listed in one only, a different PCIe link, or a link unknown in one and known in the other."""
    out = []
    in_b = dict((g.get('uuid'), g) for g in (b or {}).get('gpus') or ())
    in_a = dict((g.get('uuid'), g) for g in (a or {}).get('gpus') or ())
    for uuid, gpu in in_a.items():
        other = in_b.get(uuid)
        if other is None:
            out.append((gpu, 'listed', 'listed', 'not listed'))
        elif link(gpu) != link(other):
            out.append((gpu, 'PCIe link', link(gpu) or 'unknown', link(other) or 'unknown'))
    out.extend((gpu, 'listed', 'not listed', 'listed') for uuid, gpu in in_b.items() if uuid not in in_a)
    return out


def xid_events(reading):
    """[(gpu, finding)] of the reading's Xid findings: known events, and unknown ones (kernel log unread)."""
    gpus = dict((g.get('uuid'), g) for g in (reading or {}).get('gpus') or ())
    return [(gpus.get(f.get('uuid')) or dict(index=f.get('gpu'), bus_id=f.get('bus_id'), uuid=f.get('uuid')), f)
            for f in (reading or {}).get('findings') or () if f.get('check') in XID_CHECKS]
