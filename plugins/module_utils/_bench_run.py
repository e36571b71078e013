# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Body of the sglang_bench_run module: private to this collection.

One call per visit: checks the server, reads the workers' environment, then hands every run of the visit (warmup and
measured, each concurrency) to one client driver process (_bench_driver) and turns its raw records into the runs the
verdict reads.
"""

from __future__ import annotations

import datetime
import json
import os

from ansible.module_utils.urls import open_url

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_driver
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import (
    ACCEPT_LENGTH_COUNTERS,
    BenchError,
    accept_length,
    parse_bench_jsonl,
)
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_client import (
    CLIENT_MODULES,
    OFFLINE_ENV,
    check_server,
    client_argv,
    client_warmup_requests,
    effective_server_limits,
    pick_args,
    visit_runs,
)
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_gpu_state import gpu_state_argvs, parse_gpu_state
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import SmiError
from ansible_collections.gpuserve.sglang.plugins.module_utils._python_script import source
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result, Runner

# What the run records of the helper's worker-env answer (the helper adds ok, unit, control_group, error).
WORKER_ENV_KEYS = ("pids", "worker_pids", "workers_titled", "pids_with_vars", "consistent", "env", "per_pid")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def http(method, url, timeout=30):
    """(status, body text); HTTP errors come back as a status, connection errors raise."""
    try:
        resp = open_url(url, method=method, timeout=timeout, validate_certs=False)
        return resp.getcode(), resp.read().decode("utf-8", "replace")
    except Exception as exc:  # urllib's HTTPError carries the status and body
        code = getattr(exc, "code", None)
        if code is None:
            raise
        body = exc.read().decode("utf-8", "replace") if hasattr(exc, "read") else str(exc)
        return code, body


def read_worker_env(module, helper, unit, prefixes):
    """The unit's NCCL workers' environment, read by the sglang_server helper (gpuserve-sglang worker-env)."""
    argv = [helper, "worker-env", "--unit", unit] + ["--prefix=" + prefix for prefix in prefixes]
    rc, out, err = module.run_command(argv)
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        module.fail_json(msg="%s worker-env gave rc %d and no JSON: %s" % (helper, rc, (err or out).strip()[-500:]))
    if rc != 0 or not answer.get("ok"):
        module.fail_json(msg=answer.get("error") or "%s worker-env failed (rc %d): %s" % (helper, rc, out.strip()))
    return dict((key, answer[key]) for key in WORKER_ENV_KEYS if key in answer)


def driver_source():
    """_bench_driver's source, read through its module's loader (from a checkout, or from this module's payload)."""
    return source(_bench_driver)


def run_driver(module, python, args, **kwargs):
    """_bench_driver run by python with args, its source on stdin (`python -`): (rc, stdout, stderr)."""
    return module.run_command([python, "-"] + list(args), data=driver_source(), environ_update=OFFLINE_ENV, **kwargs)


def driver_answer(out):
    """The driver's result, its last stdout line that is a JSON object with runs (whatever an exit hook of the
    client's libraries may print after it); None when there is none."""
    for line in reversed(out.splitlines()):
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        if isinstance(answer, dict) and "runs" in answer:
            return answer
    return None


def pick_client(module, result):
    p = module.params
    client = p["client_module"]
    if client == "auto" or p["import_client"]:
        modules = CLIENT_MODULES if client == "auto" else (client,)
        rc, out, err = run_driver(module, p["python"], pick_args(modules, p["import_client"]))
        if rc != 0:
            lines = (err or out).strip().splitlines() or ["exit status %d, no output" % rc]
            module.fail_json(msg="SGLang's benchmark client: %s" % lines[-1], **result)
        client = out.strip().splitlines()[-1]
    return client


def server_state(module, result):
    """/server_info checked against the arm asked for: the summary the runs record."""
    p = module.params
    status, body = http("GET", p["base_url"].rstrip("/") + "/server_info")
    if status != 200:
        module.fail_json(msg="GET /server_info returned %s: %s" % (status, body[:500]), **result)
    try:
        info = json.loads(body)
    except ValueError:
        module.fail_json(msg="/server_info is not JSON: %s" % body[:500], **result)
    configured, effective = effective_server_limits(info)
    result["server"] = {"max_running_requests": configured, "effective_max_running_requests": effective,
                        "speculative_algorithm": info.get("speculative_algorithm"),
                        "speculative_num_steps": info.get("speculative_num_steps"),
                        "speculative_attention_mode": info.get("speculative_attention_mode"),
                        "version": info.get("version")}
    problems = check_server(info, p["expect"])
    if problems:
        module.fail_json(msg="the server is not serving the arm asked for: " + "; ".join(problems), **result)


def measured_record(module, planned, done, gpu_argvs, result):
    """One measured run as the verdict reads it, from the driver's raw record: the JSONL's figures with the accept
    length and its source, the GPU state before and after (parsed by _bench_gpu_state, the one reader)."""
    p = module.params
    try:
        with open(planned["output_file"]) as f:
            text = f.read()
    except OSError as exc:
        module.fail_json(msg="%s: the client wrote no %s: %s" % (planned["label"], planned["output_file"], exc),
                         **result)
    try:
        metrics = parse_bench_jsonl(text, expected_prompts=p["num_prompts"])
        metrics.pop("raw", None)  # the JSONL stays on the target; the report keeps the parsed figures
        metrics.update(accept_length(bool(p["expect"].get("speculative_algorithm")), done["metrics_before"],
                                     done["metrics_after"], metrics["accept_length"]))
        gpus = {}
        for when in ("gpu_before", "gpu_after"):
            results = [Result(argv, r["rc"], r["out"], r["err"]) for argv, r in zip(gpu_argvs, done[when])]
            gpus[when] = parse_gpu_state(results, p["min_count"], done[when][0]["time"])
    except (BenchError, SmiError) as exc:
        module.fail_json(msg="%s: %s" % (planned["label"], getattr(exc, "msg", None) or exc), **result)
    worker_env = result["worker_env"]
    return {"repeat": planned["repeat"], "concurrency": planned["concurrency"], "started": done["started"],
            "finished": done["ended"], "metrics": metrics, "server": result["server"],
            "client": result["client_module"], "argv": planned["argv"],
            "gpu_before": gpus["gpu_before"]["gpus"], "gpu_after": gpus["gpu_after"]["gpus"],
            "gpu_before_time": gpus["gpu_before"]["time"], "gpu_after_time": gpus["gpu_after"]["time"],
            "provenance": {"driver_version": gpus["gpu_before"]["driver_version"],
                           "nccl_env": worker_env.get("env"), "nccl_env_consistent": worker_env.get("consistent"),
                           "worker_pids": worker_env.get("worker_pids"), "unit_pids": worker_env.get("pids")}}


def run_module(module):
    p = module.params
    result = {"changed": False, "started": _now()}
    client = pick_client(module, result)
    result["client_module"] = client
    base = p["base_url"].rstrip("/")
    warmup_requests = client_warmup_requests(p["warmup_runs"])
    planned = visit_runs(p["warmup_runs"], p["repeats"], p["concurrency"], p["output_prefix"])
    template = None
    if p["dataset"] == "sharegpt":
        template = {"source": p["dataset_path"], "output": p["output_prefix"] + "-dataset.json",
                    "tokenizer": p["tokenizer"]}
    try:
        for run in planned:
            run["argv"] = client_argv(base, p["dataset"], template["output"] if template else p["dataset_path"],
                                      p["tokenizer"], p["num_prompts"],
                                      p["input_len"], p["output_len"], run["concurrency"], run["output_file"],
                                      seed=p["seed"], model=p["model"], warmup_requests=warmup_requests,
                                      flush_cache=p["flush_cache"], extra_args=p["extra_args"])
    except BenchError as exc:
        module.fail_json(msg=str(exc), **result)
    result["plan"] = [{"label": run["label"], "argv": run["argv"]} for run in planned]
    for path, what in ((p["dataset_path"], "dataset"), (p["tokenizer"], "tokenizer")):
        if not os.path.exists(path):
            module.fail_json(msg="%s %s does not exist on the target (no hub downloads)" % (what, path), **result)
    if module.check_mode:
        result["ended"] = _now()
        module.exit_json(**result)

    server_state(module, result)
    if p["worker_unit"]:
        result["worker_env"] = read_worker_env(module, p["helper"], p["worker_unit"], p["env_prefixes"])
    else:
        result["worker_env"] = {"pids": [], "pids_with_vars": [], "consistent": None, "env": {}}

    runner = Runner(module)
    gpu_argvs = [runner.argv(argv, p["nvidia_smi_timeout"]) for argv in gpu_state_argvs(
        {"gpus": [], "nvidia_smi": p["nvidia_smi"]})]
    plan = {"client": client, "base_url": base, "gpu_argvs": gpu_argvs, "counters": list(ACCEPT_LENGTH_COUNTERS),
            "flush_timeout": p["flush_timeout"] if p["flush_cache"] else None, "template": template,
            "runs": [{key: run[key] for key in ("label", "argv", "output_file", "measured")} for run in planned]}
    rc, out, err = run_driver(module, p["python"], ["run", json.dumps(plan)],
                              cwd=os.path.dirname(p["output_prefix"]) or None)
    result["ended"] = _now()
    answer = driver_answer(out)
    if rc != 0 or answer is None:
        module.fail_json(msg="the benchmark client's driver exited %d without its result: %s"
                         % (rc, (err or out).strip()[-1500:]), **result)
    if answer.get("error"):
        tail = (answer["runs"][-1].get("output_tail") or "").strip()[-1500:] if answer.get("runs") else ""
        module.fail_json(msg=answer["error"] + (": " + tail if tail else ""), driver_stderr=err[-3000:], **result)
    result["runs"] = [measured_record(module, run, done, gpu_argvs, result)
                      for run, done in zip(planned, answer["runs"]) if run["measured"]]
    module.exit_json(**result)
