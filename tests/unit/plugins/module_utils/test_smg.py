"""_smg: a worker's registration at SMG, against a fake gateway (tests/support/smg.py) that keeps SMG 1.13.0's worker
API semantics (docs/research/smg-1.13.0.md): registrations are probed in the background (pending, not in GET
/workers), DELETE makes a worker draining and the gateway drops it after its settle time whatever is in flight, labels
merge on PATCH. The fake is checked against the real smg by tests/lab/test_gateway.py."""
import json

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _smg

from ansible_collections.gpuserve.sglang.tests.support.smg import GW, KEY, URL, FakeSmg


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, secs):
        assert secs >= 0
        self.now += secs


def params(**kw):
    p = dict(url=URL, state='present', labels={}, priority=None, health=None, worker_api_key=None, wait=True,
             wait_timeout=30.0, drain_timeout=60.0, worker_loads=True, keep_healthy=0)
    p.update(kw)
    return p


def run(fake, check_mode=False, key=None, **kw):
    clock = Clock()
    gw = _smg.Gateway(GW + '/', fake.send, api_key=key, timeout=5)
    return _smg.run(gw, params(**kw), check_mode, _smg.Waiter(0.5, clock=clock, sleep=clock.sleep)), clock


def result(fake, **kw):
    """What run() returns to the module, without the clock."""
    return run(fake, **kw)[0]


def fails(fake, message, **kw):
    with pytest.raises(_smg.SmgError) as exc:
        run(fake, **kw)
    assert exc.value.message == message
    return exc.value


def test_adds_the_worker_and_waits_until_it_is_ready():
    fake = FakeSmg(probes=3)
    res, clock = run(fake, url=URL + '/', labels={'replica': 'ct101', 'tp': 4}, priority=60,
                     health={'drain_settle_secs': 600, 'timeout_secs': None}, worker_api_key='wk')
    assert res['changed'] is True and res['action'] == 'added'
    assert fake.calls[1][:3] == ('POST', '/workers', {'url': URL, 'labels': {'replica': 'ct101', 'tp': '4'},
                                                      'priority': 60, 'health': {'drain_settle_secs': 600},
                                                      'api_key': 'wk'})
    assert res['worker']['status'] == 'ready' and res['worker']['labels']['replica'] == 'ct101'
    assert 'api_key' not in json.dumps(res)
    assert res['ready_after_s'] == 1.0 and clock.now == 1.0


def test_a_rerun_changes_nothing_and_only_reads():
    fake = FakeSmg()
    fake.add_worker(URL, labels={'replica': 'ct101', 'version': '0.5.23'}, priority=60,
                    health={'drain_settle_secs': 600, 'timeout_secs': 5})
    res = result(fake, labels={'replica': 'ct101'}, priority=60, health={'drain_settle_secs': 600})
    assert res == {'changed': False, 'action': 'none', 'worker': res['worker'], 'ready_after_s': 0.0}
    assert fake.changing() == []


def test_only_what_differs_is_patched_and_other_labels_are_kept():
    fake = FakeSmg()
    w = fake.add_worker(URL, labels={'replica': 'ct101', 'zone': 'a'}, priority=50, health={'drain_settle_secs': 5})
    res = result(fake, labels={'replica': 'ct101', 'config': 'abc'}, priority=70, health={'drain_settle_secs': 9})
    assert res['action'] == 'updated' and res['patch_keys'] == ['health', 'labels', 'priority']
    assert fake.calls[1][:3] == ('PATCH', '/workers/' + w['id'], {'labels': {'config': 'abc'}, 'priority': 70,
                                                                  'health': {'drain_settle_secs': 9}})
    assert w['labels'] == {'replica': 'ct101', 'zone': 'a', 'config': 'abc'}


def test_a_priority_or_health_left_unset_is_left_alone():
    fake = FakeSmg()
    fake.add_worker(URL, priority=10, health={'drain_settle_secs': 77})
    res = result(fake)
    assert res['changed'] is False and fake.changing() == []


def test_check_mode_sends_nothing_that_changes_the_gateway():
    fake = FakeSmg()
    res = result(fake, check_mode=True)
    assert res == {'changed': True, 'action': 'added'} and fake.changing() == []
    fake.add_worker(URL)
    res = result(fake, check_mode=True, labels={'replica': 'x'})
    assert res['action'] == 'updated' and res['changed'] is True and fake.changing() == []
    res = result(fake, check_mode=True, state='absent')
    assert res['action'] == 'removed' and fake.changing() == []
    assert fake.workers[res['worker']['id']]['status'] == 'ready'


def test_a_worker_that_never_becomes_ready_fails_with_what_the_gateway_says():
    fake = FakeSmg(probes=None)
    err = fails(fake, URL + ' did not become ready at the gateway within 30 s: not registered yet (the gateway is '
                'still probing it: is its /health answering 200?); the gateway says: Could not detect HTTP backend')
    assert err.worker['status'] == 'pending'


def test_an_unhealthy_registered_worker_fails_the_wait_naming_its_status():
    fake = FakeSmg()
    fake.add_worker(URL, status='not_ready', is_healthy=False)
    err = fails(fake, URL + ' did not become ready at the gateway within 30 s: status not_ready, is_healthy False')
    assert err.worker['id'] == 'w1'


def test_without_wait_a_registration_returns_at_once():
    fake = FakeSmg(probes=None)
    res, clock = run(fake, wait=False)
    assert res['action'] == 'added' and res['worker']['status'] == 'pending' and clock.now == 0


def test_a_registration_under_way_is_waited_for_by_url():
    fake = FakeSmg(probes=3)
    fake.pending['w9'] = [{'url': URL}, 3]
    res = result(fake)
    assert res['action'] == 'added' and res['worker']['id'] == 'w9'
    assert [m for m, path in fake.changing()] == ['POST']


def test_a_draining_worker_is_added_again_once_the_gateway_dropped_it():
    fake = FakeSmg(settle=3)
    w = fake.add_worker(URL, status='draining', is_healthy=False, settle=3)
    res = result(fake)
    assert res['action'] == 'added' and res['worker']['id'] != w['id'] and res['worker']['status'] == 'ready'


def test_a_worker_that_stays_draining_is_not_added():
    fake = FakeSmg()
    fake.add_worker(URL, status='draining', is_healthy=False, settle=10 ** 6)
    fails(fake, URL + ' is still draining at the gateway after 30 s (an earlier removal); it can be added again once '
          'the gateway has dropped it (its drain_settle_secs)')
    assert fake.changing() == []


def test_removal_drains_then_waits_until_the_gateway_dropped_it():
    fake = FakeSmg(settle=8)
    w = fake.add_worker(URL, load=3)
    fake.worker_load[URL] = 4  # the server's own count: requests past the gateway too
    res, clock = run(fake, state='absent')
    assert res['changed'] is True and res['action'] == 'removed' and res['worker']['id'] == w['id']
    assert fake.changing() == [('DELETE', '/workers/' + w['id'])]
    assert res['drained_after_s'] == 2.0 and fake.worker_load[URL] == 0
    assert w['id'] not in fake.workers and clock.now == 3.0


OTHER = 'http://10.66.0.102:30000'


def test_keep_healthy_refuses_to_take_out_the_last_healthy_worker_and_changes_nothing():
    fake = FakeSmg()
    w = fake.add_worker(URL)
    fake.add_worker(OTHER, status='ready', is_healthy=False)
    fake.add_worker('http://10.66.0.103:30000', status='pending', is_healthy=True)
    for check_mode in (False, True):
        err = fails(fake, 'not taking {0} out of the gateway: 0 other worker(s) are ready and healthy (none), '
                          'keep_healthy asks for 1; nothing was changed. Bring another replica up (or wait until '
                          'the gateway reports it healthy), or lower keep_healthy'.format(URL),
                    state='absent', keep_healthy=1, check_mode=check_mode)
        assert err.worker is None
    assert fake.changing() == [] and fake.workers[w['id']]['status'] == 'ready'


def test_keep_healthy_counts_only_other_healthy_ready_workers():
    fake = FakeSmg(settle=1)
    fake.add_worker(URL + '/')  # the worker itself never counts, however its URL is spelt
    fake.add_worker(OTHER)
    fails(fake, 'not taking {0} out of the gateway: 1 other worker(s) are ready and healthy ({1}), keep_healthy '
                'asks for 2; nothing was changed. Bring another replica up (or wait until the gateway reports it '
                'healthy), or lower keep_healthy'.format(URL, OTHER), state='absent', keep_healthy=2)
    res = result(fake, state='absent', keep_healthy=1)
    assert res['changed'] is True and [m for m, path in fake.changing()] == ['DELETE']


def test_keep_healthy_names_the_healthy_others_in_order():
    fake = FakeSmg()
    fake.add_worker('http://10.66.0.109:30000')
    fake.add_worker(URL)
    fake.add_worker(OTHER)
    fails(fake, 'not taking {0} out of the gateway: 2 other worker(s) are ready and healthy ({1}, '
                'http://10.66.0.109:30000), keep_healthy asks for 3; nothing was changed. Bring another replica up '
                '(or wait until the gateway reports it healthy), or lower keep_healthy'.format(URL, OTHER),
          state='absent', keep_healthy=3)
    assert fake.changing() == []


def test_keep_healthy_is_not_asked_about_a_worker_already_draining_or_absent():
    fake = FakeSmg(settle=2)
    fake.add_worker(URL, status='draining', settle=2)
    assert result(fake, state='absent', keep_healthy=5)['changed'] is False
    assert result(fake, state='absent', keep_healthy=5) == {'changed': False, 'action': 'none'}


def test_keep_healthy_zero_reads_no_worker_list():
    fake = FakeSmg(settle=1)
    fake.add_worker(URL)
    result(fake, state='absent', keep_healthy=0, wait=False, drain_timeout=0)
    assert [c[:2] for c in fake.calls] == [('GET', '/workers'), ('DELETE', '/workers/w1')]


def test_the_server_s_own_requests_are_waited_for_after_the_gateway_dropped_it():
    fake = FakeSmg(settle=1)
    fake.add_worker(URL, load=1)
    fake.worker_load[URL] = 6
    res = result(fake, state='absent')
    assert res['drained_after_s'] == 3.0 and fake.worker_load[URL] == 0


def test_a_stopped_server_has_nothing_in_flight():
    fake = FakeSmg(settle=2)
    fake.add_worker(URL, load=0)
    res, clock = run(fake, state='absent')
    assert res['drained_after_s'] == 0 and ('GET', URL + '/v1/loads') in [c[:2] for c in fake.calls]


def test_removal_fails_when_requests_stay_in_flight():
    fake = FakeSmg(settle=10 ** 6, drain_rate=0)
    fake.add_worker(URL, load=2)
    fake.worker_answer = (200, '{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 2}]}')
    err = fails(fake, URL + ' still has requests in flight after 60 s (drain_timeout): 2 through the gateway, 3 on '
                'the server itself; the gateway sends it no new requests (draining) and drops it after its '
                'drain_settle_secs', state='absent')
    assert err.worker['status'] == 'draining' and err.worker['load'] == 2


def test_removal_fails_when_the_server_keeps_running_requests_after_the_gateway_dropped_it():
    fake = FakeSmg(settle=1)
    fake.add_worker(URL, load=1)
    fake.worker_answer = (200, '{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 0}]}')
    fails(fake, URL + ' still has requests in flight after 60 s (drain_timeout): 1 on the server itself; the gateway '
          'sends it no new requests (draining) and drops it after its drain_settle_secs', state='absent')


def test_a_server_without_a_load_snapshot_is_explained():
    fake = FakeSmg()
    fake.add_worker(URL)
    fake.worker_answer = (404, '{"detail":"Not Found"}')
    fails(fake, URL + '/v1/loads answered HTTP 404 without a load snapshot (SGLang >= 0.5.23 serves it): '
          '{"detail":"Not Found"}; set worker_loads to false to rely on the gateway\'s count alone', state='absent')


def test_without_worker_loads_a_drop_with_requests_in_flight_is_refused():
    fake = FakeSmg(settle=1, drain_rate=0)
    fake.add_worker(URL, load=2)
    fails(fake, 'the gateway dropped {0} (its drain_settle_secs passed) with 2 request(s) in flight at the last look; '
          'set health.drain_settle_secs above the longest request, or worker_loads to true'.format(URL),
          state='absent', worker_loads=False)
    assert not any(c[1].endswith('/v1/loads') for c in fake.calls)


def test_without_worker_loads_the_gateway_count_alone_is_waited_for():
    fake = FakeSmg(settle=10)
    fake.add_worker(URL, load=2)
    res = result(fake, state='absent', worker_loads=False)
    assert res['drained_after_s'] == 0.5


def test_removal_without_drain_or_wait_returns_after_the_delete():
    fake = FakeSmg(settle=10 ** 6, drain_rate=0)
    fake.add_worker(URL, load=2)
    res, clock = run(fake, state='absent', drain_timeout=0, wait=False)
    assert res['action'] == 'removed' and 'drained_after_s' not in res and clock.now == 0


def test_removal_fails_when_the_gateway_keeps_a_drained_worker_longer_than_wait_timeout():
    fake = FakeSmg(settle=10 ** 6)
    fake.add_worker(URL, load=0)
    fails(fake, URL + ' is drained but the gateway still lists it after 30 s: its drain_settle_secs is longer than '
          'wait_timeout', state='absent')


def test_worker_in_flight_reads_errors():
    def boom(*a):
        raise OSError('No route to host')
    with pytest.raises(_smg.SmgError) as exc:
        _smg.worker_in_flight(boom, URL)
    assert exc.value.message == 'could not read {0}/v1/loads: No route to host'.format(URL)
    seen = []
    assert _smg.worker_in_flight(lambda *a: seen.append(a) or (200, '{"loads": []}'), URL + '/', 'wk', 3) == 0
    assert seen == [('GET', URL + '/v1/loads', {'Accept': 'application/json', 'Authorization': 'Bearer wk'}, None, 3)]
    assert _smg.refused(ConnectionRefusedError()) and not _smg.refused(OSError('x'))


def test_an_absent_worker_is_left_alone_and_a_draining_one_is_not_deleted_twice():
    fake = FakeSmg()
    res = result(fake, state='absent')
    assert res == {'changed': False, 'action': 'none'} and fake.changing() == []
    fake.add_worker(URL, status='draining', is_healthy=False, settle=2, load=0)
    res = result(fake, state='absent')
    assert res['changed'] is False and fake.changing() == []


def test_the_key_is_sent_as_a_bearer_token_and_a_wrong_one_is_explained():
    fake = FakeSmg(key=KEY)
    run(fake, key=KEY)
    assert {auth for method, path, body, auth in fake.calls} == {'Bearer ' + KEY}
    fails(fake, 'the gateway at {0} answered GET /workers with HTTP 401: UNAUTHORIZED: Missing or invalid '
          'Authorization header (set api_key to an admin control-plane key of the gateway: '
          '--control-plane-api-keys)'.format(GW), key='wrong')


def test_a_user_role_key_is_explained():
    gw = _smg.Gateway(GW, lambda *a: (403, '{"error":{"code":"FORBIDDEN","message":"Admin role required"}}'))
    with pytest.raises(_smg.SmgError) as exc:
        gw.delete('w1')
    assert exc.value.message == ('the gateway at {0} answered DELETE /workers/w1 with HTTP 403: FORBIDDEN: Admin role '
                                 'required (the key has the user role; adding and removing workers needs an admin '
                                 'key)'.format(GW))


def test_a_gateway_that_does_not_answer_or_is_not_smg():
    fake = FakeSmg()
    fake.down = True
    fails(fake, 'the gateway at {0} did not answer GET /workers: [Errno 111] Connection refused'.format(GW))
    gw = _smg.Gateway(GW, lambda *a: (200, '<html>hello</html>'))
    with pytest.raises(_smg.SmgError) as exc:
        gw.workers()
    assert exc.value.message == ('the gateway at {0} answered GET /workers without a "workers" list: is it SMG '
                                 '(smg launch)?'.format(GW))


def test_two_workers_with_one_url_are_refused():
    fake = FakeSmg()
    fake.add_worker(URL)
    fake.add_worker(URL + '/')
    fails(fake, 'the gateway at {0} lists 2 workers with URL {1} (ids w1, w2): remove the extra ones '
          '(DELETE /workers/ID)'.format(GW, URL))


def test_a_refused_registration_names_the_reason():
    gw = _smg.Gateway(GW, lambda *a: (409, '{"error":{"code":"WORKER_ALREADY_EXISTS","message":"exists as w7"}}'))
    with pytest.raises(_smg.SmgError) as exc:
        gw.add({'url': URL})
    assert exc.value.message == 'the gateway at {0} refused to add {1}: WORKER_ALREADY_EXISTS: exists as w7'.format(
        GW, URL)
    gw = _smg.Gateway(GW, lambda *a: (202, '{"status":"accepted"}'))
    with pytest.raises(_smg.SmgError) as exc:
        gw.add({'url': URL})
    assert exc.value.message == ("the gateway at {0} accepted {1} but named no worker_id: {{'status': 'accepted'}}"
                                 .format(GW, URL))


@pytest.mark.parametrize('data,text,expected', [
    ({'message': 'm'}, '', 'm'), ({'detail': 'd'}, '', 'd'), ({'error': 'e'}, '', 'e'),
    (None, '  plain  ', 'plain'), (None, '', '(no body)'), ({'code': 'C'}, 'raw', 'raw'),
])
def test_error_text(data, text, expected):
    assert _smg.error_text(data, text) == expected


def test_error_code_and_public():
    assert _smg.error_code({'code': 'X'}) == 'X' and _smg.error_code('x') is None
    assert _smg.public(None) is None
    assert _smg.public({'id': 'a', 'url': 'u', 'api_key': 'k', 'engine_load': {}}) == {'id': 'a', 'url': 'u'}


def test_requests_carry_exactly_the_headers_and_body_they_need():
    fake = FakeSmg(key=KEY, probes=1)
    run(fake, key=KEY, labels={'replica': 'a'})
    get, post = fake.raw[0], fake.raw[1]
    assert get == ('GET', GW + '/workers', {'Accept': 'application/json', 'Authorization': 'Bearer ' + KEY}, None, 5)
    assert post[:3] == ('POST', GW + '/workers', {'Accept': 'application/json', 'Content-Type': 'application/json',
                                                  'Authorization': 'Bearer ' + KEY})
    assert json.loads(post[3]) == {'url': URL, 'labels': {'replica': 'a'}} and post[4] == 5
    fake.workers['w1']['load'] = 0
    fake.worker_load[URL] = 1
    run(fake, key=KEY, state='absent', worker_api_key='wk')
    loads = [r for r in fake.raw if r[1].endswith('/v1/loads')]
    assert loads[0] == ('GET', URL + '/v1/loads', {'Accept': 'application/json', 'Authorization': 'Bearer wk'},
                        None, 5)
    assert _smg.Gateway(GW, None).timeout == 10.0


def test_results_in_check_mode_and_without_wait_are_exact():
    fake = FakeSmg()
    w = fake.add_worker(URL, status='draining', is_healthy=False, settle=10)
    res = result(fake, check_mode=True)
    assert res == {'changed': True, 'action': 'added', 'worker': _smg.public(w)}
    fake.workers.clear()
    w = fake.add_worker(URL)
    res = result(fake, check_mode=True, priority=1)
    assert res == {'changed': True, 'action': 'updated', 'patch_keys': ['priority'], 'worker': _smg.public(w)}
    res = result(fake, wait=False, priority=2)
    assert res == {'changed': True, 'action': 'updated', 'patch_keys': ['priority'],
                   'worker': _smg.public(fake.workers[w['id']])} and res['worker']['priority'] == 2
    res = result(fake, wait=False)
    assert res == {'changed': False, 'action': 'none', 'worker': _smg.public(fake.workers[w['id']])}
    res = result(fake, check_mode=True, state='absent')
    assert res == {'changed': True, 'action': 'removed', 'worker': _smg.public(w)}
    w.update(status='draining', settle=10)
    res = result(fake, check_mode=True, state='absent')
    assert res == {'changed': False, 'action': 'none', 'worker': _smg.public(w)}


def test_without_wait_an_add_returns_the_gateway_s_view_or_none_when_it_was_under_way():
    fake = FakeSmg(probes=None)
    fake.pending['w9'] = [{'url': URL}, None]
    res = result(fake, wait=False)
    assert res == {'changed': True, 'action': 'added', 'worker': None}
    assert [(m, p) for m, p, body, auth in fake.calls] == [('GET', '/workers'), ('POST', '/workers')]


def test_durations_are_rounded_to_hundredths():
    fake = FakeSmg(probes=3, settle=10)
    clock = Clock()
    gw = _smg.Gateway(GW, fake.send)
    res = _smg.run(gw, params(), False, _smg.Waiter(1 / 3.0, clock=clock, sleep=clock.sleep))
    assert res['ready_after_s'] == 0.67
    fake.workers['w1']['load'] = 3
    res = _smg.run(gw, params(state='absent', wait=False, worker_loads=False), False,
                   _smg.Waiter(1 / 3.0, clock=clock, sleep=clock.sleep))
    assert res['drained_after_s'] == 0.67


def test_a_short_drain_timeout_still_drains():
    fake = FakeSmg(settle=10)
    fake.add_worker(URL, load=1)
    res = result(fake, state='absent', drain_timeout=1, wait=False, worker_loads=False)
    assert res['drained_after_s'] == 0.0


def test_a_worker_dropped_idle_before_the_first_look_is_drained_without_worker_loads():
    fake = FakeSmg(settle=1)
    fake.add_worker(URL, load=0)
    res = result(fake, state='absent', worker_loads=False)
    assert res['drained_after_s'] == 0.0


def test_failures_carry_the_gateway_s_last_view_of_the_worker():
    fake = FakeSmg(settle=1, drain_rate=0)
    w = fake.add_worker(URL, load=2)
    before = _smg.public(w)
    err = fails(fake, 'the gateway dropped {0} (its drain_settle_secs passed) with 2 request(s) in flight at the '
                'last look; set health.drain_settle_secs above the longest request, or worker_loads to true'
                .format(URL), state='absent', worker_loads=False)
    assert err.worker == before
    fake = FakeSmg(settle=10 ** 6)
    w = fake.add_worker(URL, load=0)
    before = _smg.public(w)
    err = fails(fake, URL + ' is drained but the gateway still lists it after 30 s: its drain_settle_secs is longer '
                'than wait_timeout', state='absent')
    assert err.worker == before


def test_ready_means_status_ready_and_healthy():
    assert _smg.ready({'status': 'ready', 'is_healthy': True})
    assert not _smg.ready({'status': 'draining', 'is_healthy': True})
    assert not _smg.ready({'status': 'ready', 'is_healthy': False})
    assert not _smg.ready({'status': 'ready'}) and not _smg.ready(None)


def test_waiter_never_sleeps_past_the_deadline():
    clock = Clock()
    naps = []

    def sleep(secs):
        naps.append(secs)
        clock.sleep(secs)
    done, value, secs = _smg.Waiter(0.5, clock=clock, sleep=sleep).until(lambda: (False, 'x'), 0.75)
    assert (done, value, secs) == (False, 'x', 0.75) and naps == [0.5, 0.25]


def test_public_keeps_what_identifies_the_worker_and_its_state():
    worker = dict(id='i', url='u', model_id='m', status='ready', is_healthy=True, load=1, priority=5, labels={},
                  health={}, api_key='k', engine_load={}, models=[])
    assert _smg.public(worker) == dict(id='i', url='u', model_id='m', status='ready', is_healthy=True, load=1,
                                       priority=5, labels={}, health={})


def test_small_helpers():
    assert str(_smg.SmgError('m')) == 'm'
    assert _smg.normalize_url(' http://hostX/ ') == 'http://hostX'
    assert _smg.error_text({'error': {'message': 'only'}}, '') == 'only'
    assert _smg.error_text({'error': {'code': 'ONLY'}}, '') == 'ONLY'
    assert _smg.error_text({'error': {'code': 'XC', 'message': 'mX'}}, '') == 'XC: mX'
    assert _smg.error_text(None, 'y' * 400) == 'y' * 300
    assert _smg.auth_hint(500) == ''
    loads = '{"loads": [{"num_waiting_reqs": 2}, {"num_running_reqs": 3}, {}]}'
    assert _smg.worker_in_flight(lambda *a: (200, loads), URL) == 5
    seen = []
    _smg.worker_in_flight(lambda *a: seen.append(a[-1]) or (200, '{"loads": []}'), URL)
    assert seen == [10.0]


def test_a_load_snapshot_error_quotes_at_most_200_characters():
    with pytest.raises(_smg.SmgError) as exc:
        _smg.worker_in_flight(lambda *a: (500, 'z' * 300), URL)
    assert exc.value.message.endswith(': ' + 'z' * 200 + "; set worker_loads to false to rely on the gateway's count "
                                      'alone')
    with pytest.raises(_smg.SmgError) as exc:
        _smg.worker_in_flight(lambda *a: (502, ''), URL)
    assert ': (no body); set worker_loads' in exc.value.message


@pytest.mark.parametrize('status', [200, 201, 202])
def test_every_success_status_of_a_registration_is_accepted(status):
    gw = _smg.Gateway(GW, lambda *a: (status, '{"worker_id": "w5"}'))
    assert gw.add({'url': URL}) == 'w5'


@pytest.mark.parametrize('status', [200, 202, 404])
def test_a_delete_accepts_done_queued_and_already_gone(status):
    _smg.Gateway(GW, lambda *a: (status, '')).delete('w1')


@pytest.mark.parametrize('status', [200, 202])
def test_a_patch_accepts_done_and_queued(status):
    _smg.Gateway(GW, lambda *a: (status, '')).patch('w1', {'priority': 1})


@pytest.mark.parametrize('method,status', [('delete', 201), ('delete', 405), ('patch', 201)])
def test_other_statuses_fail(method, status):
    gw = _smg.Gateway(GW, lambda *a: (status, ''))
    with pytest.raises(_smg.SmgError):
        getattr(gw, method)('w1', *([{}] if method == 'patch' else []))


def test_a_conflict_without_a_json_body_is_named():
    gw = _smg.Gateway(GW, lambda *a: (409, 'conflict'))
    with pytest.raises(_smg.SmgError) as exc:
        gw.add({'url': URL})
    assert exc.value.message == ('the gateway at {0} refused to add {1}: HTTP 409 (WORKER_ALREADY_EXISTS or another '
                                 'conflict)'.format(GW, URL))


def test_an_http_error_quotes_a_body_that_is_not_json():
    gw = _smg.Gateway(GW, lambda *a: (500, 'upstream broke'))
    with pytest.raises(_smg.SmgError) as exc:
        gw.workers()
    assert exc.value.message == 'the gateway at {0} answered GET /workers with HTTP 500: upstream broke'.format(GW)
