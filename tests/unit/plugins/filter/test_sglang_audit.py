"""The sglang_server audit's report (plugins/module_utils/_audit.py), and the filter sglang_audit that gives it to
audit.yml: what fails the audit, what is only a note or a flag."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.sglang_audit import FilterModule, sglang_audit
from ansible_collections.gpuserve.sglang.plugins.module_utils import _audit

GPU = dict(index=0, minor=None, bus_id='0000:00:06.0', uuid='GPU-4ba4bd64-f447-499a-bbfa-a2f337d6bdc5',
           pcie=dict(gen=5, gen_max=5, width=16, width_max=16), ecc_uncorrected=0, retired_pages_pending=None,
           remap_pending=False, remap_failure=False, clock_reasons=1, persistence=True)
MANIFEST = dict(times=dict(started_epoch='1764750000.25'),
                gate=dict(health=dict(passed=True, gpus=[GPU], findings=[], xid_since_boot_s=100.0)))
VERIFIED = dict(ok=True, problems=[])
LOSSY = dict(speculative_algorithm='EAGLE3', speculative_accept_threshold_single=0.5)


def read(**gpu):
    return dict(changed=False, health=dict(passed=True, gpus=[dict(GPU, **gpu)], findings=[], xid_since_boot_s=12.5))


def test_nothing_wrong_is_ok_with_no_drift_and_no_flags():
    got = _audit.report(VERIFIED, 'ct101', [], MANIFEST, read(), None, {})
    assert got == dict(host='ct101', ok=True, drift=[], health=got['health'], verification=VERIFIED, flags=[])
    assert got['health']['status'] == 'no drift'


def test_the_roles_and_the_verifications_problems_are_drift():
    got = _audit.report(dict(ok=False, problems=['the unit is not running']), 'ct101', ['args file differs'],
                        MANIFEST, read(), None, {})
    assert not got['ok'] and got['drift'] == ['args file differs', 'the unit is not running']


def test_a_gpu_health_failure_is_drift_named_as_such():
    got = _audit.report(VERIFIED, 'ct101', [], MANIFEST, read(pcie=dict(gen=5, gen_max=5, width=8, width_max=16)))
    assert not got['ok'] and got['drift'] and all(d.startswith('GPU health: ') for d in got['drift'])


@pytest.mark.parametrize('health_read', [None, dict(changed=False, skipped=True, skip_reason='Conditional result was False')])
def test_a_health_read_that_did_not_run_passes_with_a_note(health_read):
    got = _audit.report(VERIFIED, 'ct101', [], MANIFEST, health_read)
    assert got['ok'] and got['health']['status'] == 'not read' and got['health']['notes'] == [_audit.NOT_READ]


def test_lossy_speculative_settings_are_flags_not_drift():
    got = _audit.report(VERIFIED, 'ct101', [], MANIFEST, read(), None, LOSSY)
    assert got['ok'] and len(got['flags']) == 1 and 'lossy' in got['flags'][0]


def test_the_filter_passes_the_facts_and_names_itself_on_a_bad_check():
    assert FilterModule().filters() == {'sglang_audit': sglang_audit}
    facts = dict(host='ct101', problems=['x'], manifest=MANIFEST, health=read(), checks=None, args=LOSSY)
    assert sglang_audit(VERIFIED, facts) == _audit.report(VERIFIED, 'ct101', ['x'], MANIFEST, read(), None, LOSSY)
    with pytest.raises(AnsibleFilterError, match='^sglang_audit: '):
        sglang_audit(VERIFIED, dict(facts, checks={'pcie': 'sometimes'}))
