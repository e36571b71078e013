"""The body of sglang_bench_run (plugins/module_utils/_bench_run.py) on its measured path: /server_info, the
workers' environment through the sglang_server helper, the flush, the client run and its JSONL, each failure.

The module is a fake that records run_command's argv and raises on exit/fail; HTTP is answered at _bench_run.http.
"""
import json
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_run as br

INFO = {"max_running_requests": 48, "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
        "speculative_attention_mode": "prefill", "version": "0.5.23",
        "internal_states": [{"effective_max_running_requests_per_dp": 48}]}
WORKERS = {"ok": True, "unit": "sglang.service", "control_group": "/system.slice/sglang.service", "error": None,
           "pids": [10, 11], "worker_pids": [11], "workers_titled": True, "pids_with_vars": [10, 11],
           "consistent": True, "env": {"NCCL_PROTO": "LL"}}
RESULT = {"output_throughput": 88.8, "mean_tpot_ms": 11.2, "completed": 4, "accept_length": 2.5}


def raising(exc):
    """A call that raises exc (for lambdas standing in for a failing function)."""
    raise exc


class Exit(Exception):
    def __init__(self, failed, result):
        super().__init__(result.get("msg"))
        self.failed, self.result = failed, result


class Module:
    def __init__(self, params, answers, check_mode=False):
        self.params, self.check_mode, self.answers, self.calls = params, check_mode, answers, []

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        answer = self.answers[argv[1] if argv[1] in self.answers else argv[0]]
        return answer(argv) if callable(answer) else answer

    def exit_json(self, **result):
        raise Exit(False, result)

    def fail_json(self, **result):
        raise Exit(True, result)


@pytest.fixture
def params(tmp_path):
    (tmp_path / "dataset.json").write_text("[]")
    (tmp_path / "tok").mkdir()
    return dict(python="/opt/sglang/venv/bin/python", client_module="sglang.benchmark.serving", import_client=False,
                base_url="http://127.0.0.1:30000/", dataset_path=str(tmp_path / "dataset.json"),
                tokenizer=str(tmp_path / "tok"), model=None, num_prompts=4, input_len=8, output_len=8, concurrency=1,
                seed=1, warmup_requests=1, flush_cache=True, flush_timeout=60.0,
                output_file=str(tmp_path / "out.jsonl"), expect={"max_running_requests": 48,
                                                                 "speculative_algorithm": "EAGLE3"},
                worker_unit="sglang.service", helper="/usr/local/sbin/gpuserve-sglang",
                env_prefixes=["NCCL_", "TORCH_NCCL"], extra_args=[])


@pytest.fixture
def server(monkeypatch):
    """server(answers): {(method, path): (status, body)}; returns the requests made."""
    def make(answers):
        asked = []

        def http(method, url, timeout=30, data=None):
            path = url.split("30000", 1)[1]
            asked.append((method, path, timeout))
            return answers[(method, path.split("?")[0])]
        monkeypatch.setattr(br, "http", http)
        return asked
    return make


def client(params, lines, rc=0):
    def run(argv):
        with open(params["output_file"], "a") as handle:
            handle.write("".join(line + "\n" for line in lines))
        return rc, "client stdout", "client stderr" if rc else ""
    return run


def run(module):
    with pytest.raises(Exit) as exc:
        br.run_module(module)
    return exc.value


def test_a_measured_run_records_server_workers_flush_and_metrics(params, server):
    asked = server({("GET", "/server_info"): (200, json.dumps(INFO)), ("POST", "/flush_cache"): (200, " ok \n")})
    with open(params["output_file"], "w") as handle:
        handle.write(json.dumps(dict(RESULT, output_throughput=1.0)) + "\n")  # a stale line: removed first
    module = Module(params, {"worker-env": (0, json.dumps(WORKERS), ""),
                             "/opt/sglang/venv/bin/python": client(params, [json.dumps(RESULT)])})
    out = run(module)
    assert out.failed is False, out.result
    res = out.result
    assert res["metrics"]["output_throughput"] == 88.8 and res["metrics"]["completed"] == 4 and "raw" not in res["metrics"]
    assert res["server"] == {"max_running_requests": 48, "effective_max_running_requests": 48,
                             "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                             "speculative_attention_mode": "prefill", "version": "0.5.23"}
    # what the run records of the helper's answer: the summary, not the helper's own bookkeeping
    assert res["worker_env"] == {"pids": [10, 11], "worker_pids": [11], "workers_titled": True,
                                 "pids_with_vars": [10, 11], "consistent": True, "env": {"NCCL_PROTO": "LL"}}
    assert res["flush_cache"] == {"status": 200, "body": "ok"}
    assert asked == [("GET", "/server_info", 30), ("POST", "/flush_cache?timeout=60.0", 90.0)]
    helper_argv, helper_kw = module.calls[0]
    assert helper_argv == ["/usr/local/sbin/gpuserve-sglang", "worker-env", "--unit", "sglang.service",
                           "--prefix=NCCL_", "--prefix=TORCH_NCCL"] and helper_kw == {}
    client_argv, client_kw = module.calls[1]
    assert client_argv == res["argv"] and client_argv[:3] == ["/opt/sglang/venv/bin/python", "-m",
                                                              "sglang.benchmark.serving"]
    assert client_kw["environ_update"]["HF_HUB_OFFLINE"] == "1"
    assert client_kw["cwd"] == os.path.dirname(params["output_file"])
    assert "http://127.0.0.1:30000" in client_argv and res["rc"] == 0
    assert res["started"] <= res["measure_started"] <= res["ended"]


def test_without_a_worker_unit_and_flush_nothing_is_read_or_flushed(params, server):
    asked = server({("GET", "/server_info"): (200, json.dumps(INFO))})
    params.update(worker_unit="", flush_cache=False)
    module = Module(params, {"/opt/sglang/venv/bin/python": client(params, [json.dumps(RESULT)])})
    out = run(module)
    assert out.failed is False and asked == [("GET", "/server_info", 30)]
    assert out.result["worker_env"] == {"pids": [], "pids_with_vars": [], "consistent": None, "env": {}}
    assert "flush_cache" not in out.result and "--flush-cache" not in out.result["argv"]
    assert len(module.calls) == 1


@pytest.mark.parametrize("answer, message", [
    ((1, json.dumps(dict(WORKERS, ok=False, error="unit sglang.service has no process")), ""),
     "unit sglang.service has no process"),
    ((0, json.dumps(dict(WORKERS, ok=False, error=None)), ""), "/usr/local/sbin/gpuserve-sglang worker-env failed (rc 0): "),
    ((1, "", "python3: can't open file '/usr/local/sbin/gpuserve-sglang'\n"),
     "/usr/local/sbin/gpuserve-sglang worker-env gave rc 1 and no JSON: python3: can't open file "
     "'/usr/local/sbin/gpuserve-sglang'"),
    ((0, "[1]", ""), "/usr/local/sbin/gpuserve-sglang worker-env gave rc 0 and no JSON: [1]"),
    ((2, json.dumps(WORKERS), ""), "/usr/local/sbin/gpuserve-sglang worker-env failed (rc 2): "),
])
def test_a_worker_env_the_helper_cannot_vouch_for_fails_the_run(params, server, answer, message):
    server({("GET", "/server_info"): (200, json.dumps(INFO))})
    out = run(Module(params, {"worker-env": answer}))
    assert out.failed is True and out.result["msg"].startswith(message)


@pytest.mark.parametrize("answers, message", [
    ({("GET", "/server_info"): (503, "loading")}, "GET /server_info returned 503: loading"),
    ({("GET", "/server_info"): (200, "<html>")}, "/server_info is not JSON: <html>"),
    ({("GET", "/server_info"): (200, json.dumps(dict(INFO, max_running_requests=64)))},
     "the server is not serving the arm asked for: server runs with max_running_requests=64, the arm asked for 48"),
    ({("GET", "/server_info"): (200, json.dumps(INFO)), ("POST", "/flush_cache"): (400, " busy ")},
     "POST /flush_cache returned 400: busy"),
])
def test_the_server_must_answer_as_the_arm_asked(params, server, answers, message):
    server(answers)
    out = run(Module(params, {"worker-env": (0, json.dumps(WORKERS), "")}))
    assert out.failed is True and out.result["msg"] == message


@pytest.mark.parametrize("lines, rc, message", [
    ([json.dumps(RESULT)], 3, "sglang.benchmark.serving exited 3: client stderr"),
    ([], 0, "bench_serving wrote no result line"),
    (["{not json"], 0, "bench_serving result is not JSON"),
    ([json.dumps(dict(RESULT, output_throughput=-1))], 0, "bench_serving output_throughput is not a finite number"),
])
def test_a_client_failure_or_a_bad_result_fails_the_run(params, server, lines, rc, message):
    server({("GET", "/server_info"): (200, json.dumps(INFO)), ("POST", "/flush_cache"): (200, "")})
    out = run(Module(params, {"worker-env": (0, json.dumps(WORKERS), ""),
                              "/opt/sglang/venv/bin/python": client(params, lines, rc)}))
    assert out.failed is True and out.result["msg"].startswith(message), out.result["msg"]


def test_a_client_that_wrote_no_file_fails_the_run(params, server):
    server({("GET", "/server_info"): (200, json.dumps(INFO)), ("POST", "/flush_cache"): (200, "")})
    out = run(Module(params, {"worker-env": (0, json.dumps(WORKERS), ""),
                              "/opt/sglang/venv/bin/python": (0, "", "")}))
    assert out.failed is True and out.result["msg"].startswith("the client wrote no %s: " % params["output_file"])


def test_http_returns_an_http_error_as_a_status_and_raises_a_connection_error(monkeypatch):
    class HTTPError(Exception):
        code = 404

        def read(self):
            return b"no such route"

    monkeypatch.setattr(br, "open_url", lambda url, **kw: raising(HTTPError()))
    assert br.http("GET", "http://x/y") == (404, "no such route")
    monkeypatch.setattr(br, "open_url", lambda url, **kw: raising(OSError("refused")))
    with pytest.raises(OSError, match="refused"):
        br.http("GET", "http://x/y")

    class Response:
        def getcode(self):
            return 200

        def read(self):
            return b"\xffok"
    seen = {}
    monkeypatch.setattr(br, "open_url", lambda url, **kw: seen.update(kw, url=url) or Response())
    assert br.http("POST", "http://x/flush", timeout=5, data=b"d") == (200, "\ufffdok")
    assert seen == {"url": "http://x/flush", "method": "POST", "timeout": 5, "data": b"d", "validate_certs": False}
