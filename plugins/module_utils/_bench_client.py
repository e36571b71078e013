# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wrapper of SGLang's benchmark client and of the server endpoints it needs: private to this collection.

Builds the bench_serving arguments of each run of a visit, the argv that picks `sglang.benchmark.serving` (0.5.22+)
or the deprecated `sglang.bench_serving` (run by _bench_driver), and checks /server_info against what the arm asked
for. Used by the sglang_bench_run module. The workers' environment is read by the sglang_server role's helper
(gpuserve-sglang worker-env), the one reader of it.
"""

from __future__ import annotations

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import BenchError

CLIENT_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")
# The client's datasets the role offers: ShareGPT-format conversations as chat prompts (real text: EAGLE-3's accept
# length depends on content), or SGLang's `random` (ShareGPT tokens cut and tiled to a fixed prompt length).
DATASETS = ("sharegpt", "random")


def pick_args(modules=CLIENT_MODULES, import_client=False):
    """_bench_driver's arguments that print the first of `modules` present in the venv's sglang (and import it, with
    prometheus_client's parser, with import_client)."""
    return ["pick"] + (["--import"] if import_client else []) + list(modules)


# bench_serving imports transformers for the tokenizer; the hub is never reached because both paths are local
# and these variables make any attempt fail at once instead of hanging on the network.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1"}


def client_warmup_requests(warmup_runs):
    """The client's own warmup requests before each run: none when the visit has warmup runs of its own (the
    client's would land in every measured run's /metrics counters), else one."""
    return 0 if int(warmup_runs) > 0 else 1


def visit_runs(warmup_runs, repeats, concurrency, output_prefix):
    """A visit's runs in the order they run: the warmup runs (each concurrency), then the measured ones (each
    repeat, each concurrency). [{measured, repeat, concurrency, label, output_file}]"""
    runs = []
    for measured, count in ((False, warmup_runs), (True, repeats)):
        for rep in range(int(count)):
            for conc in concurrency:
                conc = int(conc)
                runs.append({"measured": measured, "repeat": rep, "concurrency": conc,
                             "label": "%s %d c=%d" % ("repeat" if measured else "warmup", rep, conc),
                             "output_file": "%s-c%d-%s%d.jsonl" % (output_prefix, conc, "r" if measured else "w", rep)})
    return runs


def client_argv(base_url, dataset, dataset_path, tokenizer, num_prompts, input_len, output_len, concurrency,
                output_file, seed=1, model=None, warmup_requests=1, flush_cache=True, extra_args=()):
    """The client's arguments for one run (after `python -m CLIENT`): local files only, JSONL out.

    sharegpt: the conversations' first turns, each answered with output_len tokens (--sharegpt-output-len); the
    dataset_path given is the one the driver wrote with the chat template applied (_bench_driver.chat_prompt says
    why not the client's --apply-chat-template). random: fixed lengths (--random-range-ratio 1.0). --flush-cache makes the client
    flush right after its own warmup requests, so the server's cumulative avg_spec_accept_length covers only the
    measured requests.
    """
    argv = [
        "--backend", "sglang",
        "--base-url", base_url,
        "--dataset-name", dataset,
        "--dataset-path", dataset_path,
        "--tokenizer", tokenizer,
        "--num-prompts", str(int(num_prompts)),
    ]
    if dataset == "sharegpt":
        if int(output_len) < 4:  # sample_sharegpt_requests: "output_len too small"
            raise BenchError("the sharegpt dataset needs an output length of at least 4 tokens, got %s" % output_len)
        argv += ["--sharegpt-output-len", str(int(output_len))]
    elif dataset == "random":
        argv += ["--random-input-len", str(int(input_len)), "--random-output-len", str(int(output_len)),
                 "--random-range-ratio", "1.0"]
    else:
        raise BenchError("unknown dataset %r: use one of %s" % (dataset, ", ".join(DATASETS)))
    argv += [
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
