"""A SIMULATED SGLang 0.5.23 /metrics page, made by prometheus_client itself from SGLang's own definitions (names,
documentation, labels, buckets: sglang/srt/observability/metrics_collector.py, TokenizerMetricsCollector and
SchedulerMetricsCollector), incremented as SGLang increments them per finished request and per decode step. Shared
by the tests of _sglang_metrics, _canary and the canary filter until a real page is captured."""
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

TOKENIZER = ['model_name', 'engine_type']
SCHEDULER = ['model_name', 'engine_type', 'tp_rank', 'pp_rank', 'moe_ep_rank']
TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E_BUCKETS = TTFT_BUCKETS + [600, 1200, 1800, 2400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
               0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]


class Server(object):
    """One replica's metrics. finish() is one finished request, abort() one abort, step() one decode/verify step."""

    def __init__(self, model='sim/x'):
        self.registry = r = CollectorRegistry()
        self.labels = {'model_name': model, 'engine_type': 'unified'}
        self.sched = dict(self.labels, tp_rank='0', pp_rank='0', moe_ep_rank='0')
        self.generation = Counter('sglang:generation_tokens_total', 'Number of generation tokens processed.',
                                  TOKENIZER + ['is_streaming'], registry=r)
        self.verify = Counter('sglang:spec_verify_calls_total', 'Number of speculative decoding verification calls.',
                              TOKENIZER, registry=r)
        self.requests = Counter('sglang:num_requests_total', 'Number of requests processed.',
                                TOKENIZER + ['is_streaming'], registry=r)
        self.aborted = Counter('sglang:num_aborted_requests_total', 'Number of requests aborted.', TOKENIZER,
                               registry=r)
        self.ttft = Histogram('sglang:time_to_first_token_seconds', 'Histogram of time to first token in seconds.',
                              TOKENIZER + ['is_streaming'], buckets=TTFT_BUCKETS, registry=r)
        self.tpot = Histogram('sglang:request_time_per_output_token_seconds',
                              'Per-request TPOT in seconds: (finished_time - first_token_time) / '
                              '(completion_tokens - 1).', TOKENIZER + ['is_streaming'], buckets=ITL_BUCKETS,
                              registry=r)
        self.e2e = Histogram('sglang:e2e_request_latency_seconds', 'Histogram of End-to-end request latency in seconds',
                             TOKENIZER + ['is_streaming'], buckets=E2E_BUCKETS, registry=r)
        self.passes = Counter('sglang:cuda_graph_passes_total',
                              'Total number of forward passes categorized by CUDA graph.', SCHEDULER + ['mode'],
                              registry=r)
        # read by nothing here: a page has many more metrics than the canary reads
        self.running = Gauge('sglang:num_running_reqs', 'The number of running requests.', SCHEDULER, registry=r,
                             multiprocess_mode='mostrecent')
        self.running.labels(**self.sched).set(3)

    def finish(self, tokens=64, verify=25, ttft=0.2, tpot=0.01, stream=False, n=1):
        s = dict(self.labels, is_streaming='true' if stream else 'false')
        for _i in range(n):
            self.ttft.labels(**s).observe(ttft)
            self.generation.labels(**s).inc(tokens)
            if verify:
                self.verify.labels(**self.labels).inc(verify)
            self.requests.labels(**s).inc()
            self.tpot.labels(**s).observe(tpot)
            self.e2e.labels(**s).observe(ttft + tpot * (tokens - 1))

    def abort(self, n=1):
        for _i in range(n):
            self.aborted.labels(**self.labels).inc()

    def step(self, graph=True, n=1):
        self.passes.labels(**dict(self.sched, mode='decode_cuda_graph' if graph else 'decode_none')).inc(n)

    def text(self):
        return generate_latest(self.registry).decode()


def page(server, status=200):
    return {'status': status, 'text': server.text()}


class Window(object):
    """Both replicas read together every `interval` seconds: the rounds sglang_canary_window returns."""

    URLS = {'canary': 'http://10.66.0.104:30000', 'control': 'http://10.66.0.102:30000'}

    def __init__(self, t0=1000.0, interval=5.0):
        self.canary, self.control = Server(), Server()
        self.t, self.interval, self.rounds = t0, interval, []
        self.read()

    def read(self):
        self.rounds.append({'t': self.t, 'pages': {self.URLS['canary']: page(self.canary),
                                                   self.URLS['control']: page(self.control)}})
        self.t += self.interval

    def sides(self):
        return ({'name': 'ct104', 'url': self.URLS['canary']}, {'name': 'ct102', 'url': self.URLS['control']})
