# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wrapper of SGLang's benchmark client and of the server endpoints it needs: private to this collection.

Builds the bench_serving argv, picks `sglang.benchmark.serving` (0.5.22+) or the deprecated
`sglang.bench_serving`, and checks /server_info against what the arm asked for. Used by the sglang_bench_run
module. The workers' environment is read by the sglang_server role's helper (gpuserve-sglang worker-env), the
one reader of it.
"""

from __future__ import annotations

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_pick_client
from ansible_collections.gpuserve.sglang.plugins.module_utils._python_script import script_argv

CLIENT_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")


def pick_client_argv(python, modules=CLIENT_MODULES, import_client=False):
    """argv that prints the first of `modules` present in python's sglang (and imports it with import_client): the
    script _bench_pick_client, run by that python (not isolated: the module's environment reaches it)."""
    return script_argv(python, _bench_pick_client, *((["--import"] if import_client else []) + list(modules)),
                       isolated=False)


# bench_serving imports transformers for the tokenizer; the hub is never reached because both paths are local
# and these variables make any attempt fail at once instead of hanging on the network.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1"}


def client_argv(python, client_module, base_url, dataset_path, tokenizer, num_prompts, input_len, output_len,
                concurrency, output_file, seed=1, model=None, warmup_requests=1, flush_cache=True,
                extra_args=()):
    """argv for one bench_serving run: fixed lengths (--random-range-ratio 1.0), local files only, JSONL out.

    --flush-cache makes the client flush right after its own warmup requests, so the server's cumulative
    avg_spec_accept_length (reported as accept_length) covers only the measured requests.
    """
    argv = [
        python, "-m", client_module,
        "--backend", "sglang",
        "--base-url", base_url,
        "--dataset-name", "random",
        "--dataset-path", dataset_path,
        "--tokenizer", tokenizer,
        "--num-prompts", str(int(num_prompts)),
        "--random-input-len", str(int(input_len)),
        "--random-output-len", str(int(output_len)),
        "--random-range-ratio", "1.0",
        "--max-concurrency", str(int(concurrency)),
        "--request-rate", "inf",
        "--seed", str(int(seed)),
        "--warmup-requests", str(int(warmup_requests)),
        "--output-file", output_file,
        "--disable-tqdm",
        "--ready-check-timeout-sec", "0",
    ]
    if model:
        argv += ["--model", model]
    if flush_cache:
        argv.append("--flush-cache")
    argv += [str(a) for a in extra_args]
    return argv


def effective_server_limits(server_info):
    """(max_running_requests as resolved at startup, effective per-DP value from the scheduler or None)."""
    if not isinstance(server_info, dict):
        return None, None
    info = server_info
    if "decode" in info and isinstance(info["decode"], list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states") or []
    effective = None
    if states and isinstance(states[0], dict):
        effective = states[0].get("effective_max_running_requests_per_dp")
        if effective is None:
            effective = states[0].get("max_running_requests")
    return info.get("max_running_requests"), effective


def check_server(server_info, expect):
    """Problems (list of str) where the serving config differs from what the arm asked for."""
    problems = []
    configured, effective = effective_server_limits(server_info)
    want_mrr = expect.get("max_running_requests")
    if want_mrr is not None:
        if configured is not None and int(configured) != int(want_mrr):
            problems.append("server runs with max_running_requests=%s, the arm asked for %s" % (configured, want_mrr))
        if effective is not None and int(effective) != int(want_mrr):
            problems.append("the scheduler's effective max_running_requests is %s, not %s (SGLang caps speculative "
                            "servers; every arm must run with the same limit)" % (effective, want_mrr))
        if configured is None and effective is None:
            problems.append("/server_info reports no max_running_requests: cannot prove the arm's limit")
    if "speculative_algorithm" in expect:
        got = server_info.get("speculative_algorithm") if isinstance(server_info, dict) else None
        want = expect["speculative_algorithm"]
        if (got or None) != (want or None):
            problems.append("server runs speculative_algorithm=%r, the arm asked for %r" % (got, want))
    return problems
