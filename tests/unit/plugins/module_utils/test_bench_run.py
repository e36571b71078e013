"""The body of sglang_bench_run (plugins/module_utils/_bench_run.py) on its measured path: /server_info, the
workers' environment through the sglang_server helper, the visit's plan handed to one driver process, and the runs
made from its records (JSONL, GPU state, accept length), each failure.

The module is a fake that records run_command's argv and raises on exit/fail; HTTP is answered at _bench_run.http,
the driver by a function that writes the runs' JSONL as the client would (the driver itself: test_bench_driver.py).
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
        key = argv[2] if argv[1] == "-" else argv[1] if argv[1] in self.answers else argv[0]
        answer = self.answers[key]
        return answer(argv) if callable(answer) else answer

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name

    def exit_json(self, **result):
        raise Exit(False, result)

    def fail_json(self, **result):
        raise Exit(True, result)


@pytest.fixture
def params(tmp_path):
    (tmp_path / "dataset.json").write_text("[]")
    (tmp_path / "tok").mkdir()
    return dict(python="/opt/sglang/venv/bin/python", client_module="sglang.benchmark.serving", import_client=False,
                base_url="http://127.0.0.1:30000/", dataset="sharegpt", dataset_path=str(tmp_path / "dataset.json"),
                tokenizer=str(tmp_path / "tok"), model=None, num_prompts=4, input_len=8, output_len=8,
                concurrency=[1, 4], warmup_runs=1, repeats=2, seed=1, flush_cache=True, flush_timeout=60.0,
                output_prefix=str(tmp_path / "v1-eagle3"),
                expect={"max_running_requests": 48, "speculative_algorithm": "EAGLE3"},
                worker_unit="sglang.service", helper="/usr/local/sbin/gpuserve-sglang",
                env_prefixes=["NCCL_", "TORCH_NCCL"], nvidia_smi="nvidia-smi", nvidia_smi_timeout=10.0,
                min_count=0, extra_args=[])


@pytest.fixture
def server(monkeypatch):
    """server(answers): {(method, path): (status, body)}; returns the requests made."""
    def make(answers):
        asked = []

        def http(method, url, timeout=30):
            path = url.split("30000", 1)[1]
            asked.append((method, path, timeout))
            return answers[(method, path.split("?")[0])]
        monkeypatch.setattr(br, "http", http)
        return asked
    return make


GPU = [{"rc": 0, "out": "0, 1980, 3201, 36, 89.37, 0x0000000000000000, P0\n", "err": "", "time": "T-clocks"},
       {"rc": 0, "out": "580.159.04\n", "err": "", "time": "T-driver"}]


def metrics(tokens, calls):
    return {"status": 200, "counters": {"sglang:generation_tokens_total": tokens,
                                        "sglang:spec_verify_calls_total": calls}}


def driver(result=None, lines=None, gpu=None, rc=0, err="", seen=None):
    """The driver: writes each run's JSONL (lines, default one RESULT line) and answers with its records (GPU state
    gpu, default GPU)."""
    gpu = GPU if gpu is None else gpu

    def run(argv):
        plan = json.loads(argv[3])
        if seen is not None:
            seen.append(plan)
        runs = []
        for i, planned in enumerate(plan["runs"]):
            with open(planned["output_file"], "a") as handle:
                handle.write("".join(line + "\n" for line in (lines or [json.dumps(RESULT)])))
            rec = {"label": planned["label"], "started": "S%d" % i, "ended": "E%d" % i, "output_tail": "t"}
            if planned["measured"]:
                rec.update(gpu_before=gpu, gpu_after=gpu, metrics_before=metrics(100 * i, 40 * i),
                           metrics_after=metrics(100 * i + 30, 40 * i + 10))
            runs.append(rec)
        return rc, json.dumps(result if result is not None else {"runs": runs, "error": None}) + "\n", err
    return run


def run(module):
    with pytest.raises(Exit) as exc:
        br.run_module(module)
    return exc.value


def answers(**more):
    out = {"worker-env": (0, json.dumps(WORKERS), "")}
    out.update(more)
    return out


def test_a_visit_runs_in_one_driver_process_and_records_each_measured_run(params, server):
    asked = server({("GET", "/server_info"): (200, json.dumps(INFO))})
    plans = []
    module = Module(params, answers(run=driver(seen=plans)))
    out = run(module)
    assert out.failed is False, out.result
    res = out.result
    assert asked == [("GET", "/server_info", 30)]
    helper_argv, helper_kw = module.calls[0]
    assert helper_argv == ["/usr/local/sbin/gpuserve-sglang", "worker-env", "--unit", "sglang.service",
                           "--prefix=NCCL_", "--prefix=TORCH_NCCL"] and helper_kw == {}
    (driver_argv, driver_kw), = module.calls[1:]
    assert driver_argv[:3] == ["/opt/sglang/venv/bin/python", "-", "run"]
    assert driver_kw["data"] == br.driver_source() and "def run_plan(plan):" in driver_kw["data"]
    assert driver_kw["environ_update"]["HF_HUB_OFFLINE"] == "1"
    assert driver_kw["cwd"] == os.path.dirname(params["output_prefix"])
    (plan,) = plans
    assert plan["client"] == "sglang.benchmark.serving" and plan["base_url"] == "http://127.0.0.1:30000"
    assert plan["flush_timeout"] == 60.0
    assert plan["counters"] == ["sglang:generation_tokens_total", "sglang:spec_verify_calls_total"]
    assert plan["gpu_argvs"] == [
        ["/usr/bin/timeout", "--kill-after=1", "10s", "nvidia-smi", "--query-gpu=index,clocks.sm,clocks.mem,"
         "temperature.gpu,power.draw,clocks_event_reasons.active,pstate", "--format=csv,noheader,nounits"],
        ["/usr/bin/timeout", "--kill-after=1", "10s", "nvidia-smi", "--query-gpu=driver_version",
         "--format=csv,noheader"]]
    assert [(r["label"], r["measured"]) for r in plan["runs"]] == [
        ("warmup 0 c=1", False), ("warmup 0 c=4", False), ("repeat 0 c=1", True), ("repeat 0 c=4", True),
        ("repeat 1 c=1", True), ("repeat 1 c=4", True)]
    first = plan["runs"][2]["argv"]
    assert first[first.index("--warmup-requests") + 1] == "0"  # the visit warms up itself
    assert first[first.index("--output-file") + 1] == params["output_prefix"] + "-c1-r0.jsonl"
    assert "--apply-chat-template" not in first and "http://127.0.0.1:30000" in first
    templated = params["output_prefix"] + "-dataset.json"
    assert plan["template"] == {"source": params["dataset_path"], "output": templated, "tokenizer": params["tokenizer"]}
    assert first[first.index("--dataset-path") + 1] == templated
    assert [p["label"] for p in res["plan"]] == [r["label"] for r in plan["runs"]]

    assert [(r["repeat"], r["concurrency"]) for r in res["runs"]] == [(0, 1), (0, 4), (1, 1), (1, 4)]
    one = res["runs"][0]
    assert (one["started"], one["finished"], one["argv"]) == ("S2", "E2", first)
    assert one["metrics"]["output_throughput"] == 88.8 and "raw" not in one["metrics"]
    assert (one["metrics"]["accept_length"], one["metrics"]["accept_length_source"]) == (3.0, "metrics")
    assert one["gpu_before"][0]["clocks_sm_mhz"] == 1980 and one["gpu_after_time"] == "T-clocks"
    assert one["server"] == {"max_running_requests": 48, "effective_max_running_requests": 48,
                             "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                             "speculative_attention_mode": "prefill", "version": "0.5.23"}
    assert one["client"] == "sglang.benchmark.serving"
    assert one["provenance"] == {"driver_version": "580.159.04", "nccl_env": {"NCCL_PROTO": "LL"},
                                 "nccl_env_consistent": True, "worker_pids": [11], "unit_pids": [10, 11]}
    # what the visit records of the helper's answer: the summary, not the helper's own bookkeeping
    assert res["worker_env"] == {"pids": [10, 11], "worker_pids": [11], "workers_titled": True,
                                 "pids_with_vars": [10, 11], "consistent": True, "env": {"NCCL_PROTO": "LL"}}
    assert res["started"] <= res["ended"]


def test_a_baseline_has_no_accept_length_and_without_warmup_runs_the_client_warms_up(params, server):
    server({("GET", "/server_info"): (200, json.dumps(dict(INFO, speculative_algorithm=None)))})
    params.update(expect={"max_running_requests": 48, "speculative_algorithm": None}, warmup_runs=0, repeats=1,
                  concurrency=[1], worker_unit="", flush_cache=False)
    plans = []
    out = run(Module(params, {"run": driver(seen=plans)}))
    assert out.failed is False, out.result
    ((only,),) = [plan["runs"] for plan in plans]
    assert only["argv"][only["argv"].index("--warmup-requests") + 1] == "1" and "--flush-cache" not in only["argv"]
    assert plans[0]["flush_timeout"] is None
    (rec,) = out.result["runs"]
    assert (rec["metrics"]["accept_length"], rec["metrics"]["accept_length_source"]) == (None, "none")
    assert out.result["worker_env"] == {"pids": [], "pids_with_vars": [], "consistent": None, "env": {}}
    assert rec["provenance"]["nccl_env"] == {} and rec["provenance"]["unit_pids"] == []


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
def test_a_worker_env_the_helper_cannot_vouch_for_fails_the_visit(params, server, answer, message):
    server({("GET", "/server_info"): (200, json.dumps(INFO))})
    out = run(Module(params, {"worker-env": answer}))
    assert out.failed is True and out.result["msg"].startswith(message)


@pytest.mark.parametrize("info, message", [
    ((503, "loading"), "GET /server_info returned 503: loading"),
    ((200, "<html>"), "/server_info is not JSON: <html>"),
    ((200, json.dumps(dict(INFO, max_running_requests=64))),
     "the server is not serving the arm asked for: server runs with max_running_requests=64, the arm asked for 48"),
])
def test_the_server_must_answer_as_the_arm_asked_before_any_run(params, server, info, message):
    server({("GET", "/server_info"): info})
    module = Module(params, answers())
    out = run(module)
    assert out.failed is True and out.result["msg"] == message and module.calls == []


@pytest.mark.parametrize("kw, message", [
    (dict(rc=1, err="Traceback ...\nMemoryError\n"), "the benchmark client's driver exited 1 without its result: "
                                                     "Traceback ...\nMemoryError"),
    (dict(result={"runs": [{"label": "repeat 0 c=4", "output_tail": "x\nConnectionError: refused\n"}],
                  "error": "repeat 0 c=4: sglang.benchmark.serving exited 1"}),
     "repeat 0 c=4: sglang.benchmark.serving exited 1: x\nConnectionError: refused"),
    (dict(result={"runs": [], "error": "warmup 0 c=1: POST /flush_cache returned 400: busy"}),
     "warmup 0 c=1: POST /flush_cache returned 400: busy"),
    (dict(lines=["{not json"]), "repeat 0 c=1: bench_serving result is not JSON"),
    (dict(lines=[json.dumps(dict(RESULT, output_throughput=-1))]),
     "repeat 0 c=1: bench_serving output_throughput is not a finite number"),
    (dict(gpu=[dict(GPU[0], rc=124, out=""), GPU[1]]),
     "repeat 0 c=1: nvidia-smi clocks query did not answer within its timeout (rc 124)"),
    (dict(gpu=[dict(GPU[0], out="0, [N/A], 3201, 36, 89.37, 0x0, P0\n"), GPU[1]]),
     "repeat 0 c=1: nvidia-smi clocks line has a non-numeric field"),
])
def test_a_driver_failure_or_a_reading_that_cannot_be_trusted_fails_the_visit(params, server, kw, message):
    server({("GET", "/server_info"): (200, json.dumps(INFO))})
    out = run(Module(params, answers(run=driver(**kw))))
    assert out.failed is True and out.result["msg"].startswith(message), out.result["msg"]


def test_the_drivers_result_is_found_before_what_an_exit_hook_printed(params, server):
    server({("GET", "/server_info"): (200, json.dumps(INFO))})

    def noisy(argv):
        rc, out, err = driver()(argv)
        return rc, "a banner\n" + out + '{"exit hook": 1}\n[]\n', err
    out = run(Module(params, answers(run=noisy)))
    assert out.failed is False and len(out.result["runs"]) == 4
    out = run(Module(params, answers(run=(0, '{"no": "runs"}\n', ""))))
    assert out.failed is True and out.result["msg"] == (
        "the benchmark client's driver exited 0 without its result: {\"no\": \"runs\"}")


def test_metrics_that_went_down_fail_the_visit_with_the_runs_label(params, server):
    server({("GET", "/server_info"): (200, json.dumps(INFO))})

    def backwards(argv):
        rc, out, err = driver()(argv)
        result = json.loads(out)
        result["runs"][2]["metrics_after"] = metrics(0, 0)
        return rc, json.dumps(result), err
    out = run(Module(params, answers(run=backwards)))
    assert out.failed is True and out.result["msg"].startswith("repeat 0 c=1: /metrics counters went down")


def test_a_client_that_wrote_no_file_fails_the_visit(params, server):
    server({("GET", "/server_info"): (200, json.dumps(INFO))})
    params.update(warmup_runs=0)

    def no_file(argv):
        rc, out, err = driver()(argv)
        os.unlink(params["output_prefix"] + "-c1-r0.jsonl")
        return rc, out, err
    out = run(Module(params, answers(run=no_file)))
    assert out.failed is True and out.result["msg"].startswith(
        "repeat 0 c=1: the client wrote no %s-c1-r0.jsonl: " % params["output_prefix"])


@pytest.mark.parametrize("kw, message", [
    (dict(output_len=3), "the sharegpt dataset needs an output length of at least 4 tokens, got 3"),
    (dict(dataset_path="/absent.json"), "dataset /absent.json does not exist on the target (no hub downloads)"),
])
def test_a_plan_the_client_would_refuse_fails_before_the_server_is_asked(params, server, kw, message):
    asked = server({})
    params.update(kw)
    out = run(Module(params, answers()))
    assert out.failed is True and out.result["msg"] == message and asked == []


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
    assert br.http("GET", "http://x/server_info", timeout=5) == (200, "\ufffdok")
    assert seen == {"url": "http://x/server_info", "method": "GET", "timeout": 5, "validate_certs": False}
