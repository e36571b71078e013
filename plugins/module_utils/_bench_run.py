# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Body of the sglang_bench_run module: private to this collection."""

from __future__ import annotations

import datetime
import json
import os

from ansible.module_utils.urls import open_url

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import BenchError, parse_bench_jsonl
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_client import (
    CLIENT_MODULES,
    OFFLINE_ENV,
    check_server,
    client_argv,
    effective_server_limits,
    pick_client_argv,
)

# What the run records of the helper's worker-env answer (the helper adds ok, unit, control_group, error).
WORKER_ENV_KEYS = ("pids", "worker_pids", "workers_titled", "pids_with_vars", "consistent", "env", "per_pid")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def http(method, url, timeout=30, data=None):
    """(status, body text); HTTP errors come back as a status, connection errors raise."""
    try:
        resp = open_url(url, method=method, timeout=timeout, data=data, validate_certs=False)
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


def run_module(module):
    p = module.params
    result = {"changed": False, "started": _now()}
    client = p["client_module"]
    if client == "auto" or p["import_client"]:
        modules = CLIENT_MODULES if client == "auto" else (client,)
        rc, out, err = module.run_command(pick_client_argv(p["python"], modules, p["import_client"]),
                                          environ_update=OFFLINE_ENV)
        if rc != 0:
            lines = (err or out).strip().splitlines() or ["exit status %d, no output" % rc]
            module.fail_json(msg="SGLang's benchmark client: %s" % lines[-1], **result)
        client = out.strip().splitlines()[-1]
    result["client_module"] = client
    argv = client_argv(p["python"], client, p["base_url"].rstrip("/"), p["dataset_path"], p["tokenizer"],
                       p["num_prompts"], p["input_len"], p["output_len"], p["concurrency"], p["output_file"],
                       seed=p["seed"], model=p["model"], warmup_requests=p["warmup_requests"],
                       flush_cache=p["flush_cache"], extra_args=p["extra_args"])
    result["argv"] = argv
    for path, what in ((p["dataset_path"], "dataset"), (p["tokenizer"], "tokenizer")):
        if not os.path.exists(path):
            module.fail_json(msg="%s %s does not exist on the target (no hub downloads)" % (what, path), **result)
    if module.check_mode:
        result["ended"] = _now()
        module.exit_json(**result)

    base = p["base_url"].rstrip("/")
    status, body = http("GET", base + "/server_info")
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

    if p["worker_unit"]:
        result["worker_env"] = read_worker_env(module, p["helper"], p["worker_unit"], p["env_prefixes"])
    else:
        result["worker_env"] = {"pids": [], "pids_with_vars": [], "consistent": None, "env": {}}

    if p["flush_cache"]:
        status, body = http("POST", "%s/flush_cache?timeout=%s" % (base, p["flush_timeout"]),
                            timeout=p["flush_timeout"] + 30)
        result["flush_cache"] = {"status": status, "body": body.strip()[:200]}
        if status != 200:
            module.fail_json(msg="POST /flush_cache returned %s: %s" % (status, body.strip()[:500]), **result)

    if os.path.exists(p["output_file"]):
        os.unlink(p["output_file"])  # the client appends; a stale line must never be read as this run's
    env = dict(OFFLINE_ENV)
    result["measure_started"] = _now()
    rc, out, err = module.run_command(argv, environ_update=env, cwd=os.path.dirname(p["output_file"]) or None)
    result["ended"] = _now()
    result["rc"] = rc
    result["stdout_tail"] = out[-3000:]
    result["stderr_tail"] = err[-3000:]
    if rc != 0:
        module.fail_json(msg="%s exited %d: %s" % (client, rc, (err or out).strip()[-1500:]), **result)
    try:
        with open(p["output_file"]) as f:
            text = f.read()
    except OSError as exc:
        module.fail_json(msg="the client wrote no %s: %s" % (p["output_file"], exc), **result)
    try:
        metrics = parse_bench_jsonl(text, expected_prompts=p["num_prompts"])
    except BenchError as exc:
        module.fail_json(msg=str(exc), **result)
    metrics.pop("raw", None)  # the JSONL stays on the target; the report keeps the parsed figures
    result["metrics"] = metrics
    module.exit_json(**result)
