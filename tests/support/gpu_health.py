"""GPU health readings shaped as the gate's health stage makes them (_gate.health_stage: the summary of the parsed
health line, judge's findings), from the real H200 capture (tests/fixtures/nvidia-smi-h200-health); shared by the
tests of _gpu_health, of the gate's health stage, of gpu_release with it, of _health_drift and of the benchmark's
verdict."""
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gpu_health as health

FIX = os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'nvidia-smi-h200-health')
UUID = 'GPU-4ba4bd64-f447-499a-bbfa-a2f337d6bdc5'
BUS = '0000:00:06.0'
XID79 = "[ 8123.000001] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
XID13 = '[ 8200.000000] NVRM: Xid (PCI:0000:00:06): 13, pid=77, name=python3, Graphics Exception\n'
XID48 = ('[ 9000.500000] NVRM: Xid (PCI:0000:00:06): 48, pid=4242, name=python3, An uncorrectable double bit error '
         '(DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.\n')
XID13_OTHER_GPU = '[ 9100.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=python3, Graphics Exception\n'
READ_ALL = dict((check, 'warn') for check in health.CHECKS)  # every finding, nothing refused (audit, benchmark)


def capture(name, ext='out'):
    with open(os.path.join(FIX, '%s.%s' % (name, ext))) as f:
        return f.read()


def captured():
    return capture('health_csv_noheader')


def with_field(name, value, text=None):
    """The captured health line with one field changed."""
    fields = [f.strip() for f in (text or captured()).strip().split(',')]
    fields[health.HEALTH_FIELDS.index(name)] = value
    return ', '.join(fields) + '\n'


def reading(text=None, dmesg=None, log_error=None, since=100.0, change=None):
    """A health stage result of the captured H200 (or text), with change applied to its GPU (pcie: merged),
    the Xid events of dmesg since `since` (seconds after boot; None: not placed), or log_error for a log unread."""
    gpus = health.parse_health(text or captured())
    for gpu in gpus:
        for key, value in (change or {}).items():
            gpu[key] = dict(gpu['pcie'], **value) if key == 'pcie' else value
    xids = None if log_error else health.parse_xids(dmesg or '')
    findings = health.judge(gpus, READ_ALL, xids, log_error, since)
    return dict(passed=True, checks=READ_ALL, gpus=health.summary(gpus), findings=findings,
                kernel_log='read' if xids is not None else log_error, xid_since_boot_s=since)
