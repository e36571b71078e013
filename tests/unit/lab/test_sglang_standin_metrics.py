"""The lab's SIMULATED SGLang server serves /metrics as SGLang 0.5.23 does for what the benchmark and the canary read:
only with --enable-metrics, SGLang's names and types, read by prometheus_client's own parser, by the benchmark
driver's reader and by the canary's (_sglang_metrics); and GPUSIM_SLOW_WHEN makes one config slower. Runs the stand-in on this host (loopback, one rank, simulated GPU files in a
temporary directory); no lab needed."""
import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_driver as d
from ansible_collections.gpuserve.sglang.plugins.module_utils import _sglang_metrics as m
from ansible_collections.gpuserve.sglang.tests.support import standin as standin_support


def request(port, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method="POST" if body else "GET",
                                 data=json.dumps(body).encode() if body else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, res.headers.get("Content-Type"), res.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read().decode()


@pytest.fixture
def standin(tmp_path):
    """standin(*args, **env): the port of a ready stand-in started with ARGS."""
    procs = []

    def start(*args, **extra_env):
        env = {"GPUSIM_WARMUP_S": "0.2", "GPUSIM_TOKENS_PER_S": "2000", "GPUSIM_WATCHDOG_S": "0.1", **extra_env}
        port, proc = standin_support.start(tmp_path, *args, **env)
        procs.append(proc)
        return port

    yield start
    for proc in procs:
        standin_support.stop(proc)


def test_metrics_count_finished_requests_with_sglangs_names_and_types(standin):
    port = standin("--enable-metrics", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")
    before = d.read_metrics("http://127.0.0.1:%d" % port, b.ACCEPT_LENGTH_COUNTERS)
    metas = []
    for stream in (False, True):
        status, _ctype, body = request(port, "/generate", {"text": "the model", "stream": stream,
                                                           "sampling_params": {"max_new_tokens": 16}})
        assert status == 200
        metas.append(json.loads(body.strip().splitlines()[-3][len("data: "):] if stream else body)["meta_info"])
    request(port, "/flush_cache", {})  # a flush resets /server_info's average, never a counter
    status, ctype, text = request(port, "/metrics")
    assert status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {name: f.type for name, f in families.items()} == {
        "sglang:generation_tokens": "counter", "sglang:spec_verify_calls": "counter",
        "sglang:num_requests": "counter", "sglang:num_aborted_requests": "counter",
        "sglang:time_to_first_token_seconds": "histogram", "sglang:request_time_per_output_token_seconds": "histogram",
        "sglang:e2e_request_latency_seconds": "histogram", "sglang:cuda_graph_passes": "counter"}
    read = m.parse(text)
    assert read["requests"] == 2 and read["ttft_count"] == 2 and read["tpot_count"] == 2 and read["e2e_count"] == 2
    assert read["cuda_graph_passes"] == {"decode_cuda_graph": read["verify_calls"]}
    assert 0 < read["ttft_sum"] < read["e2e_sum"] and read["tpot_sum"] > 0
    ttft = [s for s in families["sglang:time_to_first_token_seconds"].samples if s.name.endswith("_bucket")]
    assert {s.labels["le"] for s in ttft} == {"0.1", "0.2", "0.4", "0.6", "0.8", "1.0", "2.0", "4.0", "6.0", "8.0",
                                              "10.0", "20.0", "40.0", "60.0", "80.0", "100.0", "200.0", "400.0", "+Inf"}
    tokens = {tuple(sorted(s.labels.items())): s.value for s in families["sglang:generation_tokens"].samples}
    assert tokens == {(("engine_type", "unified"), ("is_streaming", "false"), ("model_name", "sim/x")): 16.0,
                      (("engine_type", "unified"), ("is_streaming", "true"), ("model_name", "sim/x")): 16.0}
    (calls,) = families["sglang:spec_verify_calls"].samples
    assert calls.labels == {"engine_type": "unified", "model_name": "sim/x"}
    assert calls.value == sum(m["spec_verify_ct"] for m in metas)
    after = d.read_metrics("http://127.0.0.1:%d" % port, b.ACCEPT_LENGTH_COUNTERS)
    got = b.accept_length(True, before, after, None)
    assert got["accept_length_source"] == "metrics" and got["generation_tokens"] == 32.0
    assert got["accept_length"] == 32.0 / calls.value


def test_a_server_without_speculation_counts_tokens_only_and_none_without_the_flag(standin):
    port = standin("--enable-metrics")
    request(port, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 4}})
    text = request(port, "/metrics")[2]
    assert "# TYPE sglang:spec_verify_calls_total counter" in text and "sglang:spec_verify_calls_total{" not in text
    assert d.counter_totals(text, b.ACCEPT_LENGTH_COUNTERS) == {b.GENERATION_TOKENS: 4.0}
    plain = standin()
    assert request(plain, "/metrics")[0] == 404  # as SGLang without --enable-metrics
    assert d.read_metrics("http://127.0.0.1:%d" % plain, b.ACCEPT_LENGTH_COUNTERS) == {"status": 404}


def test_a_config_named_by_gpusim_slow_when_is_slower_and_accepts_less(standin):
    slow = dict(GPUSIM_SLOW_WHEN="--mem-fraction-static 0.7", GPUSIM_SLOW_FACTOR="0.25", GPUSIM_SLOW_ACCEPT_LENGTH="1.5")
    spec = ("--enable-metrics", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3")
    ports = {"slow": standin(*spec + ("--mem-fraction-static", "0.7"), **slow),
             "other": standin(*spec + ("--mem-fraction-static", "0.8"), **slow)}
    got = {}
    for name, port in ports.items():
        for _ in range(3):
            request(port, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 32}})
        read = m.parse(request(port, "/metrics")[2])
        got[name] = (read["tpot_sum"] / read["tpot_count"], read["generation_tokens"] / read["verify_calls"])
    assert got["slow"][0] > 2 * got["other"][0]  # a quarter of the speed and fewer tokens per step
    assert got["slow"][1] < 2.0 < got["other"][1]
