"""_canary: the canary's verdict, one test per reason (minimum sample, the control's own spread, time per output
token, output tok/s per running request, accept length over the window, a draft that does not work, error rate, time to
first token, GPU health), and the windows that cannot be read."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _canary as c
from ansible_collections.gpuserve.sglang.tests.support.sglang_metrics import Window

SETTINGS = {'min_requests': 20, 'tolerance_pct': 5.0, 'max_error_rate_pct': 1.0}
SAME = dict(tokens=64, verify=25, ttft=0.2, tpot=0.010)


def window(canary=None, control=None, rounds=6, per_round=8, control_tpots=None, canary_aborts=0, control_aborts=0):
    """Both replicas serve per_round requests between readings; control_tpots varies the control's TPOT per round."""
    w = Window()
    for i in range(rounds):
        w.canary.finish(n=per_round, **dict(SAME, **(canary or {})))
        kw = dict(SAME, **(control or {}))
        if control_tpots:
            kw['tpot'] = control_tpots[i % len(control_tpots)]
        w.control.finish(n=per_round, **kw)
        w.canary.abort(canary_aborts)
        w.control.abort(control_aborts)
        w.read()
    return w


def judge(w, settings=None, health=None):
    canary, control = w.sides()
    return c.judge(w.rounds, canary, control, SETTINGS if settings is None else settings, health)


def metrics(result):
    return [r['metric'] for r in result['reasons']]


def test_the_same_speed_and_acceptance_passes_naming_what_was_compared():
    got = judge(window())
    assert got['verdict'] == c.PASS, got['summary']
    assert got['summary'].startswith('canary ct104 against control ct102 over 30 s (7 readings): PASS: '
                                     'time per output token: canary ct104 10.0 ms, control ct102 10.0 ms, ')
    assert got['figures']['canary']['requests'] == 48 and got['figures']['control']['accept_length'] == 64 / 25


def test_minimum_sample_fewer_finished_requests_than_min_requests_is_not_enough_traffic():
    got = judge(window(rounds=3, per_round=3))
    assert got['verdict'] == c.SHORT
    assert got['short'] == ['canary ct104 finished 9 requests in the 15 s window, fewer than min_requests 20',
                            'control ct102 finished 9 requests in the 15 s window, fewer than min_requests 20']
    assert 'NOT ENOUGH TRAFFIC' in got['summary']


def test_minimum_sample_the_controls_spread_needs_three_intervals_with_requests():
    w = Window()
    w.canary.finish(n=30, **SAME)
    w.control.finish(n=30, **SAME)
    w.read()
    w.read()
    got = judge(w)
    assert got['verdict'] == c.SHORT and got['short'] == [
        "the control ct102 saw requests finish in 1 of the window's intervals: its own spread needs 3"]


def test_noise_band_a_canary_inside_the_controls_own_spread_passes_and_outside_it_fails():
    # the control's TPOT per interval: 8 to 13 ms, median 10.5, the band of its median 9 to 12 (14.3 % up); the
    # canary's 11.5 ms is 9.5 % above the control's window figure: inside that band, past the 5 % tolerance
    noisy = judge(window(canary={'tpot': 0.0115}, control_tpots=[0.008, 0.012, 0.009, 0.013, 0.010, 0.011]))
    assert noisy['verdict'] == c.PASS, noisy['summary']
    assert "worse by 9.5 %, threshold 14.3 % (tolerance_pct 5.0, the control's own spread 14.3 %)" in noisy['summary']
    steady = judge(window(canary={'tpot': 0.0115}, control={'tpot': 0.0105}))
    assert steady['verdict'] == c.FAIL and metrics(steady) == ['tpot_ms', 'tok_s_per_request']


def test_tpot_a_slower_canary_fails_naming_the_metric_both_values_and_the_threshold():
    got = judge(window(canary={'tpot': 0.013}))
    assert got['verdict'] == c.FAIL
    tpot = got['reasons'][0]
    assert tpot['metric'] == 'tpot_ms' and tpot['canary'] == pytest.approx(13.0) and tpot['threshold_pct'] == 5.0
    assert tpot['message'] == ("time per output token: canary ct104 13.0 ms, control ct102 10.0 ms, worse by 30.0 %, "
                               "threshold 5.0 % (tolerance_pct 5.0, the control's own spread 0.0 %)")
    assert got['summary'].startswith('canary ct104 against control ct102 over 30 s (7 readings): FAIL: time per '
                                     'output token: canary ct104 13.0 ms')


def test_output_tok_s_per_running_request_a_canary_slow_to_its_first_token_and_overall_fails():
    # the same TPOT, but each request takes longer end to end: fewer tokens per second of request time
    got = judge(window(canary={'ttft': 1.2}), settings=dict(SETTINGS, tolerance_pct=5.0))
    assert 'tok_s_per_request' in metrics(got)
    line = [r for r in got['reasons'] if r['metric'] == 'tok_s_per_request'][0]
    assert line['canary'] == pytest.approx(64 / (1.2 + 0.63)) and line['control'] == pytest.approx(64 / 0.83)


def test_accept_length_over_the_window_from_the_two_counters_lower_fails():
    got = judge(window(canary={'verify': 32}))  # 64 tokens in 32 verify steps: 2.0 against 2.56
    assert metrics(got) == ['accept_length']
    assert got['reasons'][0]['canary'] == pytest.approx(2.0) and got['reasons'][0]['control'] == pytest.approx(2.56)


def test_accept_length_a_draft_that_does_not_work_fails_whatever_its_speed():
    got = judge(window(canary={'verify': 63, 'tpot': 0.009}))  # 64 tokens in 63 steps: 1.02
    assert metrics(got) == ['accept_length']
    assert "the canary's draft is not working (at most 1.05), whatever its speed" in got['reasons'][0]['message']


def test_accept_length_is_not_compared_when_the_control_is_not_speculative():
    got = judge(window(control={'verify': 0}))
    assert got['verdict'] == c.PASS
    assert 'accept length: canary 2.56, control none: not compared' in got['compared']


def test_error_rate_more_aborts_than_the_control_by_more_than_the_limit_fails():
    got = judge(window(canary_aborts=1))  # 6 of 48: 12.5 %
    assert metrics(got) == ['error_rate_pct']
    assert got['reasons'][0]['message'] == (
        'error rate: canary ct104 12.50 % (6 of 48 aborted), control ct102 0.00 %, threshold 1.00 points above the '
        'control (max_error_rate_pct)')
    assert judge(window(canary_aborts=1, control_aborts=1))['verdict'] == c.PASS


def test_ttft_a_canary_slower_to_its_first_token_fails():
    got = judge(window(canary={'ttft': 0.3}), settings=dict(SETTINGS, tolerance_pct=10.0))
    assert metrics(got) == ['tok_s_per_request', 'ttft_ms']
    assert got['reasons'][1]['message'].startswith('time to first token: canary ct104 300.0 ms, control ct102 200.0 '
                                                   'ms, worse by 50.0 %')


def test_gpu_health_a_refused_check_or_a_missing_reading_on_either_replica_fails_even_with_little_traffic():
    health = {'canary': {'health': {'passed': True, 'gpus': []}},
              'control': {'health': {'passed': False, 'gpus': [],
                                     'refused': ['GPU 3 (bus 0000:02:09.0): xid: 1 Xid event(s)']}}}
    got = judge(window(rounds=2, per_round=1), health=health)
    assert got['verdict'] == c.FAIL and got['reasons'] == [
        {'metric': 'gpu_health', 'message': 'control ct102: GPU health: GPU 3 (bus 0000:02:09.0): xid: 1 Xid event(s)'}]
    got = judge(window(), health={'canary': {'msg': 'ssh: unreachable'},
                                  'control': {'health': {'passed': True, 'gpus': []}}})
    assert got['reasons'] == [{'metric': 'gpu_health',
                               'message': 'canary ct104: no GPU health reading (ssh: unreachable)'}]


def test_a_control_without_metrics_fails_saying_how_to_turn_them_on():
    w = window()
    w.rounds[0]['pages'][w.URLS['control']] = {'status': 404, 'text': '{"detail":"Not Found"}'}
    got = judge(w)
    assert got['verdict'] == c.FAIL and metrics(got) == ['metrics']
    assert got['reasons'][0]['message'] == (
        'the window could not be read: http://10.66.0.102:30000/metrics: HTTP 404: the server runs without '
        'enable_metrics (a rollout with the canary off turns it on first)')


def test_a_counter_that_went_down_within_the_window_fails():
    w = window(rounds=3)
    fresh = Window()
    w.rounds.append({'t': w.t, 'pages': dict(w.rounds[-1]['pages'], **{w.URLS['canary']: fresh.rounds[0]['pages'][
        fresh.URLS['canary']]})})
    got = judge(w)
    assert got['verdict'] == c.FAIL and 'the server restarted within the window' in got['reasons'][0]['message']


def test_a_page_missing_from_a_round_fails_naming_the_url():
    w = window(rounds=3)
    del w.rounds[1]['pages'][w.URLS['canary']]
    assert 'http://10.66.0.104:30000: no /metrics reading at 1005.0' in judge(w)['summary']


def test_the_share_of_decode_steps_outside_cuda_graphs_is_reported():
    w = window()
    w.canary.step(n=9)
    w.canary.step(graph=False, n=1)
    w.read()
    assert judge(w)['figures']['canary']['verify_outside_graphs_pct'] == pytest.approx(10.0)
