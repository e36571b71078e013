"""The GPU health reader and its judge, on the real H200 captures (tests/fixtures/nvidia-smi-h200-health): each
refusal class refused with the GPU and the check named, a healthy GPU passing, an unknown never healthy."""
import json

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gpu_health as health
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import SmiError

from ansible_collections.gpuserve.sglang.tests.support.gpu_health import (
    BUS, UUID, XID13_OTHER_GPU, XID48, XID79, capture, with_field)


def judged(text, xids=(), actions=None, **kw):
    return health.judge(health.parse_health(text), actions or dict(health.DEFAULT_ACTIONS), list(xids), **kw)


def test_the_query_asks_exactly_the_captured_fields_and_the_driver_knows_each():
    argv = health.health_query('nvidia-smi')
    assert argv == ['nvidia-smi', '--query-gpu=' + ','.join(health.HEALTH_FIELDS), '--format=csv,noheader,nounits']
    header = [f.strip() for f in capture('health_csv').splitlines()[0].split(',')]
    assert tuple(header) == health.HEALTH_FIELDS
    known = capture('help_query_gpu')
    for name in health.HEALTH_FIELDS:
        assert '"%s"' % name in known, name


def test_the_captured_h200_parses_with_unknown_retired_pages():
    (gpu,) = health.parse_health(capture('health_csv_noheader'))
    assert gpu == dict(index=0, bus_id=BUS, uuid=UUID, minor=None,
                       pcie=dict(gen=5, gen_max=5, width=16, width_max=16), ecc_uncorrected=0,
                       retired_pages_pending=None, remap_pending=False, remap_failure=False, clock_reasons=1,
                       persistence=True)


def test_a_healthy_gpu_passes_every_check():
    xids = health.parse_xids(capture('dmesg_xid'))
    assert xids == []  # the capture has NVRM lines, no Xid
    assert health.judge(health.parse_health(capture('health_csv_noheader')), dict(health.DEFAULT_ACTIONS), xids) == []


@pytest.mark.parametrize('name, value', [
    ('index', 'x'), ('uuid', 'nope'), ('pci.bus_id', 'bus'), ('pcie.link.gen.current', '5.0'),
    ('remapped_rows.pending', 'Maybe'), ('persistence_mode', 'On'), ('clocks_event_reasons.active', '1'),
])
def test_a_wrong_value_fails_the_read_with_the_line(name, value):
    with pytest.raises(SmiError) as err:
        health.parse_health(with_field(name, value))
    assert 'health line' in err.value.msg and value in err.value.msg


def test_a_short_line_and_no_gpu_fail_the_read():
    with pytest.raises(SmiError, match='expected 13 fields'):
        health.parse_health('0, 00000000:00:06.0, %s\n' % UUID)
    with pytest.raises(SmiError, match='no GPU'):
        health.parse_health('\n')


@pytest.mark.parametrize('name, value, check, words', [
    ('remapped_rows.pending', 'Yes', 'row_remap', 'remapped rows pending'),
    ('remapped_rows.failure', 'Yes', 'row_remap', 'remapped rows failure'),
    ('ecc.errors.uncorrected.volatile.total', '3', 'ecc', '3 volatile uncorrectable'),
])
def test_each_fatal_reading_is_refused_naming_gpu_check_value_and_what_to_do(name, value, check, words):
    (finding,) = judged(with_field(name, value))
    assert finding['action'] == 'refuse' and finding['check'] == check and not finding['unknown']
    assert finding['message'].startswith('GPU 0 (bus %s): %s: ' % (BUS, check))
    assert words in finding['message'] and 'reset the GPU or reboot the host' in finding['message']


def test_retired_pages_count_only_on_a_gpu_without_row_remapping():
    older = with_field('remapped_rows.failure', '[N/A]', with_field('remapped_rows.pending', '[N/A]'))
    assert judged(with_field('retired_pages.pending', 'No', older)) == []
    (finding,) = judged(with_field('retired_pages.pending', 'Yes', older))
    assert finding['check'] == 'row_remap' and 'retired pages pending' in finding['value']
    (finding,) = judged(older)  # neither known: unknown, refused
    assert finding['unknown'] and finding['action'] == 'refuse'


@pytest.mark.parametrize('name, value, check', [
    ('ecc.errors.uncorrected.volatile.total', '[N/A]', 'ecc'),
    ('ecc.errors.uncorrected.volatile.total', '[Not Supported]', 'ecc'),
    ('remapped_rows.pending', '[Unknown Error]', 'row_remap'),
    ('pcie.link.width.current', '[N/A]', 'pcie_link'),
    ('persistence_mode', '[N/A]', 'persistence'),
    ('clocks_event_reasons.active', '[GPU is lost]', 'clocks'),
])
def test_an_unknown_value_is_never_healthy(name, value, check):
    (finding,) = judged(with_field(name, value))
    assert finding['check'] == check and finding['unknown']
    assert finding['action'] == health.DEFAULT_ACTIONS[check]
    assert 'is unknown' in finding['message'] and 'warn or ignore' in finding['message']
    forced = dict(health.DEFAULT_ACTIONS, **{check: 'refuse'})
    (finding,) = judged(with_field(name, value), actions=forced)
    assert finding['action'] == 'refuse'
    assert judged(with_field(name, value), actions=dict(health.DEFAULT_ACTIONS, **{check: 'ignore'})) == []


@pytest.mark.parametrize('name, value, check, words', [
    ('pcie.link.gen.current', '3', 'pcie_link', 'Gen 3 x16 (max Gen 5 x16)'),
    ('pcie.link.width.current', '8', 'pcie_link', 'Gen 5 x8 (max Gen 5 x16)'),
    ('persistence_mode', 'Disabled', 'persistence', 'persistence mode off'),
    ('clocks_event_reasons.active', '0x0000000000000041', 'clocks', 'HW thermal slowdown'),
    ('clocks_event_reasons.active', '0x0000000000000005', 'clocks', 'SW power cap'),
])
def test_what_only_slows_is_warned(name, value, check, words):
    (finding,) = judged(with_field(name, value))
    assert finding['action'] == 'warn' and finding['check'] == check and words in finding['value']


def test_idle_and_sync_boost_clock_reasons_are_no_slowdown():
    assert judged(with_field('clocks_event_reasons.active', '0x0000000000000011')) == []


def test_xid_lines_are_parsed_and_attributed_by_bus_id():
    events = health.parse_xids(capture('dmesg_xid') + XID79 + XID48 + XID13_OTHER_GPU + 'Xid 79 in a user message\n')
    assert [(e['t'], e['bus'], e['code']) for e in events] == [
        (8123.000001, '0000:00:06', 79), (9000.5, '0000:00:06', 48), (9100.0, '0000:3b:00', 13)]
    assert events[0]['text'] == "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    (finding,) = judged(capture('health_csv_noheader'), events)
    assert finding['check'] == 'xid' and finding['action'] == 'refuse'
    assert 'GPU 0 (bus 0000:00:06.0): xid: 2 Xid event(s) since boot (codes 48, 79), last: Xid 48 at 9000.5 s' \
        in finding['message']
    assert 'reset the GPU (nvidia-smi -r -i 0' in finding['message']


def test_a_journal_line_without_a_stamp_counts_whatever_the_since():
    events = health.parse_xids('Dec 03 05:57:12 pve kernel: NVRM: Xid (PCI:00000000:00:06): 94, pid=1, Contained\n')
    assert events == [dict(t=None, bus='0000:00:06', code=94, text='pid=1, Contained')]
    (finding,) = judged(capture('health_csv_noheader'), events, xid_since=10 ** 6)
    assert finding['check'] == 'xid'


def test_an_xid_before_the_last_verified_start_no_longer_counts():
    events = health.parse_xids(XID79)
    assert judged(capture('health_csv_noheader'), events, xid_since=8123.5) == []
    (finding,) = judged(capture('health_csv_noheader'), events, xid_since=8000.0)
    assert 'since 8000.0 s after boot' in finding['value']


def test_other_xids_warn_and_fatal_codes_are_the_documented_ones():
    (finding,) = judged(capture('health_csv_noheader'),
                        health.parse_xids(XID13_OTHER_GPU.replace('3b:00', '00:06')))
    assert finding['check'] == 'xid_other' and finding['action'] == 'warn'
    assert {48, 63, 64, 74, 79, 94, 95} <= set(health.FATAL_XIDS) and 13 not in health.FATAL_XIDS


def test_an_unread_kernel_log_is_unknown_and_refused():
    findings = health.judge(health.parse_health(capture('health_csv_noheader')), dict(health.DEFAULT_ACTIONS),
                            None, 'dmesg failed (rc 1): dmesg: read kernel buffer failed: Operation not permitted')
    assert [(f['check'], f['action'], f['unknown']) for f in findings] == [
        ('xid', 'refuse', True), ('xid_other', 'warn', True)]
    assert 'Operation not permitted' in findings[0]['message']


def test_a_missing_gpu_is_refused_at_host_level():
    (finding,) = health.judge([], dict(health.DEFAULT_ACTIONS), [], missing=['nvidia-smi lists 7 GPU(s), 8 expected'])
    assert finding['check'] == 'missing' and finding['gpu'] is None and finding['action'] == 'refuse'
    assert finding['message'].startswith('host: missing: nvidia-smi lists 7 GPU(s), 8 expected: check nvidia-smi -L')


def test_the_minor_is_named_when_known():
    gpus = [dict(g, minor=4) for g in health.parse_health(with_field('ecc.errors.uncorrected.volatile.total', '1'))]
    (finding,) = health.judge(gpus, dict(health.DEFAULT_ACTIONS), [])
    assert finding['message'].startswith('GPU 0 (bus %s, /dev/nvidia4): ecc' % BUS)


def test_actions_fill_defaults_and_refuse_unknown_names():
    assert health.actions_of(None) is None
    assert health.actions_of({}) == health.DEFAULT_ACTIONS
    assert health.actions_of({'pcie_link': 'refuse', 'xid': None})['pcie_link'] == 'refuse'
    with pytest.raises(SmiError, match='no check'):
        health.actions_of({'xids': 'refuse'})
    with pytest.raises(SmiError, match='none of'):
        health.actions_of({'xid': 'block'})


class Res:
    def __init__(self, rc, out, err=''):
        self.rc, self.out, self.err, self.cmd = rc, out, err, 'cmd'

    @property
    def timed_out(self):
        return self.rc in (124, 137)


class Runner:
    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def run(self, argv, timeout=None):
        self.calls.append((argv, timeout))
        return self.answers.pop(0)


def test_kernel_log_read_and_its_failures():
    assert health.read_kernel_log(Runner(Res(0, XID79)), 'dmesg', 5)[0][0]['code'] == 79
    events, why = health.read_kernel_log(Runner(Res(1, '', 'dmesg: read kernel buffer failed: Operation not permitted')))
    assert events is None and 'Operation not permitted' in why
    events, why = health.read_kernel_log(Runner(Res(124, '')))
    assert events is None and 'timed out' in why


def test_the_smi_reader_fails_closed():
    reader = health.SmiHealthReader(Runner(Res(0, capture('health_csv_noheader'))), 'nvidia-smi', 7)
    gpus, raw = reader.read()
    assert gpus[0]['uuid'] == UUID and reader.runner.calls[0] == (health.health_query('nvidia-smi'), 7)
    with pytest.raises(SmiError, match='is not a valid field'):
        health.SmiHealthReader(Runner(Res(2, 'Field "remapped_rows.pending" is not a valid field to query.\n'))).read()
    with pytest.raises(SmiError) as err:
        health.SmiHealthReader(Runner(Res(0, '0, x\n', 'warn'))).read()
    assert err.value.stderr == 'warn'


class FakeNvml:
    """nvidia-ml-py as the H200 answered it (nvml.json); `errors` names calls that raise NotSupported."""

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0

    class NVMLError(Exception):
        pass

    def __init__(self, errors=(), **changes):
        self.dev = dict(json.loads(capture('nvml', 'json'))['devices'][0], **changes)
        self.errors, self.calls = set(errors) | {'nvmlDeviceGetRetiredPagesPendingStatus'}, []
        for name, key in (('nvmlDeviceGetCurrPcieLinkGeneration', 'pcie_link_gen_current'),
                          ('nvmlDeviceGetMaxPcieLinkGeneration', 'pcie_link_gen_max'),
                          ('nvmlDeviceGetCurrPcieLinkWidth', 'pcie_link_width_current'),
                          ('nvmlDeviceGetMaxPcieLinkWidth', 'pcie_link_width_max'),
                          ('nvmlDeviceGetRemappedRows', 'remapped_rows'),
                          ('nvmlDeviceGetCurrentClocksEventReasons', 'clocks_event_reasons'),
                          ('nvmlDeviceGetPersistenceMode', 'persistence_mode'),
                          ('nvmlDeviceGetRetiredPagesPendingStatus', 'retired_pages_pending')):
            setattr(self, name, self._answer(name, key))

    def _answer(self, name, key):
        def call(handle, *args):
            self.calls.append(name)
            if name in self.errors:
                raise self.NVMLError('Not Supported')
            return self.dev[key]
        call.__name__ = name
        return call

    def nvmlInit(self):
        self.calls.append('init')

    def nvmlShutdown(self):
        self.calls.append('shutdown')

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetUUID(self, h):
        return self.dev['uuid'].encode()

    def nvmlDeviceGetPciInfo(self, h):
        return type('Pci', (), dict(busId=self.dev['pci_bus_id'].encode()))()

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        assert (kind, counter) == (1, 0)  # uncorrected, volatile
        if 'ecc' in self.errors:
            raise self.NVMLError('Not Supported')
        return self.dev['ecc_uncorrected_volatile_total']


def test_nvml_reads_the_same_facts_as_nvidia_smi():
    nvml = FakeNvml()
    reader = health.NvmlHealthReader(nvml)
    gpus, raw = reader.read()
    reader.close()
    assert gpus == health.parse_health(capture('health_csv_noheader'))
    assert nvml.calls[0] == 'init' and nvml.calls[-1] == 'shutdown'
    assert raw == '0, %s, %s\n' % (BUS, UUID)


def test_nvml_not_supported_is_unknown_and_a_pending_remap_is_refused():
    (gpu,), raw = health.NvmlHealthReader(FakeNvml(errors={'ecc', 'nvmlDeviceGetPersistenceMode'})).read()
    assert gpu['ecc_uncorrected'] is None and gpu['persistence'] is None
    (gpu,), raw = health.NvmlHealthReader(FakeNvml(remapped_rows=[0, 2, 1, 0])).read()
    assert raw.startswith('0, ')
    (finding,) = health.judge([gpu], dict(health.DEFAULT_ACTIONS), [])
    assert finding['check'] == 'row_remap' and finding['value'] == 'remapped rows pending'


def test_the_summary_keeps_the_fields_not_the_raw_line():
    (kept,) = health.summary(health.parse_health(capture('health_csv_noheader')))
    assert kept['bus_id'] == BUS and kept['pcie'] == dict(gen=5, gen_max=5, width=16, width_max=16)
