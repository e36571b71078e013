"""GPU health drift (_health_drift), on readings shaped as the gate's health stage makes them from the real H200
capture (tests/fixtures/nvidia-smi-h200-health): each drift class found, none when equal, unknown never unchanged,
an old manifest said so."""
import copy

from ansible_collections.gpuserve.sglang.plugins.module_utils import _health_drift as hd
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import UUID, XID13, XID79, reading

START = reading()  # the manifest's gate.health: read before the verified start


def test_no_drift_when_the_reading_now_equals_the_one_at_the_start():
    res = hd.drift(START, reading(), 1764750000.0)
    assert res == dict(status='no drift', ok=True, failed=[], drift=[], unknown=[], notes=[], items=[])


def test_a_new_fatal_xid_since_the_start_is_drift_naming_gpu_code_and_what_to_do():
    res = hd.drift(START, reading(dmesg=XID79), 1764750000.0)
    assert res['status'] == 'drift' and not res['ok']
    (msg,) = res['drift']
    assert res['failed'] == [msg]
    assert msg.startswith('GPU 0 (bus 0000:00:06.0): xid: new since the verified start: 1 Xid event(s)')
    assert 'last: Xid 79' in msg and 'reset the GPU' in msg
    assert res['items'][0]['uuid'] == UUID and res['items'][0]['check'] == 'xid'


def test_any_other_xid_since_the_start_is_drift_too():
    res = hd.drift(START, reading(dmesg=XID13), 1764750000.0)
    assert [i['check'] for i in res['items']] == ['xid_other'] and not res['ok']


def test_an_xid_that_cannot_be_placed_after_the_start_is_unknown_not_new_and_not_healthy():
    for current, started in ((reading(dmesg=XID79, since=None), 1764750000.0), (reading(dmesg=XID79), None)):
        res = hd.drift(START, current, started)
        assert res['status'] == 'unknown' and res['drift'] == []
        assert 'whether after the verified start is unknown' in res['unknown'][0]
        assert not res['ok']  # xid refuses by default, so an unknown one fails the audit


def test_a_kernel_log_not_read_now_is_unknown():
    res = hd.drift(START, reading(log_error='dmesg failed (rc 1): Operation not permitted'), 1764750000.0)
    assert res['status'] == 'unknown' and not res['ok']
    assert [i['check'] for i in res['items']] == ['xid', 'xid_other']
    assert res['failed'] == res['unknown'][:1]  # xid refuses by default, xid_other only warns
    assert 'Operation not permitted' in res['unknown'][0]


def test_a_pcie_link_that_dropped_in_generation_or_width_is_drift():
    for change, now in (({'gen': 4}, 'Gen 4 x16'), ({'width': 8}, 'Gen 5 x8')):
        res = hd.drift(START, reading(change={'pcie': change}), 1764750000.0)
        assert res['status'] == 'drift'
        assert res['drift'][0].startswith('GPU 0 (bus 0000:00:06.0): pcie_link: the PCIe link dropped from '
                                          'Gen 5 x16 at the verified start to %s' % now)
        assert res['items'][0]['was'] == 'Gen 5 x16' and res['items'][0]['now'] == now
        assert not res['ok']  # pcie_link only warns at the gate, but the audit fails on any drift


def test_a_link_that_rose_since_the_start_is_no_drift():
    start = reading(change={'pcie': {'gen': 1}})  # trained low at idle, up under load
    assert hd.drift(start, reading(), 1764750000.0)['status'] == 'no drift'


def test_an_unknown_link_is_unknown_on_either_side_and_fails_only_under_refuse():
    unknown_now = hd.drift(START, reading(change={'pcie': {'gen': None}}), 1764750000.0)
    unknown_then = hd.drift(reading(change={'pcie': {'width': None}}), reading(), 1764750000.0)
    for res in (unknown_now, unknown_then):
        assert res['status'] == 'unknown' and res['items'][0]['check'] == 'pcie_link'
        assert res['ok'] and res['failed'] == []  # pcie_link warns by default: listed, not failed
    assert not hd.drift(START, reading(change={'pcie': {'gen': None}}), 1764750000.0,
                        checks={'pcie_link': 'refuse'})['ok']


def test_remapped_rows_now_pending_or_failed_are_drift():
    for key, words in (('remap_pending', 'remapped rows pending'), ('remap_failure', 'remapped rows failed')):
        res = hd.drift(START, reading(change={key: True}), 1764750000.0)
        assert res['status'] == 'drift' and not res['ok']
        assert res['drift'][0].startswith('GPU 0 (bus 0000:00:06.0): row_remap: %s now, none at the verified '
                                          'start' % words)


def test_a_fault_already_recorded_at_the_start_is_no_new_drift():
    pending = reading(change={'remap_pending': True})
    assert hd.drift(pending, copy.deepcopy(pending), 1764750000.0)['status'] == 'no drift'


def test_retired_pages_count_where_a_gpu_has_no_row_remapping():
    start = reading(change={'remap_pending': None, 'remap_failure': None, 'retired_pages_pending': False})
    now = reading(change={'remap_pending': None, 'remap_failure': None, 'retired_pages_pending': True})
    assert 'retired pages pending now' in hd.drift(start, now, 1764750000.0)['drift'][0]
    gone = reading(change={'remap_pending': None, 'remap_failure': None})
    res = hd.drift(START, gone, 1764750000.0)
    assert res['status'] == 'unknown' and not res['ok']  # row_remap refuses by default


def test_new_uncorrectable_ecc_is_drift_and_an_unknown_count_is_unknown():
    res = hd.drift(START, reading(change={'ecc_uncorrected': 2}), 1764750000.0)
    assert res['drift'][0].startswith('GPU 0 (bus 0000:00:06.0): ecc: 2 volatile uncorrectable ECC error(s) now, '
                                      '0 at the verified start')
    res = hd.drift(reading(change={'ecc_uncorrected': None}), reading(change={'ecc_uncorrected': 1}), 1.0)
    assert 'now, unknown at the verified start' in res['drift'][0]
    res = hd.drift(START, reading(change={'ecc_uncorrected': None}), 1764750000.0)
    assert res['status'] == 'unknown' and not res['ok']


def test_a_recorded_gpu_no_longer_listed_is_drift():
    now = reading()
    now['gpus'] = []
    res = hd.drift(START, now, 1764750000.0)
    assert res['items'][0]['check'] == 'missing' and res['status'] == 'drift'
    assert 'listed at the verified start, nvidia-smi does not list it now' in res['drift'][0]


def test_a_check_set_to_ignore_is_not_compared():
    res = hd.drift(START, reading(dmesg=XID13, change={'pcie': {'gen': 3}}), 1764750000.0,
                   checks={'xid_other': 'ignore', 'pcie_link': 'ignore'})
    assert res['status'] == 'no drift' and res['ok']


def test_an_old_manifest_without_health_is_said_so_never_healthy_drift_free():
    for recorded in (None, {}, {'passed': True}):
        res = hd.drift(recorded, reading(dmesg=XID79), 1764750000.0)
        assert res['status'] == 'not recorded' and res['drift'] == [] and res['notes'] == [hd.NOT_RECORDED]


def test_a_health_read_that_failed_now_is_unknown_and_fails():
    res = hd.drift(START, None, 1764750000.0, read_error='nvidia-smi health query failed (rc 9)')
    assert res['status'] == 'unknown' and not res['ok']
    assert res['unknown'] == ['GPU health could not be read now: nvidia-smi health query failed (rc 9)']


def test_differences_between_two_readings_name_the_gpu_and_both_links():
    assert hd.differences(START, reading()) == []
    ((gpu, what, a, b),) = hd.differences(START, reading(change={'pcie': {'width': 8}}))
    assert (gpu['uuid'], what, a, b) == (UUID, 'PCIe link', 'Gen 5 x16', 'Gen 5 x8')
    ((_gpu, what, a, b),) = hd.differences(reading(change={'pcie': {'gen': None}}), START)
    assert (what, a, b) == ('PCIe link', 'unknown', 'Gen 5 x16')
    empty = reading()
    empty['gpus'] = []
    assert [(d[1], d[2], d[3]) for d in hd.differences(START, empty)] == [('listed', 'listed', 'not listed')]
    assert [(d[1], d[2], d[3]) for d in hd.differences(empty, START)] == [('listed', 'not listed', 'listed')]


def test_xid_events_of_a_reading_with_their_gpu():
    assert hd.xid_events(reading()) == []
    ((gpu, finding),) = hd.xid_events(reading(dmesg=XID79))
    assert gpu['uuid'] == UUID and finding['check'] == 'xid' and not finding['unknown']


def test_each_item_names_the_gpu_by_index_bus_and_uuid_with_both_values():
    (item,) = hd.drift(START, reading(change={'ecc_uncorrected': 3}), 1.0)['items']
    assert dict(item, message=None) == dict(gpu=0, bus_id='0000:00:06.0', uuid=UUID, check='ecc', was=0, now=3,
                                            unknown=False, message=None)


def test_the_unknown_messages_say_what_is_unknown_now():
    for change, check, text in (
            ({'pcie': {'width': None}}, 'pcie_link', 'the PCIe link is unknown now (the driver gives no value)'),
            ({'ecc_uncorrected': None}, 'ecc',
             'the uncorrectable ECC count is unknown now (the driver gives no value)'),
            ({'remap_pending': None}, 'row_remap',
             'remapped rows / retired pages are unknown now (the driver gives no value)')):
        (item,) = hd.drift(START, reading(change=change), 1.0)['items']
        assert item['message'] == 'GPU 0 (bus 0000:00:06.0): %s: %s' % (check, text) and item['unknown']
        assert item['was'] == {'pcie_link': 'Gen 5 x16', 'ecc': 0, 'row_remap': []}[check] and item['now'] is None
    unknown_then = reading(change={'remap_pending': None})
    (item,) = hd.drift(unknown_then, reading(change={'remap_failure': None}), 1.0)['items']
    assert item['was'] is None


def test_row_remap_items_carry_the_faults_then_and_now_and_name_them_all():
    (item,) = hd.drift(START, reading(change={'remap_pending': True, 'remap_failure': True}), 1.0)['items']
    assert item['was'] == [] and item['now'] == ['remapped rows failed', 'remapped rows pending']
    assert item['message'].startswith('GPU 0 (bus 0000:00:06.0): row_remap: remapped rows failed and remapped rows '
                                      'pending now, none at the verified start: reset the GPU')
    both = reading(change={'remap_pending': True, 'remap_failure': True})
    retired = reading(change={'remap_pending': None, 'remap_failure': None, 'retired_pages_pending': True})
    (item,) = hd.drift(both, retired, 1.0)['items']
    assert 'retired pages pending now, remapped rows failed and remapped rows pending at the verified start' \
        in item['message']
    (item,) = hd.drift(reading(change={'remap_pending': None}), reading(change={'remap_pending': True}), 1.0)['items']
    assert item['was'] is None and 'remapped rows pending now, unknown at the verified start' in item['message']


def test_memory_faults_need_both_remap_fields_before_retired_pages():
    gpu = dict(remap_pending=True, remap_failure=None, retired_pages_pending=None)
    assert hd.memory_faults(gpu) is None
    assert hd.memory_faults(dict(gpu, retired_pages_pending=False)) == set()
    assert hd.memory_faults(dict(gpu, remap_failure=False)) == {'remapped rows pending'}


def test_the_not_recorded_and_not_read_results_whole():
    assert hd.drift(None, reading(), 1.0) == dict(
        status='not recorded', ok=True, failed=[], drift=[], unknown=[], notes=[hd.NOT_RECORDED], items=[])
    msg = 'GPU health could not be read now: no result'
    assert hd.drift(START, None, 1.0) == dict(
        status='unknown', ok=False, failed=[msg], drift=[], unknown=[msg], notes=[],
        items=[dict(gpu=None, bus_id=None, uuid=None, check='read', was=None, now=None, unknown=True, message=msg)])


def test_xid_events_give_the_gpu_summary_or_what_the_finding_names():
    now = reading(dmesg=XID79)
    ((gpu, _event),) = hd.xid_events(now)
    assert gpu == now['gpus'][0]
    now['gpus'] = []
    ((gpu, _event),) = hd.xid_events(now)
    assert gpu == dict(index=0, bus_id='0000:00:06.0', uuid=UUID)


def test_the_missing_xid_and_unknown_link_items_whole():
    from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_health import ADVICE
    here = 'GPU 0 (bus 0000:00:06.0): '
    gone = reading()
    gone['gpus'] = []
    (item,) = hd.drift(START, gone, 1.0)['items']
    assert (item['was'], item['now'], item['message']) == (
        'listed', 'not listed', here + 'missing: listed at the verified start, nvidia-smi does not list it now: '
        + ADVICE['missing'])
    unread = reading(log_error='dmesg failed (rc 1): denied')
    item = hd.drift(START, unread, 1.0)['items'][0]
    assert (item['was'], item['now'], item['message']) == (
        None, None, here + 'xid: Xid events are unknown: the kernel log could not be read: dmesg failed (rc 1): denied')
    value = reading(dmesg=XID79)['findings'][0]['value']
    (item,) = hd.drift(START, reading(dmesg=XID79), None)['items']
    assert (item['was'], item['now'], item['message']) == (
        None, value, here + "xid: %s; whether after the verified start is unknown (its time could not be placed in "
        "the kernel log: no start time in the manifest, or the PVE host's boot time unread)" % value)
    (item,) = hd.drift(START, reading(dmesg=XID79), 1.0)['items']
    assert (item['was'], item['now']) == (None, value)
    assert item['message'] == here + 'xid: new since the verified start: %s: %s' % (value, ADVICE['xid'])
    (item,) = hd.drift(reading(change={'pcie': {'gen': None}}), reading(), 1.0)['items']
    assert (item['was'], item['now'], item['message']) == (
        None, 'Gen 5 x16', here + 'pcie_link: the PCIe link was unknown at the verified start, it is Gen 5 x16 now: '
        'a drop cannot be told')
