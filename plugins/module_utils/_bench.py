# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark logic for the sglang_benchmark role: private to this collection.

Pure Python (no Ansible imports) so the filter plugins, the modules and the unit tests share one copy:
the arm schedule, strict parsers for bench_serving's JSONL and the nvidia-smi clocks query, the throttle
reasons. Statistics are in _bench_stats, the verdict in _bench_verdict, the progress line in _bench_progress.
Nothing here talks to a host.
"""

from __future__ import annotations

import json
import math
import re

BASELINE = "baseline"

# The keys that make a server speculative; the baseline arm drops all of them.
SPECULATIVE_KEYS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_attention_mode",
    "speculative_accept_threshold_single",
    "speculative_accept_threshold_acc",
    "speculative_token_map",
)

# nvidia-smi clocks_event_reasons bits (nvml.h nvmlClocksEventReason*). GpuIdle, ApplicationsClocksSetting,
# SyncBoost and DisplayClockSetting do not slow a busy GPU down; the others do.
CLOCK_EVENT_REASONS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
# Thermal and hardware slowdowns: a run that saw one is never compared.
DEFAULT_THROTTLE_REASONS = (
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
# The power cap engages on every heavily loaded H200 (692 W of 700 W under a matmul, docs/ab-benchmark.md): a
# comparison stays valid when it engaged the same way on the variant and on its adjacent baselines.
DEFAULT_MATCHED_REASONS = (
    "sw_power_cap",
)

CLOCKS_QUERY_FIELDS = (
    "index",
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "clocks_event_reasons.active",
    "pstate",
)
CLOCKS_QUERY_ARGV = (
    "--query-gpu=" + ",".join(CLOCKS_QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)

JSONL_REQUIRED = ("output_throughput", "mean_tpot_ms", "completed")

# SGLang 0.5.23's counters behind the accept length (srt/observability/metrics_collector.py,
# TokenizerMetricsCollector.observe_one_finished_request): each finished request adds its completion tokens and its
# spec_verify_ct. Served at /metrics only with --enable-metrics.
GENERATION_TOKENS = "sglang:generation_tokens_total"
SPEC_VERIFY_CALLS = "sglang:spec_verify_calls_total"
ACCEPT_LENGTH_COUNTERS = (GENERATION_TOKENS, SPEC_VERIFY_CALLS)


class BenchError(ValueError):
    """Input that cannot be trusted; the message says what and quotes the raw text."""


# ---------------------------------------------------------------------------------------------- the plan


def plan_arms(server_args, arms, max_running_requests, baseline_args=None, rounds=1,
              speculative_keys=SPECULATIVE_KEYS):
    """Expand the arm matrix into the visit schedule A B A C A ... (a fresh baseline between variants).

    server_args: the deployed sglang_server_args (the original config). A variant is it plus the arm's overrides;
    the baseline is it with every speculative key set to None; max_running_requests is forced on all of them
    because SGLang caps speculative servers at 48 otherwise, which would compare unequal batch limits.
    Returns a list of visits: {index, arm, kind ('baseline'|'variant'), round, args}.
    """
    if not isinstance(server_args, dict):
        raise BenchError("server_args must be a dict of SGLang dest names, got %r" % type(server_args).__name__)
    if not arms:
        raise BenchError("at least one variant arm is needed to compare against the baseline")
    try:
        mrr = int(max_running_requests)
    except (TypeError, ValueError):
        raise BenchError("max_running_requests must be an integer, got %r" % (max_running_requests,))
    if mrr < 1:
        raise BenchError("max_running_requests must be >= 1, got %d" % mrr)
    if int(rounds) < 1:
        raise BenchError("rounds must be >= 1, got %r" % (rounds,))
    # The sglang_server role combines its base args with sglang_server_args, and null drops a flag: the baseline
    # therefore sets every speculative key to None explicitly (a removed key would fall back to the base args):
    # the base args' (speculative_keys) and every speculative_* setting the config or an arm names (SGLang adds
    # them often: speculative_adaptive would otherwise carry into the baseline).
    named = set(server_args) | {key for arm in arms if isinstance(arm, dict) for key in (arm.get("args") or {})}
    speculative_keys = tuple(speculative_keys) + tuple(sorted(
        key for key in named if str(key).startswith("speculative_") and key not in speculative_keys))
    baseline = dict(server_args)
    baseline.update({key: None for key in speculative_keys})
    baseline.update(baseline_args or {})
    baseline["max_running_requests"] = mrr
    for key in speculative_keys:
        if baseline.get(key) not in (None, False, ""):
            raise BenchError("the baseline must not be speculative, but baseline_args sets %s" % key)
    names = set()
    variants = []
    for arm in arms:
        if not isinstance(arm, dict) or not arm.get("name"):
            raise BenchError("every arm needs a name: %r" % (arm,))
        name = str(arm["name"])
        if name == BASELINE or name in names:
            raise BenchError("arm name %r is reserved or repeated" % name)
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name):
            raise BenchError("arm name %r: use letters, digits, '.', '_' and '-' only" % name)
        names.add(name)
        overrides = dict(arm.get("args") or {})
        if "max_running_requests" in overrides and int(overrides["max_running_requests"]) != mrr:
            raise BenchError(
                "arm %r sets max_running_requests=%s but every arm must run with %d; remove it from the arm"
                % (name, overrides["max_running_requests"], mrr))
        # a variant is the original config with the arm's overrides (draft model path etc. stay as deployed)
        args = dict(server_args)
        args.update(overrides)
        args["max_running_requests"] = mrr
        variants.append((name, args))

    visits = []
    for rnd in range(int(rounds)):
        for name, args in variants:
            if not visits or visits[-1]["kind"] != "baseline":
                visits.append({"arm": BASELINE, "kind": "baseline", "round": rnd + 1, "args": dict(baseline)})
            visits.append({"arm": name, "kind": "variant", "round": rnd + 1, "args": dict(args)})
            visits.append({"arm": BASELINE, "kind": "baseline", "round": rnd + 1, "args": dict(baseline)})
    for i, visit in enumerate(visits):
        visit["index"] = i
    mrrs = {v["args"]["max_running_requests"] for v in visits}
    if len(mrrs) != 1:  # belt and braces: the whole comparison rests on this
        raise BenchError("max_running_requests differs between arms: %s" % sorted(mrrs))
    return visits


# ---------------------------------------------------------------------------------------------- parsers


def parse_bench_jsonl(text, expected_prompts=None):
    """The last result line of a bench_serving --output-file (it appends one JSON object per run).

    Fails on a missing file content, a line that is not JSON, or a result without the fields the verdict
    needs, quoting the raw line. Returns the picked metrics plus the whole record under 'raw'.
    """
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        raise BenchError("bench_serving wrote no result line (all requests failed, or it crashed before writing)")
    line = lines[-1]
    try:
        rec = json.loads(line)
    except ValueError as exc:
        raise BenchError("bench_serving result is not JSON (%s): %s" % (exc, line[:500]))
    if not isinstance(rec, dict):
        raise BenchError("bench_serving result is not an object: %s" % line[:500])
    missing = [k for k in JSONL_REQUIRED if k not in rec or rec[k] is None]
    if missing:
        raise BenchError("bench_serving result lacks %s: %s" % (", ".join(missing), line[:500]))
    out = {}
    for key in ("output_throughput", "mean_tpot_ms"):
        val = rec[key]
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val) or val < 0:
            raise BenchError("bench_serving %s is not a finite number >= 0: %r" % (key, val))
        out[key] = float(val)
    if isinstance(rec["completed"], bool) or not isinstance(rec["completed"], int):
        raise BenchError("bench_serving completed is not an integer: %r" % (rec["completed"],))
    out["completed"] = rec["completed"]
    acc = rec.get("accept_length")
    if acc is not None and (isinstance(acc, bool) or not isinstance(acc, (int, float)) or not math.isfinite(acc)):
        raise BenchError("bench_serving accept_length is not a number: %r" % (acc,))
    out["accept_length"] = float(acc) if acc else None
    for key in ("duration", "max_concurrency", "random_input_len", "random_output_len", "random_range_ratio",
                "total_output_tokens", "median_tpot_ms", "mean_ttft_ms", "request_throughput",
                "dataset_name", "backend"):
        out[key] = rec.get(key)
    if expected_prompts is not None:
        out["expected"] = int(expected_prompts)
    out["raw"] = rec
    return out


def metrics_counters(reading):
    """The counters of one /metrics reading of the client driver ({status, counters} or {status, error}); None when
    the server has no /metrics (404: started without --enable-metrics). Anything else it cannot vouch for raises."""
    status = reading.get("status")
    if status == 404:
        return None
    if status == 200 and isinstance(reading.get("counters"), dict):
        return reading["counters"]
    raise BenchError(reading.get("error") or "GET /metrics returned %s" % status)


def accept_length(speculative, metrics_before, metrics_after, server_info_value):
    """The run's accept length and where it comes from: {accept_length, accept_length_source, ...}.

    metrics: with /metrics, delta generation tokens / delta verify calls over the run (robust: the counters count
    every finished request, where /server_info's avg_spec_accept_length is not filled on some paths);
    server_info: else the avg_spec_accept_length the client read from /server_info after the run; none: else, and
    always for a baseline.
    """
    if not speculative:
        return {"accept_length": None, "accept_length_source": "none"}
    before, after = metrics_counters(metrics_before), metrics_counters(metrics_after)
    if before is not None and after is not None:
        tokens = after.get(GENERATION_TOKENS, 0.0) - before.get(GENERATION_TOKENS, 0.0)
        calls = after.get(SPEC_VERIFY_CALLS, 0.0) - before.get(SPEC_VERIFY_CALLS, 0.0)
        if tokens < 0 or calls < 0:
            raise BenchError("/metrics counters went down during the run (%s %+g, %s %+g): did the server restart?"
                             % (GENERATION_TOKENS, tokens, SPEC_VERIFY_CALLS, calls))
        if calls > 0:
            return {"accept_length": tokens / calls, "accept_length_source": "metrics",
                    "generation_tokens": tokens, "spec_verify_calls": calls}
    if server_info_value:
        return {"accept_length": float(server_info_value), "accept_length_source": "server_info"}
    return {"accept_length": None, "accept_length_source": "none"}


_HEX64 = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_PSTATE = re.compile(r"^P([0-9]|1[0-5])$")


def parse_gpu_clocks(stdout):
    """Strictly parse `nvidia-smi --query-gpu=<CLOCKS_QUERY_FIELDS> --format=csv,noheader,nounits`.

    Every line must carry exactly the seven fields, numbers must be numbers ('[N/A]', '[Unknown Error]',
    driver messages fail), the reasons a hex mask. An empty output fails too: no figure without its GPU state.
    """
    gpus = []
    lines = [ln for ln in (stdout or "").splitlines() if ln.strip()]
    if not lines:
        raise BenchError("nvidia-smi printed no GPU line for the clocks query")
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(CLOCKS_QUERY_FIELDS):
            raise BenchError("nvidia-smi clocks line has %d fields, expected %d (%s): %r"
                             % (len(parts), len(CLOCKS_QUERY_FIELDS), ",".join(CLOCKS_QUERY_FIELDS), line))
        idx, sm, mem, temp, power, reasons, pstate = parts
        try:
            gpu = {
                "index": int(idx),
                "clocks_sm_mhz": int(sm),
                "clocks_mem_mhz": int(mem),
                "temperature_c": int(temp),
                "power_w": float(power),
            }
        except ValueError:
            raise BenchError("nvidia-smi clocks line has a non-numeric field: %r" % line)
        if not math.isfinite(gpu["power_w"]):
            raise BenchError("nvidia-smi power.draw is not finite: %r" % line)
        if not _HEX64.match(reasons):
            raise BenchError("nvidia-smi clocks_event_reasons.active is not a hex mask: %r" % line)
        if not _PSTATE.match(pstate):
            raise BenchError("nvidia-smi pstate is not P0..P15: %r" % line)
        gpu["clocks_event_reasons"] = int(reasons, 16)
        gpu["clocks_event_reasons_hex"] = reasons
        gpu["clocks_event_reason_names"] = reason_names(gpu["clocks_event_reasons"])
        gpu["pstate"] = pstate
        gpus.append(gpu)
    seen = [g["index"] for g in gpus]
    if len(set(seen)) != len(seen):
        raise BenchError("nvidia-smi listed a GPU index twice: %s" % seen)
    return gpus


def reason_names(mask):
    names = [name for name, bit in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS.values())
    if unknown:
        names.append("unknown_0x%x" % unknown)
    return names


def throttle_mask(names=DEFAULT_THROTTLE_REASONS):
    mask = 0
    for name in names:
        if name not in CLOCK_EVENT_REASONS:
            raise BenchError("unknown clock event reason %r; known: %s" % (name, ", ".join(CLOCK_EVENT_REASONS)))
        mask |= CLOCK_EVENT_REASONS[name]
    return mask


def matched_reasons_seen(runs, mask):
    """Sorted names of the mask's reasons that any GPU showed before or after any of the runs."""
    bits = 0
    for run in runs:
        for when in ("gpu_before", "gpu_after"):
            for gpu in run.get(when) or []:
                bits |= gpu["clocks_event_reasons"] & mask
    return reason_names(bits)


def throttled_gpus(gpus, mask):
    """[(index, [reason names])] of the GPUs whose active reasons intersect the mask (unknown bits count)."""
    known = sum(CLOCK_EVENT_REASONS.values())
    hits = []
    for gpu in gpus or []:
        bits = gpu["clocks_event_reasons"] & (mask | ~known)
        if bits:
            hits.append((gpu["index"], reason_names(bits)))
    return hits
