"""_sglang_metrics: one /metrics page of SGLang 0.5.23 read by prometheus_client's parser into the canary's figures,
and the increase between two readings."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _sglang_metrics as m
from ansible_collections.gpuserve.sglang.tests.support.sglang_metrics import Server


def test_a_page_is_read_into_counters_summed_over_label_sets_and_histograms_sum_and_count():
    s = Server()
    s.finish(tokens=64, verify=25, ttft=0.25, tpot=0.01, n=2)
    s.finish(tokens=10, verify=4, ttft=0.5, tpot=0.02, stream=True)
    s.abort()
    s.step(n=7)
    s.step(graph=False, n=2)
    got = m.parse(s.text())
    assert got['generation_tokens'] == 138 and got['verify_calls'] == 54 and got['requests'] == 3
    assert got['aborted'] == 1 and got['cuda_graph_passes'] == {'decode_cuda_graph': 7.0, 'decode_none': 2.0}
    assert got['ttft_count'] == 3 and got['ttft_sum'] == pytest.approx(1.0)
    assert got['tpot_count'] == 3 and got['tpot_sum'] == pytest.approx(0.04)
    assert got['e2e_sum'] == pytest.approx(2 * (0.25 + 0.63) + 0.5 + 0.18)
    assert 'running' not in got  # the gauge is not read


def test_a_fresh_server_exports_no_counter_sample_and_reads_as_empty():
    assert m.parse(Server().text()) == {}


def test_a_known_name_of_another_type_is_refused_naming_both_types():
    text = '# TYPE sglang:num_requests_total gauge\nsglang:num_requests_total 3\n'
    with pytest.raises(m.MetricsError, match=r'^sglang:num_requests_total is a gauge, not a counter as in SGLang'):
        m.parse(text)


def test_a_page_that_is_not_the_format_is_refused():
    with pytest.raises(m.MetricsError, match=r'^not a Prometheus text page: '):
        m.parse('sglang:num_requests_total{model_name="x" 3\n')


def test_the_increase_counts_an_absent_name_as_zero_and_each_cuda_graph_mode():
    before = {'requests': 2.0, 'cuda_graph_passes': {'decode_cuda_graph': 5.0}}
    after = {'requests': 5.0, 'aborted': 1.0, 'cuda_graph_passes': {'decode_cuda_graph': 9.0, 'decode_none': 1.0}}
    assert m.delta(before, after) == {'requests': 3.0, 'aborted': 1.0,
                                      'cuda_graph_passes': {'decode_cuda_graph': 4.0, 'decode_none': 1.0}}


@pytest.mark.parametrize('before, after, name', [
    ({'requests': 5.0}, {'requests': 2.0}, 'requests'),
    ({'cuda_graph_passes': {'decode_none': 3.0}}, {'cuda_graph_passes': {}}, r'cuda_graph_passes\{mode=decode_none\}'),
])
def test_a_counter_that_went_down_means_the_server_restarted(before, after, name):
    with pytest.raises(m.MetricsError, match=r'^%s went down .*: the server restarted within the window$' % name):
        m.delta(before, after)


def test_trim_keeps_what_parse_reads_and_drops_the_rest():
    s = Server()
    s.finish(n=3)
    s.step(n=2)
    text = s.text()
    small = m.trim(text)
    assert m.parse(small) == m.parse(text)
    assert 'num_running_reqs' in text and 'num_running_reqs' not in small
    assert len(small) < len(text)


class Clock(object):
    def __init__(self, t=100.0):
        self.t = t
        self.slept = []

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.slept.append(round(s, 3))
        self.t += s + 0.25  # each round of reads takes a moment


def test_read_window_reads_every_url_together_every_interval_until_the_window_ends():
    clock = Clock()
    page = '# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 1.0\nother 2\n'
    pages = {'http://a:1/metrics': (200, page),
             'http://b:1/metrics': (404, '{"detail":"Not Found"}')}

    def fetch(url):
        if url.startswith('http://c'):
            raise OSError('connection refused')
        return pages[url]

    rounds = m.read_window(['http://a:1', 'http://b:1/', 'http://c:1'], 10, 4, fetch, clock, clock.sleep)
    assert [r['t'] for r in rounds] == [100.0, 104.25, 108.25, 110.25]
    assert clock.slept == [4.0, 3.75, 1.75]
    assert rounds[0]['pages'] == {
        'http://a:1': {'status': 200, 'text': '# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 1.0\n'},
        'http://b:1/': {'status': 404, 'text': '{"detail":"Not Found"}'},
        'http://c:1': {'status': None, 'error': 'GET http://c:1/metrics failed: connection refused'}}
