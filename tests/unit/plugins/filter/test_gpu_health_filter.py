"""The health_drift filter: audit.yml's view of _health_drift.drift, from a deployment manifest and the
registered result of the health read; the health_checks filter: every check of _gpu_health at one action."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.gpu_health import FilterModule, health_checks, health_drift
from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_health import CHECKS, actions_of

GPU = dict(index=0, minor=None, bus_id='0000:00:06.0', uuid='GPU-4ba4bd64-f447-499a-bbfa-a2f337d6bdc5',
           pcie=dict(gen=5, gen_max=5, width=16, width_max=16), ecc_uncorrected=0, retired_pages_pending=None,
           remap_pending=False, remap_failure=False, clock_reasons=1, persistence=True)


def manifest(health=True, started='1764750000.25'):
    doc = dict(schema=1, times=dict(started_epoch=started), gate=dict(passed=True))
    if health:
        doc['gate']['health'] = dict(passed=True, gpus=[GPU], findings=[], xid_since_boot_s=100.0)
    return doc


def read(**gpu):
    return dict(changed=False, passed=True, health=dict(passed=True, gpus=[dict(GPU, **gpu)], findings=[],
                                                        xid_since_boot_s=12.5))


def test_registered_as_health_drift_and_health_checks():
    assert FilterModule().filters() == {'health_drift': health_drift, 'health_checks': health_checks}


@pytest.mark.parametrize('action', ['refuse', 'warn', 'ignore'])
def test_health_checks_gives_every_check_the_action(action):
    checks = health_checks(action)
    assert list(checks) == list(CHECKS) and set(checks.values()) == {action}
    assert actions_of(checks) == checks  # the gate's health option takes it as it is


def test_health_checks_refuses_an_unknown_action():
    with pytest.raises(AnsibleFilterError, match="health_checks: 'warm' is none of refuse, warn, ignore"):
        health_checks('warm')


def test_equal_health_is_no_drift_and_a_dropped_link_is_drift():
    assert health_drift(manifest(), read())['status'] == 'no drift'
    res = health_drift(manifest(), read(pcie=dict(gen=3, gen_max=5, width=16, width_max=16)))
    assert res['status'] == 'drift' and 'dropped from Gen 5 x16 at the verified start to Gen 3 x16' in res['drift'][0]


def test_the_start_time_comes_from_the_manifest_and_unplaced_it_makes_xids_unknown():
    xid = dict(check='xid', gpu=0, bus_id=GPU['bus_id'], uuid=GPU['uuid'], value='1 Xid event(s)', unknown=False,
               action='warn')
    now = read()
    now['health']['findings'] = [xid]
    assert health_drift(manifest(), now)['status'] == 'drift'
    for started in ('', None, 'soon'):
        assert health_drift(manifest(started=started), now)['status'] == 'unknown'


def test_a_failed_read_is_unknown_with_its_message():
    res = health_drift(manifest(), dict(failed=True, msg='nvidia-smi health query timed out'))
    assert res['status'] == 'unknown' and not res['ok'] and 'timed out' in res['unknown'][0]
    assert 'the health read did not run' in health_drift(manifest(), None)['unknown'][0]


def test_an_old_manifest_or_none_gets_the_note():
    for doc in (manifest(health=False), {}, None):
        assert health_drift(doc, read())['status'] == 'not recorded'


def test_an_unknown_check_fails_the_filter_naming_it():
    with pytest.raises(AnsibleFilterError, match="no check 'xids'"):
        health_drift(manifest(), read(), {'xids': 'warn'})
