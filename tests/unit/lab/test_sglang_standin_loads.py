"""The lab's SIMULATED SGLang server answers GET /v1/loads as SGLang 0.5.23 does (what SMG's load monitor polls and a
drain waits on): num_running_reqs counts the requests in flight. Runs the stand-in on this host (loopback, one
rank, simulated GPU files in a temporary directory); no lab needed."""
import json
import threading
import time
import urllib.request

import pytest

from ansible_collections.gpuserve.sglang.tests.support import standin as standin_support
# SGLang 0.5.23's LoadSnapshot fields (managers/load_snapshot.py), as SMG 1.13.0 reads them (docs/research)
SNAPSHOT = {"timestamp", "dp_rank", "num_running_reqs", "num_waiting_reqs", "num_waiting_uncached_tokens",
            "num_used_tokens", "num_total_tokens", "num_active_tokens", "num_prealloc_ready_tokens",
            "max_total_num_tokens", "max_running_requests", "token_usage", "gen_throughput", "cache_hit_rate",
            "utilization", "total_prefill_uncached_tokens", "total_prefill_busy_us", "decode_moments", "memory",
            "queues"}


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as res:
        return res.status, json.loads(res.read() or b"null")


@pytest.fixture
def standin(tmp_path):
    port, proc = standin_support.start(tmp_path, "--tp-size", "1", "--max-running-requests", "16",
                                       GPUSIM_WARMUP_S="0.2", GPUSIM_TOKENS_PER_S="20", GPUSIM_WATCHDOG_S="0.1")
    yield port
    standin_support.stop(proc)


def running(port):
    status, body = get(port, "/v1/loads")
    assert status == 200
    (load,) = body["loads"]
    return load


def test_v1_loads_counts_the_requests_in_flight(standin):
    idle = running(standin)
    assert SNAPSHOT <= set(idle), SNAPSHOT - set(idle)
    assert idle["num_running_reqs"] == 0 and idle["max_running_requests"] == 16 and idle["dp_rank"] == 0
    # two slow requests (40 tokens at 20 tok/s: about 2 s each) in flight, then none
    body = json.dumps({"text": "hello", "sampling_params": {"max_new_tokens": 40}}).encode()

    def generate():
        req = urllib.request.Request("http://127.0.0.1:%d/generate" % standin, data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as res:
            res.read()

    threads = [threading.Thread(target=generate) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while running(standin)["num_running_reqs"] != 2:
        assert time.monotonic() < deadline, running(standin)
        time.sleep(0.05)
    for t in threads:
        t.join(30)
    assert running(standin)["num_running_reqs"] == 0
