"""The benchmark's client driver (plugins/module_utils/_bench_driver.py): picking and importing the client, one
process running every run of a visit with no state carried from one run to the next, the /metrics counters through
prometheus_client's parser, the GPU queries, the order of a run's readings and what stops a visit.

The driver runs as the module runs it (`python -` with its source on stdin) where a process boundary matters, and
in-process otherwise."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_client as c
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_driver as d
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_run import driver_source

# SGLang 0.5.23's multiprocess exposition (no _created samples), two label sets of one counter, a gauge beside them.
SGLANG_METRICS = """# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="kimi"} 100.0
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="kimi"} 28.0
# HELP sglang:spec_verify_calls_total Number of speculative decoding verification calls.
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{engine_type="unified",model_name="kimi"} 50.0
# HELP sglang:spec_accept_length Mean acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="kimi",tp_rank="0"} 2.4
"""


def driver(args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-"] + list(args), input=driver_source(), capture_output=True, text=True,
                          env=env, timeout=120, check=False, **kwargs)


# ------------------------------------------------------------------------------------------------ /metrics


def test_counters_are_summed_over_their_label_sets_and_absent_ones_left_out():
    assert d.counter_totals(SGLANG_METRICS, b.ACCEPT_LENGTH_COUNTERS) == {b.GENERATION_TOKENS: 128.0,
                                                                          b.SPEC_VERIFY_CALLS: 50.0}
    # before any speculative request finished SGLang exports no sample of the verify counter
    tokens_only = SGLANG_METRICS[:SGLANG_METRICS.index("# HELP sglang:spec_verify")]
    assert d.counter_totals(tokens_only, b.ACCEPT_LENGTH_COUNTERS) == {b.GENERATION_TOKENS: 128.0}


def test_a_single_process_export_counts_its_total_and_not_its_created_sample():
    text = ("# TYPE sglang:generation_tokens_total counter\n"
            "sglang:generation_tokens_total{model_name=\"m\"} 5.0\n"
            "sglang:generation_tokens_created{model_name=\"m\"} 1.7e9\n")
    assert d.counter_totals(text, b.ACCEPT_LENGTH_COUNTERS) == {b.GENERATION_TOKENS: 5.0}


def test_a_wanted_name_that_is_not_a_counter_is_refused():
    text = "# TYPE sglang:spec_verify_calls_total gauge\nsglang:spec_verify_calls_total 3.0\n"
    with pytest.raises(ValueError, match="sglang:spec_verify_calls_total is a gauge, not a counter"):
        d.counter_totals(text, b.ACCEPT_LENGTH_COUNTERS)


@pytest.mark.parametrize("answer, reading", [
    ((200, SGLANG_METRICS), {"status": 200, "counters": {b.GENERATION_TOKENS: 128.0, b.SPEC_VERIFY_CALLS: 50.0}}),
    ((404, '{"detail":"Not Found"}'), {"status": 404}),
    ((200, "sglang:x{ 1\n"), {"status": 200, "error": "/metrics could not be parsed: ValueError: "}),
    (OSError("connection refused"), {"status": None, "error": "GET /metrics failed: connection refused"}),
])
def test_a_metrics_reading_says_what_it_got(monkeypatch, answer, reading):
    asked = []

    def http(method, url, timeout):
        asked.append((method, url, timeout))
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(d, "http", http)
    got = d.read_metrics("http://s:1", b.ACCEPT_LENGTH_COUNTERS)
    assert asked == [("GET", "http://s:1/metrics", 30)]
    if "error" in reading:
        assert got["status"] == reading["status"] and got["error"].startswith(reading["error"])
    else:
        assert got == reading


def test_http_talks_to_a_local_server_and_returns_an_http_error_as_its_status():
    import http.server
    import socket
    import threading

    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            seen.append((self.command, self.path, self.headers.get("Content-Length")))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.answer(200, b"\xffok")

        def do_POST(self):
            self.answer(400, b"requests running")

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    try:
        assert d.http("GET", base + "/metrics", 5) == (200, "\ufffdok")
        assert d.http("POST", base + "/flush_cache?timeout=60", 5) == (400, "requests running")
        assert seen == [("GET", "/metrics", None), ("POST", "/flush_cache?timeout=60", "0")]
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(OSError):
        d.http("GET", base + "/metrics", 5)  # nothing listens there now
    garbage = socket.socket()
    garbage.bind(("127.0.0.1", 0))
    garbage.listen(1)

    def reply_garbage():
        conn, _addr = garbage.accept()
        conn.recv(4096)
        conn.sendall(b"not http at all\r\n\r\n")
        conn.close()

    threading.Thread(target=reply_garbage, daemon=True).start()
    try:
        with pytest.raises(OSError, match="BadStatusLine"):
            d.http("GET", "http://127.0.0.1:%d/metrics" % garbage.getsockname()[1], 5)
    finally:
        garbage.close()


# ------------------------------------------------------------------------------------------------ GPU queries


def test_gpu_queries_run_with_lc_all_c_and_a_missing_program_is_rc_127():
    code = "import os, sys; print(os.environ['LC_ALL']); sys.stderr.write('e')"
    ok, missing = d.read_gpus([[sys.executable, "-c", code], ["/nonexistent/nvidia-smi"]])
    assert (ok["rc"], ok["out"], ok["err"]) == (0, "C\n", "e") and ok["time"].endswith("Z")
    assert missing["rc"] == 127 and "nvidia-smi" in missing["err"] and missing["out"] == ""


# ------------------------------------------------------------------------------------------------ the client

# A client module that writes what it saw: its argv, and whether a global of an earlier run is still there.
CLIENT = """import json, sys
seen = globals().get("runs_seen", 0)
runs_seen = seen + 1
print("client output on stdout")
with open(sys.argv[sys.argv.index("--output-file") + 1], "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "earlier_runs_seen": seen, "name": __name__}) + "\\n")
if "--exit" in sys.argv:
    sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
if "--raise" in sys.argv:
    raise RuntimeError("boom in the client")
"""


@pytest.fixture
def client_site(tmp_path, fake_sglang, monkeypatch):
    site = fake_sglang(tmp_path / "c", {"sglang.benchmark.serving": CLIENT})
    monkeypatch.syspath_prepend(site)
    yield site
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]


def test_each_run_executes_the_client_afresh_as_main_and_captures_its_output(tmp_path, client_site, capsys):
    out = str(tmp_path / "o.jsonl")
    for argv in (["--output-file", out, "--a"], ["--output-file", out, "--b"]):
        assert d.run_client("sglang.benchmark.serving", argv) == (None, "client output on stdout\n")
    lines = [json.loads(line) for line in open(out)]
    assert [line["argv"] for line in lines] == [["--output-file", out, "--a"], ["--output-file", out, "--b"]]
    assert [line["earlier_runs_seen"] for line in lines] == [0, 0]  # no global of run 1 in run 2
    assert {line["name"] for line in lines} == {"__main__"}
    assert capsys.readouterr().out == ""  # the driver's stdout carries its JSON only


@pytest.mark.parametrize("extra, error", [
    (["--exit", "0"], None),
    (["--exit", "3"], "sglang.benchmark.serving exited 3"),
    (["--raise"], "sglang.benchmark.serving raised RuntimeError: boom in the client"),
])
def test_a_client_that_exits_non_zero_or_raises_is_a_failed_run(tmp_path, client_site, extra, error):
    got, tail = d.run_client("sglang.benchmark.serving", ["--output-file", str(tmp_path / "o.jsonl")] + extra)
    assert got == error
    assert tail.startswith("client output on stdout\n")
    assert ("Traceback" in tail) is (extra == ["--raise"])


# ------------------------------------------------------------------------------------------------ a visit's plan


@pytest.fixture
def scripted(monkeypatch):
    """Replaces the driver's reads and the client with recorders; returns the list of steps taken (its flush answer
    settable)."""

    class Steps(list):
        pass

    steps = Steps()
    flush = {"answer": (200, "ok")}

    def http(method, url, timeout):
        steps.append(("flush", url, timeout))
        return flush["answer"]

    monkeypatch.setattr(d, "http", http)
    monkeypatch.setattr(d, "read_gpus", lambda argvs: steps.append(("gpus", argvs)) or [{"rc": 0}])
    monkeypatch.setattr(d, "read_metrics", lambda base, names: steps.append(("metrics", base, names)) or {"n": 1})
    monkeypatch.setattr(d, "run_client", lambda client, argv: steps.append(("client", client, argv)) or (
        "exited 2" if "--fail" in argv else None, "tail of " + argv[0]))
    steps.flush = flush
    return steps


def plan(tmp_path, runs, flush_timeout=5.0):
    return {"client": "sglang.benchmark.serving", "base_url": "http://s:1", "flush_timeout": flush_timeout,
            "gpu_argvs": [["smi"]], "counters": list(b.ACCEPT_LENGTH_COUNTERS),
            "runs": [{"label": label, "argv": [label] + extra, "output_file": str(tmp_path / (label + ".jsonl")),
                      "measured": measured} for label, measured, extra in runs]}


def test_a_measured_run_is_read_around_tightly_and_a_warmup_run_is_not_read(tmp_path, scripted):
    (tmp_path / "m.jsonl").write_text("stale line of an earlier run\n")
    result = d.run_plan(plan(tmp_path, [("w", False, []), ("m", True, [])]))
    assert result["error"] is None
    names = list(b.ACCEPT_LENGTH_COUNTERS)
    assert [s[:2] for s in scripted] == [
        ("flush", "http://s:1/flush_cache?timeout=5.0"), ("client", "sglang.benchmark.serving"),
        ("gpus", [["smi"]]), ("flush", "http://s:1/flush_cache?timeout=5.0"), ("metrics", "http://s:1"),
        ("client", "sglang.benchmark.serving"), ("metrics", "http://s:1"), ("gpus", [["smi"]])]
    assert scripted[0][2] == 35.0 and scripted[4][2] == names
    warm, measured = result["runs"]
    assert set(warm) == {"label", "started", "ended", "output_tail"} and warm["output_tail"] == "tail of w"
    assert measured["gpu_before"] == measured["gpu_after"] == [{"rc": 0}]
    assert measured["metrics_before"] == measured["metrics_after"] == {"n": 1}
    assert measured["started"] <= measured["ended"]
    assert not (tmp_path / "m.jsonl").exists()  # the client appends: a stale line is removed before the run


def test_without_a_flush_timeout_nothing_is_flushed(tmp_path, scripted):
    assert d.run_plan(plan(tmp_path, [("w", False, [])], flush_timeout=None))["error"] is None
    assert [s[0] for s in scripted] == ["client"]


def test_a_refused_flush_stops_the_visit_before_the_client_runs(tmp_path, scripted):
    scripted.flush["answer"] = (400, " requests are running \n")
    result = d.run_plan(plan(tmp_path, [("m", True, []), ("n", True, [])]))
    assert result["error"] == "m: POST /flush_cache returned 400: requests are running"
    assert [s[0] for s in scripted] == ["gpus", "flush"] and len(result["runs"]) == 1


def test_a_failed_run_stops_the_visit_and_keeps_its_output(tmp_path, scripted):
    result = d.run_plan(plan(tmp_path, [("m", True, ["--fail"]), ("n", True, [])]))
    assert result["error"] == "m: exited 2"
    assert [r["label"] for r in result["runs"]] == ["m"] and result["runs"][0]["output_tail"] == "tail of m"
    assert [s[0] for s in scripted] == ["gpus", "flush", "metrics", "client"]


def test_main_prints_the_plans_result_as_one_json_line_and_refuses_other_words(tmp_path, scripted, capsys):
    assert d.main(["run", json.dumps(plan(tmp_path, [("w", False, [])]))]) == 0
    assert json.loads(capsys.readouterr().out)["error"] is None
    assert d.main(["run"]) == 64 and d.main([]) == 64
    assert capsys.readouterr().err.startswith("usage: python - pick [--import] MODULE... | python - run PLAN_JSON")


def test_a_whole_visit_runs_in_one_process_fed_on_stdin(tmp_path, fake_sglang):
    site = fake_sglang(tmp_path / "p", {"sglang.benchmark.serving": CLIENT})
    runs = c.visit_runs(1, 2, [1, 2], str(tmp_path / "v0"))
    body = plan(tmp_path, [], flush_timeout=None)
    body.update(gpu_argvs=[["true"]], runs=[{"label": r["label"], "output_file": r["output_file"],
                                             "measured": r["measured"], "argv": ["--output-file", r["output_file"]]}
                                            for r in runs])
    r = driver(["run", json.dumps(body)], env=dict(os.environ, PYTHONPATH=site))
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["error"] is None and len(result["runs"]) == 6
    assert [run["label"] for run in result["runs"]] == ["warmup 0 c=1", "warmup 0 c=2", "repeat 0 c=1",
                                                        "repeat 0 c=2", "repeat 1 c=1", "repeat 1 c=2"]
    for run in runs:
        (line,) = [json.loads(x) for x in open(run["output_file"])]
        assert line["earlier_runs_seen"] == 0
    assert result["runs"][-1]["metrics_before"]["status"] is None  # nothing listens at http://s:1


# ------------------------------------------------------------------------------------------------ pick


def pick(site, import_client=False, modules=c.CLIENT_MODULES, env=None):
    return driver(c.pick_args(modules, import_client), env=dict(env or os.environ, PYTHONPATH=site))


def test_pick_client_prefers_benchmark_serving_and_falls_back_without_importing(tmp_path, fake_sglang):
    boom = "raise RuntimeError('imported')\n"  # finding the client must not import sglang (torch) or the client
    both = fake_sglang(tmp_path / "both", {"sglang.benchmark.serving": boom, "sglang.bench_serving": boom}, boom)
    old = fake_sglang(tmp_path / "old", {"sglang.bench_serving": boom}, boom)
    none = fake_sglang(tmp_path / "none", {}, boom)
    r = pick(both)
    assert (r.returncode, r.stdout) == (0, "sglang.benchmark.serving\n")  # found, not imported
    assert pick(old).stdout == "sglang.bench_serving\n"
    r = pick(none)
    assert r.returncode == 1
    assert "no benchmark client (sglang.benchmark.serving or sglang.bench_serving) in " in r.stderr
    r = driver(["pick"], env=dict(os.environ, PYTHONPATH=str(tmp_path / "nothing")))
    assert r.returncode == 1 and r.stderr.strip() == "sglang is not installed in " + sys.prefix


# A client whose import does what transformers / datasets / huggingface_hub do at import time: read their offline
# switches (true values as huggingface_hub's constants read them) and go for the network when one is off.
HUB_CLIENT = (
    "import os\n"
    "for var in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_DATASETS_OFFLINE', 'HF_HUB_DISABLE_TELEMETRY'):\n"
    "    if os.environ.get(var, '').upper() not in ('1', 'ON', 'YES', 'TRUE'):\n"
    "        raise ConnectionError('%s is off: would reach huggingface.co' % var)\n"
)


def test_offline_env_keeps_the_client_import_off_the_hub(tmp_path, fake_sglang):
    # the module runs the driver with environ_update=OFFLINE_ENV on top of the target's environment
    site = fake_sglang(tmp_path / "hub", {"sglang.benchmark.serving": HUB_CLIENT})
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    r = pick(site, import_client=True, env=dict(bare, **c.OFFLINE_ENV))
    assert (r.returncode, r.stdout) == (0, "sglang.benchmark.serving\n"), r.stderr
    r = pick(site, import_client=True, env=bare)  # the same import without it: the hub would be contacted
    assert r.returncode == 1 and "ConnectionError: HF_HUB_OFFLINE is off: would reach huggingface.co" in r.stderr


def test_pick_client_with_import_reports_the_import_error_and_keeps_stdout_clean(tmp_path, fake_sglang):
    noisy = "print('banner on stdout')\nimport torchvision_missing_for_this_test\n"
    r = pick(fake_sglang(tmp_path / "bad", {"sglang.benchmark.serving": noisy}), import_client=True)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("sglang.benchmark.serving does not import in %s: ModuleNotFoundError: " % sys.prefix)
    assert last.endswith("(install what it needs into that venv)")
    assert "banner on stdout" in r.stderr and r.stdout == ""
    r = pick(fake_sglang(tmp_path / "good", {"sglang.benchmark.serving": "print('banner on stdout')\n"}),
             import_client=True)
    assert (r.returncode, r.stdout) == (0, "sglang.benchmark.serving\n")
    r = pick(fake_sglang(tmp_path / "explicit", {"sglang.bench_serving": ""}), import_client=True,
             modules=("sglang.benchmark.serving",))
    assert r.returncode == 1 and "no benchmark client (sglang.benchmark.serving) in " in r.stderr


def test_pick_with_import_needs_prometheus_clients_parser(tmp_path, fake_sglang):
    site = fake_sglang(tmp_path / "noprom", {"sglang.benchmark.serving": ""})
    shadow = tmp_path / "noprom" / "site" / "prometheus_client"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('No module named prometheus_client (test)')\n")
    r = pick(site, import_client=True)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == (
        "prometheus_client.parser does not import in %s: ImportError: No module named prometheus_client (test) "
        "(SGLang depends on it; the benchmark parses /metrics with it)" % sys.prefix)
    assert pick(site).returncode == 0  # found without importing anything


class ChatTokenizer:
    """A tokenizer's chat-template surface: ChatML, with or without a BOS its encoding adds."""

    def __init__(self, bos, adds_bos):
        self.bos_token, self.bos_token_id, self.adds_bos = bos, 1, adds_bos

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and not tokenize
        return "".join("%s%s\n%s<|im_end|>\n" % (self.bos_token, m["role"], m["content"]) for m in messages) + \
            self.bos_token + "assistant\n"

    def encode(self, text):
        return ([self.bos_token_id] if self.adds_bos else []) + [7] * len(text)


def test_a_chatml_prompt_keeps_every_turn_marker_when_the_bos_is_one():
    # SmolLM2: BOS <|im_start|>, not added by its encoding; SGLang's client would delete all three markers
    got = d.chat_prompt(ChatTokenizer("<|im_start|>", adds_bos=False), "Hi")
    assert got == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_a_leading_bos_the_encoding_adds_again_is_written_once():
    got = d.chat_prompt(ChatTokenizer("<s>", adds_bos=True), "Hi")
    assert got == "user\nHi<|im_end|>\n<s>assistant\n"


def test_the_dataset_is_written_again_with_first_turns_templated_and_one_turn_conversations_dropped(tmp_path):
    convs = [{"id": "a", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Yo"},
                                           {"from": "human", "value": "more"}]},
             {"id": "b", "conversations": [{"from": "human", "value": "alone"}]}]
    got = d.templated(convs, ChatTokenizer("<|im_start|>", adds_bos=False))
    assert got == [{"id": "a", "conversations": [
        {"from": "human", "value": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
        {"from": "gpt", "value": "Yo"}]}]


def test_a_template_that_fails_stops_the_visit_before_any_run(tmp_path, scripted):
    p = plan(tmp_path, [("m", True, [])])
    p["template"] = {"source": str(tmp_path / "absent.json"), "output": str(tmp_path / "t.json"),
                     "tokenizer": str(tmp_path)}
    result = d.run_plan(p)
    assert result["error"].startswith("the chat template could not be applied to %s: " % (tmp_path / "absent.json"))
    assert scripted == [] and result["runs"] == []
