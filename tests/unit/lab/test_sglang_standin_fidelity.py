"""The lab's SIMULATED SGLang server held to what a REAL SGLang 0.5.23 server showed on an H200
(tests/fixtures/sglang-0.5.23-h200, captured by realgpu/sglang_fidelity.py; docs/benchmarks.md, 2026-12-03).

The stand-in runs here (loopback, the real run's argv on a free port, SIMULATED GPU files in a temporary directory)
and is read the way the capture read the real server: the warm-up's status changes, the process titles and tree,
what /proc/PID/environ shows of the workers (with and without SPT_NOENV), the JSON fields the product and SGLang's
bench client read from /server_info, /get_model_info, /v1/loads, /v1/models and /generate, /flush_cache, /metrics,
and a SIGTERM to the main process. `differences(real, seen)` lists every mismatch; the last test changes recorded
fields and checks that each change is caught. What the stand-in does differently on purpose is in KNOWN, with the
reason (docs/lab.md lists the same). About 2 s.
"""
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.gpuserve.sglang.tests.support.net import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "sglang-0.5.23-h200", "capture.json")
with open(FIXTURE) as _f:
    REAL = json.load(_f)

# /server_info fields the collection reads (plugins/module_utils/_bench_client.py, _bench_run.py, the multi-node
# checks) or SGLang's bench client reads; compared by value (paths and the port mapped to the stand-in's).
SERVER_INFO = ["version", "status", "max_running_requests", "speculative_algorithm", "speculative_num_steps",
               "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_attention_mode", "tp_size",
               "dp_size", "nnodes", "node_rank", "dist_init_addr", "dist_timeout", "host", "port", "model_path",
               "launch_command"]
# internal_states[0]: by value, and only by type (float) for the throughput
STATE_VALUES = ["effective_max_running_requests_per_dp", "world_size"]
# /generate meta_info fields SGLang's bench client and the lifecycle read
META = ["id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency",
        "spec_accept_length", "spec_verify_ct"]
# SGLang's watchdog looks at the SIGTERM flag every 5 s; the stand-in's here every WATCHDOG_S (GPUSIM_WATCHDOG_S)
WATCHDOG_S = 0.3
REAL_WATCHDOG_S = 5.0
# What the stand-in does not copy, and why (docs/lab.md, "Fidelity to a real SGLang 0.5.23 server")
KNOWN = {
    "model_info.embedding": "the embedding-model descriptor; the stand-in serves no embedding model and nothing "
                            "in the collection reads it",
    "main.gpu_files": "the real main process holds /dev/nvidia* with no memory of its own; the lab's nvidia-smi would "
                      "count any holder as a user",
}


def http(port, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, res.read().decode(), res.headers.get("content-type")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("content-type")


def as_json(text):
    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return text


def read(pid, name):
    with open("/proc/%d/%s" % (pid, name), "rb") as f:
        return f.read()


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = read(int(d), "stat").decode()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return sorted(out)


def describe(pid, main):
    cmd = read(pid, "cmdline")
    argv = [a.decode() for a in cmd.split(b"\0")[:-1]]
    env = dict(item.split(b"=", 1) for item in read(pid, "environ").split(b"\0") if b"=" in item)
    text = " ".join(argv)
    role = (argv[0] if argv and argv[0].startswith("sglang::") else "resource_tracker"
            if "multiprocessing.resource_tracker" in text else "main" if pid == main else text)
    return {"pid": pid, "role": role, "comm": read(pid, "comm").decode().strip(), "argv": argv,
            "env": {k.decode(): v.decode() for k, v in env.items()}}


def roles(processes, main_pid):
    """The real capture's processes in the same terms as describe(): role, comm, argv, env."""
    out = []
    for p in processes:
        text = " ".join(p["argv"])
        role = (p["argv"][0] if p["argv"] and p["argv"][0].startswith("sglang::") else "resource_tracker"
                if "multiprocessing.resource_tracker" in text else "main" if p["pid"] == main_pid else text)
        out.append(dict(p, role=role))
    return out


def start(tmp_path, env_extra, port):
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_bytes(b"")
    model = tmp_path / "target"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                   "max_position_embeddings": 2048}))
    mapping = {REAL["argv"][REAL["argv"].index("--model-path") + 1]: str(model),
               REAL["argv"][REAL["argv"].index("--speculative-draft-model-path") + 1]: str(tmp_path / "draft"),
               "30000": str(port)}
    argv = [mapping.get(a, a) for a in REAL["argv"]]
    env = {k: v for k, v in os.environ.items() if k != "SPT_NOENV"}
    env.update(GPUSIM_DEV_DIR=str(dev), GPUSIM_WARMUP_S="0.6", GPUSIM_TOKENS_PER_S="400", NCCL_ALGO="Ring",
               GPUSIM_WATCHDOG_S=str(WATCHDOG_S), **env_extra)
    proc = subprocess.Popen([sys.executable, STANDIN] + argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    return proc, mapping


def warm_up(proc, port):
    """Every status change, in order, as realgpu/sglang_fidelity.py records them (no times)."""
    trace, last = [], {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the stand-in exited"
        probes = {}
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                probes["port"] = True
        except OSError:
            probes["port"] = False
        if probes["port"]:
            for path in ("/health", "/health_generate", "/server_info", "/get_model_info"):
                status, text, _ct = http(port, "GET", path)
                probes[path] = status
                if path == "/health" and status != 200:
                    probes["/health body"] = as_json(text)
        for k, v in probes.items():
            if last.get(k, "unset") != v:
                trace.append({"what": k, "value": v})
                last[k] = v
        if probes.get("/health_generate") == 200:
            return trace
        time.sleep(0.05)
    raise AssertionError("the stand-in never became ready: %s" % trace)


def observe(proc, port):
    """What realgpu/sglang_fidelity.py reads of a ready server, from the stand-in."""
    seen = {"endpoints": {}}
    ep = seen["endpoints"]
    kids = []
    deadline = time.monotonic() + 10
    while len(kids) < 3 and time.monotonic() < deadline:  # resource tracker, scheduler, detokenizer
        kids = children(proc.pid)
        time.sleep(0.05)
    seen["processes"] = [describe(p, proc.pid) for p in [proc.pid] + kids]
    seen["main_pid"] = proc.pid
    for path in ("/health", "/server_info", "/get_model_info", "/model_info", "/v1/models", "/v1/loads", "/metrics",
                 "/flush_cache"):
        status, text, ctype = http(port, "GET", path)
        ep["GET " + path] = {"status": status, "body": as_json(text), "content_type": ctype}
    gen = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
    status, text, _ct = http(port, "POST", "/generate", gen)
    ep["POST /generate"] = {"status": status, "body": as_json(text)}
    status, text, _ct = http(port, "GET", "/server_info")
    ep["GET /server_info after generate, before the flush"] = {"status": status, "body": as_json(text)}
    status, text, ctype = http(port, "POST", "/generate", dict(gen, stream=True))
    ep["POST /generate stream"] = {"status": status, "content_type": ctype,
                                   "lines": [line for line in text.splitlines() if line]}
    status, text, _ct = http(port, "POST", "/flush_cache", {})
    ep["POST /flush_cache"] = {"status": status, "body": text}
    status, text, _ct = http(port, "GET", "/server_info")
    ep["GET /server_info after generate"] = {"status": status, "body": as_json(text)}
    signalled = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    seen["sigterm_main"] = {"main_status": proc.wait(20), "main_exit_s": round(time.monotonic() - signalled, 3)}
    deadline = time.monotonic() + 10
    while any(os.path.exists("/proc/%d" % p) and b"Z" not in read(p, "stat").rsplit(b")", 1)[1][:3]
              for p in kids if os.path.exists("/proc/%d/stat" % p)) and time.monotonic() < deadline:
        time.sleep(0.02)
    seen["sigterm_main"]["children_left"] = [p for p in kids if os.path.exists("/proc/%d/stat" % p)
                                             and b"Z" not in read(p, "stat").rsplit(b")", 1)[1][:3]]
    return seen


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    """The stand-in without SPT_NOENV (as the capture ran the real server), then its workers with SPT_NOENV=1."""
    tmp = tmp_path_factory.mktemp("fidelity")
    port = free_port()
    proc, mapping = start(tmp, {}, port)
    try:
        trace = warm_up(proc, port)
        out = observe(proc, port)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    out.update(trace=trace, mapping=mapping, argv_port=port)
    port = free_port()
    proc, _m = start(tmp, {"SPT_NOENV": "1"}, port)
    try:
        warm_up(proc, port)
        kids = children(proc.pid)
        out["with_spt_noenv"] = [describe(p, proc.pid) for p in kids]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    return out


def mapped(value, mapping):
    if isinstance(value, str):
        for old, new in mapping.items():
            value = value.replace(old, new)
    return value


def transitions(trace):
    """{probe: its statuses in the order seen} (times and interleaving differ between any two runs)."""
    out = {}
    for t in trace:
        out.setdefault(t["what"], [])
        if not out[t["what"]] or out[t["what"]][-1] != t["value"]:
            out[t["what"]].append(t["value"])
    return out


def differences(real, seen):
    """Every way the stand-in differs from the real capture (empty: faithful where it is held to it)."""
    probs = []
    m = seen["mapping"]
    # warm-up: the port opens, /health and /health_generate 503 (no body) then 200, info endpoints 200 throughout
    if transitions(real["trace"]) != transitions(seen["trace"]):
        probs.append("warm-up: real %s, stand-in %s" % (transitions(real["trace"]), transitions(seen["trace"])))
    # processes: roles, titles (cmdline = title + NULs, comm = first 15 characters), the main as every parent
    r_procs, s_procs = roles(real["processes"], real["main_pid"]), seen["processes"]
    if sorted(p["role"] for p in r_procs) != sorted(p["role"] for p in s_procs):
        probs.append("processes: real %s, stand-in %s" % (sorted(p["role"] for p in r_procs),
                                                          sorted(p["role"] for p in s_procs)))
    for r in r_procs:
        s = next((p for p in s_procs if p["role"] == r["role"]), None)
        if s is None or not r["role"].startswith("sglang::"):
            continue
        if s["comm"] != r["comm"]:
            probs.append("%s comm: real %r, stand-in %r" % (r["role"], r["comm"], s["comm"]))
        if [a for a in s["argv"] if a] != [a for a in r["argv"] if a]:
            probs.append("%s cmdline: real %r, stand-in %r" % (r["role"], r["argv"][:2], s["argv"][:2]))
    # /proc/PID/environ of the retitled workers: the inherited variables are gone without SPT_NOENV, kept with it
    main_env = next(p for p in r_procs if p["role"] == "main")["env"]
    for r in r_procs:
        if r["role"].startswith("sglang::"):
            kept = sorted(k for k in ("NCCL_ALGO", "NCCL_PROTO") if k in main_env and k in r["env"])
            s = next((p for p in s_procs if p["role"] == r["role"]), {"env": {}})
            s_kept = sorted(k for k in ("NCCL_ALGO",) if k in s["env"])
            if kept or s_kept:
                probs.append("%s environ without SPT_NOENV: real kept %s, stand-in kept %s" % (r["role"], kept, s_kept))
    for s in seen.get("with_spt_noenv", []):
        if s["role"].startswith("sglang::") and s["env"].get("NCCL_ALGO") != "Ring":
            probs.append("%s environ with SPT_NOENV=1: lost NCCL_ALGO" % s["role"])
    rep, sep = real["endpoints"], seen["endpoints"]
    # /server_info
    r_info, s_info = rep["GET /server_info"]["body"], sep["GET /server_info"]["body"]
    for key in SERVER_INFO:
        want = r_info.get(key, "<absent>")
        want = int(m["30000"]) if key == "port" else mapped(want, m)
        if s_info.get(key, "<absent>") != want:
            probs.append("/server_info %s: real %r, stand-in %r" % (key, want, s_info.get(key, "<absent>")))
    if len(s_info.get("internal_states") or []) != len(r_info["internal_states"]):
        probs.append("/server_info internal_states: %d entries, real %d"
                     % (len(s_info.get("internal_states") or []), len(r_info["internal_states"])))
    r_st, s_st = r_info["internal_states"][0], (s_info.get("internal_states") or [{}])[0]
    for key in STATE_VALUES:
        if s_st.get(key, "<absent>") != r_st.get(key, "<absent>"):
            probs.append("internal_states[0].%s: real %r, stand-in %r" % (key, r_st.get(key, "<absent>"),
                                                                          s_st.get(key, "<absent>")))
    for key in ("last_gen_throughput", "memory_usage"):
        if type(s_st.get(key)) is not type(r_st.get(key)):
            probs.append("internal_states[0].%s: real a %s, stand-in %r" % (key, type(r_st.get(key)).__name__,
                                                                            s_st.get(key)))
    for when in ("GET /server_info", "GET /server_info after generate"):
        r_has = "avg_spec_accept_length" in rep[when]["body"]["internal_states"][0]
        s_has = "avg_spec_accept_length" in sep[when]["body"]["internal_states"][0]
        if r_has != s_has:
            probs.append("%s: avg_spec_accept_length %s, stand-in %s" % (when, "present" if r_has else "absent",
                                                                        "present" if s_has else "absent"))
    acc = sep["GET /server_info after generate, before the flush"]["body"]["internal_states"][0].get(
        "avg_spec_accept_length")
    if not isinstance(acc, float) or acc <= 0:
        probs.append("avg_spec_accept_length after a speculative generation: %r" % (acc,))
    # /get_model_info and /model_info: every real key (KNOWN aside), by value where the stand-in can know it
    for path in ("GET /get_model_info", "GET /model_info"):
        r_mi, s_mi = rep[path]["body"], sep[path]["body"]
        for key, value in r_mi.items():
            if "model_info." + key in KNOWN:
                continue
            if key not in s_mi:
                probs.append("%s: no %s" % (path, key))
            elif s_mi[key] != mapped(value, m):
                probs.append("%s %s: real %r, stand-in %r" % (path, key, mapped(value, m), s_mi[key]))
    # /v1/loads: the snapshot's fields (what SMG's load monitor reads), idle values
    r_lo, s_lo = rep["GET /v1/loads"]["body"], sep["GET /v1/loads"]["body"]
    r_l0, s_l0 = r_lo["loads"][0], s_lo["loads"][0]
    for where, r_part, s_part in (("", r_lo, s_lo), ("loads[0].", r_l0, s_l0),
                                  ("loads[0].memory.", r_l0["memory"], s_l0.get("memory")),
                                  ("loads[0].queues.", r_l0["queues"], s_l0.get("queues")),
                                  ("loads[0].disaggregation.", r_l0["disaggregation"], s_l0.get("disaggregation"))):
        r_keys, s_keys = set(r_part), set(s_part or {})
        if r_keys - s_keys:
            probs.append("/v1/loads %s: no %s" % (where, sorted(r_keys - s_keys)))
    for key in ("dp_rank", "num_running_reqs", "max_running_requests"):
        if s_lo["loads"][0].get(key) != r_lo["loads"][0][key]:
            probs.append("/v1/loads loads[0].%s: real %r, stand-in %r" % (key, r_lo["loads"][0][key],
                                                                           s_lo["loads"][0].get(key)))
    # /v1/models
    r_mo, s_mo = rep["GET /v1/models"]["body"]["data"][0], sep["GET /v1/models"]["body"]["data"][0]
    if set(r_mo) - set(s_mo):
        probs.append("/v1/models data[0]: no %s" % sorted(set(r_mo) - set(s_mo)))
    for key in ("id", "object", "owned_by", "root", "parent", "max_model_len"):
        if s_mo.get(key) != mapped(r_mo[key], m):
            probs.append("/v1/models %s: real %r, stand-in %r" % (key, mapped(r_mo[key], m), s_mo.get(key)))
    # /generate: the meta_info fields read, the finish reason's shape, the SSE stream's shape
    r_meta, s_meta = rep["POST /generate"]["body"]["meta_info"], sep["POST /generate"]["body"]["meta_info"]
    for key in META:
        if key in r_meta and key not in s_meta:
            probs.append("/generate meta_info: no %s" % key)
        elif key not in r_meta:
            probs.append("/generate meta_info: the real server has no %s (META is out of date)" % key)
    if s_meta.get("finish_reason") != r_meta["finish_reason"] or s_meta.get("completion_tokens") != r_meta[
            "completion_tokens"]:
        probs.append("/generate: real finish %r / %r tokens, stand-in %r / %r" % (
            r_meta["finish_reason"], r_meta["completion_tokens"], s_meta.get("finish_reason"),
            s_meta.get("completion_tokens")))
    r_sse, s_sse = rep["POST /generate stream"], sep["POST /generate stream"]
    if (s_sse["content_type"] or "").split(";")[0] != r_sse["content_type"].split(";")[0]:
        probs.append("SSE content type: real %r, stand-in %r" % (r_sse["content_type"], s_sse["content_type"]))
    # one event for the prefill's token, then one per verify step (several tokens when drafts are accepted), [DONE]
    shape = []
    for sse in (r_sse, s_sse):
        last = json.loads(sse["lines"][-2][6:])["meta_info"] if len(sse["lines"]) > 1 else {}
        shape.append((sse["lines"][-1], len(sse["lines"]) - 1 - last.get("spec_verify_ct", -9)))
    if shape[0] != shape[1]:
        probs.append("SSE (last line, events minus verify steps): real %r, stand-in %r" % tuple(shape))
    texts = [json.loads(line[6:])["text"] for line in s_sse["lines"][:-1]]
    if any(not b.startswith(a) for a, b in zip(texts, texts[1:])):
        probs.append("SSE: the stand-in's text is not cumulative")
    # /flush_cache (GET and POST) and /metrics
    for path in ("GET /flush_cache", "POST /flush_cache", "GET /metrics", "GET /health"):
        rb = rep[path].get("body")
        sb = sep[path].get("body")
        if (rep[path]["status"], rb) != (sep[path]["status"], sb):
            probs.append("%s: real %r %r, stand-in %r %r" % (path, rep[path]["status"], rb, sep[path]["status"], sb))
    # SIGTERM to the main process: it exits 0 at the watchdog's next look (within one period, as the real one's
    # 5.27 s against its 5 s period), and takes its children along
    real_exit = real["sigterm_main"]["exit_after_s"][str(real["main_pid"])]
    if seen["sigterm_main"]["main_status"] != real["sigterm_main"]["main_status"] or seen["sigterm_main"][
            "children_left"] or real["sigterm_main"]["left_after_60s"] or not (
            seen["sigterm_main"]["main_exit_s"] <= WATCHDOG_S + 1.0) or not real_exit <= REAL_WATCHDOG_S + 1.0:
        probs.append("SIGTERM to main: real %r, stand-in %r" % (real["sigterm_main"], seen["sigterm_main"]))
    return probs


def test_the_standin_shows_what_the_real_server_showed(seen):
    assert differences(REAL, seen) == []


def test_the_fixture_is_the_real_capture():
    # the run it records: EAGLE-3 on, the role's argv, ready, a generation, a clean SIGTERM
    assert REAL["ready"] and REAL["endpoints"]["POST /generate"]["status"] == 200
    assert REAL["endpoints"]["GET /server_info"]["body"]["version"] == "0.5.23"
    assert "--speculative-algorithm" in REAL["argv"] and "--attention-backend" in REAL["argv"]
    assert {p["comm"] for p in REAL["processes"]} >= {"sglang::schedul", "sglang::detoken"}
    assert set(KNOWN) == {"model_info.embedding", "main.gpu_files"}


def change(path, value=None, drop=False):
    def apply(real):
        node = real
        for key in path[:-1]:
            node = node[key]
        if drop:
            node.pop(path[-1])
        else:
            node[path[-1]] = value
        return real
    return apply


@pytest.mark.parametrize("name, mutate, word", [
    ("effective limit", change(["endpoints", "GET /server_info", "body", "internal_states", 0,
                                "effective_max_running_requests_per_dp"], 48), "effective_max_running_requests_per_dp"),
    ("version", change(["endpoints", "GET /server_info", "body", "version"], "0.5.22"), "version"),
    ("accept length at start", change(["endpoints", "GET /server_info", "body", "internal_states", 0,
                                       "avg_spec_accept_length"], 0.0), "avg_spec_accept_length"),
    ("a model_info field", change(["endpoints", "GET /get_model_info", "body", "tokenizer_kind"], "fast"),
     "tokenizer_kind"),
    ("a loads field", change(["endpoints", "GET /v1/loads", "body", "loads", 0, "num_paused_reqs"], 0),
     "num_paused_reqs"),
    ("scheduler title", lambda r: [p.__setitem__("argv", ["sglang::scheduler_TP0"] + p["argv"][1:])
                                   for p in r["processes"] if p["comm"] == "sglang::schedul"] and r, "processes"),
    ("scheduler comm", lambda r: [p.__setitem__("comm", "sglang::sched")
                                  for p in r["processes"] if p["argv"][0] == "sglang::scheduler"] and r, "comm"),
    ("environ kept", lambda r: [p["env"].__setitem__("NCCL_ALGO", "Ring")
                                for p in r["processes"] if p["comm"] == "sglang::schedul"] and r, "environ"),
    ("health during warm-up", lambda r: [t.__setitem__("value", 200) for t in r["trace"]
                                         if t["what"] == "/health" and t["value"] == 503] and r, "warm-up"),
    ("SSE end", change(["endpoints", "POST /generate stream", "lines", -1], "data: {}"), "SSE"),
    ("flush text", change(["endpoints", "POST /flush_cache", "body"], "ok"), "/flush_cache"),
])
def test_a_changed_recorded_field_is_caught(seen, name, mutate, word):
    problems = differences(mutate(copy.deepcopy(REAL)), seen)
    assert problems and any(word in p for p in problems), (name, problems)
