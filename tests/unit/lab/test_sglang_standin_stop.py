"""The lab's SIMULATED SGLang server stops as SGLang 0.5.23 does (managers/tokenizer_manager.py, sigterm_watchdog):
SIGTERM only sets a flag and /health answers 503, a watchdog looks at it every GPUSIM_WATCHDOG_S seconds (5 in SGLang;
short here), drains what is in flight with no bound unless SGL_FORCE_SHUTDOWN, then takes its GPUs' files and exits
0; /v1/loads counts running and waiting requests. Runs the stand-in on this host (loopback, one rank, simulated GPU
files in a temporary directory); no lab needed. About 5 s."""
import importlib.util
import json
import os
import signal
import threading
import time
import types
import urllib.error
import urllib.request

import pytest

from ansible_collections.gpuserve.sglang.tests.support import standin as standin_support

STANDIN = standin_support.STANDIN
WATCHDOG_S = 0.5


def get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None


@pytest.fixture
def standin(tmp_path):
    """standin(**env): a ready stand-in (max 1 running request, 20 tokens/s); (port, process, its log path)."""
    procs = []

    def make(**extra):
        log = tmp_path / ("standin-%d.log" % len(procs))
        port, proc = standin_support.start(tmp_path, "--tp-size", "1", "--max-running-requests", "1", log=log,
                                           GPUSIM_WARMUP_S="0.1", GPUSIM_TOKENS_PER_S="20", GPUSIM_NOISE="0",
                                           GPUSIM_WATCHDOG_S=str(WATCHDOG_S), **extra)
        procs.append(proc)
        return port, proc, log
    yield make
    for proc in procs:
        standin_support.stop(proc)


def generate(port, tokens, results):
    """A /generate of `tokens` tokens in a thread; its status (or the error) lands in results."""
    body = json.dumps({"text": "hello", "sampling_params": {"max_new_tokens": tokens}}).encode()

    def run():
        req = urllib.request.Request("http://127.0.0.1:%d/generate" % port, data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                results.append((res.status, json.loads(res.read())["meta_info"]["completion_tokens"]))
        except (OSError, ValueError) as exc:
            results.append(("error", str(exc)))
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_in_flight(port, count):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        (load,) = get(port, "/v1/loads")[1]["loads"]
        if load["num_running_reqs"] + load["num_waiting_reqs"] >= count:
            return load
        time.sleep(0.02)
    raise AssertionError("never %d in flight" % count)


def test_v1_loads_counts_a_request_waiting_for_a_slot(standin):
    port, _proc, _log = standin()
    results = []
    threads = [generate(port, 10, results) for _ in range(2)]
    load = wait_in_flight(port, 2)
    assert (load["num_running_reqs"], load["num_waiting_reqs"], load["queues"]["waiting"]) == (1, 1, 1)
    for thread in threads:
        thread.join()
    assert results == [(200, 10), (200, 10)]


def test_sigterm_drains_what_is_in_flight_then_exits_0(standin):
    port, proc, log = standin()
    results = []
    thread = generate(port, 20, results)  # about 1 s at 20 tokens/s
    wait_in_flight(port, 1)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    assert get(port, "/health")[0] == 503  # a gateway routes elsewhere from now on
    assert proc.wait(10) == 0
    took = time.monotonic() - signalled
    thread.join()
    assert results == [(200, 20)]  # it finished: SGLang's drain has no bound
    text = log.read_text()
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in text
    assert "Gracefully exiting... Remaining number of requests 1." in text
    assert "Gracefully exiting... Remaining number of requests 0." in text
    assert "kill_process_tree called" in text
    # the request's second, then the watchdog's next look: a whole number of periods, not the request's end
    assert 1.0 <= took <= 1.0 + 2 * WATCHDOG_S + 0.5, took


def test_force_shutdown_skips_the_drain_but_not_the_watchdogs_poll(standin):
    port, proc, log = standin(SGL_FORCE_SHUTDOWN="true")
    results = []
    thread = generate(port, 200, results)  # 10 s: cut
    wait_in_flight(port, 1)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert time.monotonic() - signalled <= WATCHDOG_S + 0.5
    thread.join()
    assert results and results[0][0] == "error"
    assert "Signal SIGTERM received while force shutdown flag set. Force exiting." in log.read_text()


def test_sigkill_of_the_group_ends_it_at_once(standin):
    _port, proc, _log = standin()
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(2) == -signal.SIGKILL


def test_the_main_process_takes_its_gpus_files_before_its_schedulers_exit(tmp_path):
    """SIMULATED: the memory stays counted until the main process exits, as an H200 showed."""
    spec = importlib.util.spec_from_file_location("sglang_standin", STANDIN)
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    gpu = tmp_path / "nvidia3"
    gpu.write_bytes(b"")
    node = types.SimpleNamespace(devices=[str(gpu), str(tmp_path / "gone")], held=[])
    standin.hold_gpus(node)
    assert [f.name for f in node.held] == [str(gpu)]
    for handle in node.held:
        handle.close()
