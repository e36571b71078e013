"""The canary filters: which replica is the canary and which its control (one test per rule), and the verdict filter
over a window's readings."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.sglang_canary import FilterModule, canary_plan, canary_problems, \
    canary_verdict
from ansible_collections.gpuserve.sglang.tests.support.sglang_metrics import Window

HOSTS = ['ct104', 'ct102', 'ct103']


def hostvars(**restarted):
    hv = {h: {'sglang_server_gateway_worker_url': 'http://10.66.0.%s:30000' % h[2:],
              'sglang_server_gateway_host': 'gw100'} for h in HOSTS}
    for host, reasons in restarted.items():
        hv[host]['__sglang_server_restart_reasons'] = reasons
    return hv


def test_the_first_replica_to_restart_is_the_canary_and_the_next_one_not_reached_its_control():
    hv = hostvars(ct104=['args file differs from the inventory'])
    assert canary_plan(HOSTS, hv, 'ct104', ['ct104']) == {
        'canary': True, 'control': 'ct102', 'control_url': 'http://10.66.0.102:30000',
        'why': 'the first replica to restart in this run; its control ct102, not reached yet'}


def test_a_replica_after_one_that_restarted_is_not_the_canary():
    hv = hostvars(ct104=['args file differs from the inventory'], ct102=['args file differs from the inventory'])
    got = canary_plan(HOSTS, hv, 'ct102', ['ct102'])
    assert got['canary'] is False and got['why'] == 'not the canary: ct104 restarted first in this run'


def test_a_replica_before_it_that_did_not_restart_leaves_it_the_canary():
    hv = hostvars(ct104=[], ct102=['unit is inactive'])
    assert canary_plan(HOSTS, hv, 'ct102', ['ct102'])['control'] == 'ct103'


def test_the_control_is_outside_the_batch_and_behind_the_same_gateway_with_a_worker_url():
    hv = hostvars(ct104=['forced'])
    hv['ct102']['sglang_server_gateway_host'] = 'gw200'
    assert canary_plan(HOSTS, hv, 'ct104', ['ct104'])['control'] == 'ct103'
    hv['ct103']['sglang_server_gateway_worker_url'] = ''
    got = canary_plan(HOSTS, hv, 'ct104', ['ct104'])
    assert got == {'canary': False, 'control': '', 'control_url': '',
                   'why': 'no canary: no replica behind the same gateway is left on the old config (every other one '
                          'was reached before ct104, or is in its batch)'}
    hv = hostvars(ct104=['forced'])
    assert canary_plan(HOSTS, hv, 'ct104', ['ct104', 'ct102'])['control'] == 'ct103'


def test_the_last_replica_to_restart_has_no_control_left():
    assert canary_plan(HOSTS, hostvars(ct103=['forced']), 'ct103', ['ct103'])['canary'] is False


def test_a_host_outside_the_play_is_refused():
    with pytest.raises(AnsibleFilterError, match=r'^ct999 is not a host of this play \(ct104, ct102, ct103\)$'):
        canary_plan(HOSTS, hostvars(), 'ct999', [])


def test_the_verdict_filter_judges_the_rounds():
    w = Window()
    for _i in range(4):
        w.canary.finish(n=6)
        w.control.finish(n=6)
        w.read()
    canary, control = w.sides()
    got = canary_verdict(w.rounds, canary, control, {'min_requests': 20, 'tolerance_pct': 5, 'max_error_rate_pct': 1})
    assert got['verdict'] == 'pass' and got['figures']['control']['requests'] == 24


GOOD = {'canary': True, 'worker_url': 'http://10.66.0.104:30000', 'enable_metrics': True, 'nnodes': 1, 'serial': 1,
        'window': 60, 'interval': 5, 'on_low_traffic': 'wait', 'load': {}}


def test_a_canary_that_can_run_and_one_that_is_off_have_no_problem():
    assert canary_problems(GOOD) == []
    assert canary_problems(dict(GOOD, canary=False, worker_url='', nnodes=2)) == []


@pytest.mark.parametrize('change, problem', [
    (dict(worker_url=''), 'sglang_server_canary needs the replica behind a gateway (sglang_server_gateway_worker_url)'),
    (dict(enable_metrics=None), "sglang_server_canary reads both replicas' /metrics: set enable_metrics: true"),
    (dict(nnodes=2), 'sglang_server_canary compares one-node replicas; a multi-node replica (sglang_server_nnodes 2)'),
    (dict(serial='50%'), 'sglang_server_canary needs gpuserve_serial 1 (got 50%)'),
    (dict(window=12), 'sglang_server_canary_window 12 s holds fewer than 3 sglang_server_canary_interval of 5 s'),
    (dict(on_low_traffic='load', load={'base_url': 'http://10.66.0.100:30080'}),
     'sglang_server_canary_load needs dataset_path, tokenizer'),
    (dict(on_low_traffic='load', load={'base_url': '10.66.0.100:30080', 'dataset_path': '/d', 'tokenizer': '/t'}),
     "sglang_server_canary_load.base_url is the gateway's URL as the canary's container reaches it"),
])
def test_each_setting_that_keeps_the_canary_from_running_is_named(change, problem):
    got = canary_problems(dict(GOOD, **change))
    assert len(got) == 1 and problem in got[0], got


def test_the_filters_are_registered_by_their_documented_names():
    assert set(FilterModule().filters()) == {'sglang_canary_plan', 'sglang_canary_verdict', 'sglang_canary_problems'}
