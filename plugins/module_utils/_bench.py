# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark logic for the sglang_benchmark role: private to this collection.

Pure Python (no Ansible imports) so the filter plugins, the modules and the unit tests share one copy:
the arm schedule, strict parsers for bench_serving's JSONL and the nvidia-smi clocks query, statistics,
the verdict and the progress line. Nothing here talks to a host.
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
DEFAULT_THROTTLE_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
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
    # therefore sets every speculative key to None explicitly (a removed key would fall back to the base args).
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


def throttled_gpus(gpus, mask):
    """[(index, [reason names])] of the GPUs whose active reasons intersect the mask (unknown bits count)."""
    known = sum(CLOCK_EVENT_REASONS.values())
    hits = []
    for gpu in gpus or []:
        bits = gpu["clocks_event_reasons"] & (mask | ~known)
        if bits:
            hits.append((gpu["index"], reason_names(bits)))
    return hits


# ---------------------------------------------------------------------------------------------- statistics


def median(values):
    vals = sorted(values)
    if not vals:
        raise BenchError("median of no values")
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2.0


def summarize(values):
    """median, min, max, spread (max-min as % of the median), sample stdev; n."""
    vals = [float(v) for v in values]
    if not vals:
        return {"n": 0, "median": None, "min": None, "max": None, "spread_pct": None, "stdev": None}
    med = median(vals)
    mean = sum(vals) / len(vals)
    stdev = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return {
        "n": len(vals),
        "median": med,
        "min": min(vals),
        "max": max(vals),
        "mean": mean,
        "stdev": stdev,
        "spread_pct": (max(vals) - min(vals)) / med * 100.0 if med else None,
    }


def _pct(new, old):
    return (new / old - 1.0) * 100.0 if old else None


# ---------------------------------------------------------------------------------------------- the verdict


def _run_problems(run, mask, require_clean_tree):
    problems = []
    metrics = run.get("metrics") or {}
    expected = metrics.get("expected")
    if expected is not None and metrics.get("completed", 0) < expected:
        problems.append("visit %s %s: %s of %s requests completed"
                        % (run["visit"], run["arm"], metrics.get("completed"), expected))
    for when in ("gpu_before", "gpu_after"):
        for idx, names in throttled_gpus(run.get(when), mask):
            problems.append("visit %s %s: GPU %d throttled %s the run (%s)"
                            % (run["visit"], run["arm"], idx, when.split("_")[1], ",".join(names)))
    prov = run.get("provenance") or {}
    if require_clean_tree and prov.get("sglang_dirty"):
        problems.append("visit %s %s: the SGLang tree was dirty (patches cost throughput)" % (run["visit"], run["arm"]))
    if prov.get("nccl_env_consistent") is False:
        problems.append("visit %s %s: the server's processes do not all carry the same NCCL environment"
                        % (run["visit"], run["arm"]))
    return problems


def verdict(runs, visits, drift_pct=3.0, min_speedup_pct=3.0, throttle_reasons=DEFAULT_THROTTLE_REASONS,
            decision_concurrency=None, require_clean_tree=True):
    """Judge measured runs against their adjacent fresh baselines.

    runs: [{visit, arm, repeat, concurrency, metrics{output_throughput,...}, gpu_before, gpu_after,
            provenance{sglang_commit, sglang_dirty, nccl_env, driver_version}, started, finished}]
    visits: the plan_arms schedule. A variant visit is compared with the baseline visits right before and after
    it; the comparison is invalid when those two baselines differ by more than drift_pct, when a GPU showed a
    throttle reason before/after any run involved, when requests failed, or when the provenance is not the same
    everywhere. An arm is accepted when all its comparisons are valid and its median speedup is at least
    min_speedup_pct (a gain smaller than the tolerated drift cannot be told from drift).
    """
    mask = throttle_mask(throttle_reasons)
    by_visit = {}
    for run in runs:
        by_visit.setdefault(int(run["visit"]), []).append(run)
    concurrencies = sorted({int(r["concurrency"]) for r in runs})
    if not concurrencies:
        raise BenchError("no measured runs to judge")
    if decision_concurrency is None:
        decision_concurrency = concurrencies[0]
    decision_concurrency = int(decision_concurrency)
    if decision_concurrency not in concurrencies:
        raise BenchError("decision concurrency %d was not measured (measured: %s)" % (decision_concurrency, concurrencies))

    global_problems = []
    commits = sorted({str((r.get("provenance") or {}).get("sglang_commit")) for r in runs})
    if len(commits) > 1:
        global_problems.append("the SGLang commit changed during the benchmark: %s" % ", ".join(commits))
    envs = sorted({json.dumps((r.get("provenance") or {}).get("nccl_env") or {}, sort_keys=True) for r in runs})
    if len(envs) > 1:
        global_problems.append("the workers' NCCL environment differed between runs: %s" % "; ".join(envs))

    visit_stats = []
    run_problems = {}
    for visit in visits:
        vruns = by_visit.get(visit["index"], [])
        probs = []
        for run in vruns:
            probs.extend(_run_problems(run, mask, require_clean_tree))
        run_problems[visit["index"]] = probs
        per_c = {}
        for conc in concurrencies:
            vals = [r["metrics"]["output_throughput"] for r in vruns if int(r["concurrency"]) == conc]
            tpot = [r["metrics"]["mean_tpot_ms"] for r in vruns if int(r["concurrency"]) == conc]
            acc = [r["metrics"]["accept_length"] for r in vruns
                   if int(r["concurrency"]) == conc and r["metrics"].get("accept_length")]
            per_c[str(conc)] = {
                "output_throughput": summarize(vals),
                "mean_tpot_ms": summarize(tpot),
                "accept_length": summarize(acc),
                "samples": vals,
            }
        visit_stats.append({"index": visit["index"], "arm": visit["arm"], "kind": visit["kind"],
                            "round": visit.get("round", 1), "measured": bool(vruns),
                            "problems": probs, "concurrency": per_c})

    baselines = [v for v in visit_stats if v["kind"] == "baseline" and v["measured"]]
    comparisons = []
    for vs in visit_stats:
        if vs["kind"] != "variant" or not vs["measured"]:
            continue
        before = [b for b in baselines if b["index"] < vs["index"]]
        after = [b for b in baselines if b["index"] > vs["index"]]
        adj = ([before[-1]] if before else []) + ([after[0]] if after else [])
        comp = {"visit": vs["index"], "arm": vs["arm"], "baseline_visits": [b["index"] for b in adj],
                "problems": list(vs["problems"]), "concurrency": {}}
        for b in adj:
            comp["problems"].extend(b["problems"])
        if len(adj) < 2:
            comp["problems"].append("visit %d %s: needs a fresh baseline on both sides" % (vs["index"], vs["arm"]))
        for conc in concurrencies:
            key = str(conc)
            arm_med = vs["concurrency"][key]["output_throughput"]["median"]
            meds = [b["concurrency"][key]["output_throughput"]["median"] for b in adj]
            meds = [m for m in meds if m is not None]
            entry = {"median": arm_med, "baseline_medians": meds, "baseline_ref": None, "drift_pct": None,
                     "speedup_pct": None}
            if meds and arm_med is not None:
                ref = sum(meds) / len(meds)
                entry["baseline_ref"] = ref
                entry["speedup_pct"] = _pct(arm_med, ref)
                if len(meds) == 2:
                    drift = abs(meds[1] - meds[0]) / min(meds) * 100.0 if min(meds) else float("inf")
                    entry["drift_pct"] = drift
                    if drift > drift_pct:
                        comp["problems"].append(
                            "visit %d %s at concurrency %d: baseline drifted %.1f%% (%.2f -> %.2f tok/s), "
                            "more than the %.1f%% allowed"
                            % (vs["index"], vs["arm"], conc, drift, meds[0], meds[1], drift_pct))
            elif arm_med is None:
                comp["problems"].append("visit %d %s: no run at concurrency %d" % (vs["index"], vs["arm"], conc))
            comp["concurrency"][key] = entry
        comp["problems"] = _dedupe(comp["problems"])
        comp["valid"] = not comp["problems"] and not global_problems
        comparisons.append(comp)

    arms = []
    for name in _ordered_unique(v["arm"] for v in visits):
        vruns = [r for r in runs if r["arm"] == name]
        arm = {"name": name, "kind": BASELINE if name == BASELINE else "variant", "concurrency": {}}
        for conc in concurrencies:
            key = str(conc)
            vals = [r["metrics"]["output_throughput"] for r in vruns if int(r["concurrency"]) == conc]
            acc = [r["metrics"]["accept_length"] for r in vruns
                   if int(r["concurrency"]) == conc and r["metrics"].get("accept_length")]
            tpot = [r["metrics"]["mean_tpot_ms"] for r in vruns if int(r["concurrency"]) == conc]
            entry = {"output_throughput": summarize(vals), "mean_tpot_ms": summarize(tpot),
                     "accept_length": summarize(acc)}
            if name != BASELINE:
                sp = [c["concurrency"][key]["speedup_pct"] for c in comparisons
                      if c["arm"] == name and c["concurrency"].get(key, {}).get("speedup_pct") is not None]
                entry["speedup_pct"] = median(sp) if sp else None
            arm["concurrency"][key] = entry
        if name != BASELINE:
            comps = [c for c in comparisons if c["arm"] == name]
            arm["problems"] = _dedupe(p for c in comps for p in c["problems"]) + list(global_problems)
            arm["valid"] = bool(comps) and all(c["valid"] for c in comps)
            sp = arm["concurrency"][str(decision_concurrency)].get("speedup_pct")
            arm["speedup_pct"] = sp
            if not arm["valid"]:
                arm["decision"] = "invalid"
            elif sp is not None and sp >= min_speedup_pct:
                arm["decision"] = "accepted"
            else:
                arm["decision"] = "rejected"
                arm["reason"] = ("%.1f%% vs the adjacent baselines at concurrency %d, below the %.1f%% needed"
                                 % (sp if sp is not None else float("nan"), decision_concurrency, min_speedup_pct))
        arms.append(arm)

    base_meds = [b["concurrency"][str(decision_concurrency)]["output_throughput"]["median"] for b in baselines]
    base_meds = [m for m in base_meds if m is not None]
    overall_drift = (max(base_meds) - min(base_meds)) / min(base_meds) * 100.0 if len(base_meds) > 1 and min(base_meds) else 0.0
    problems = _dedupe(list(global_problems) + [p for c in comparisons for p in c["problems"]])
    valid = not problems
    accepted = [a for a in arms if a.get("decision") == "accepted"]
    accepted.sort(key=lambda a: a["speedup_pct"], reverse=True)
    if accepted:
        winner = accepted[0]["name"]
        summary = "%s is %.1f%% faster than the fresh baseline at concurrency %d" % (
            winner, accepted[0]["speedup_pct"], decision_concurrency)
    else:
        winner = BASELINE
        summary = "no EAGLE-3 arm beat the fresh baseline by %.1f%% or more at concurrency %d" % (
            min_speedup_pct, decision_concurrency)
    if not valid:
        summary = "INVALID: " + problems[0] + ("" if len(problems) == 1 else " (+%d more)" % (len(problems) - 1))
    return {
        "valid": valid,
        "winner": winner if valid else None,
        "best_valid_arm": winner,
        "summary": summary,
        "problems": problems,
        "decision_concurrency": decision_concurrency,
        "concurrencies": concurrencies,
        "thresholds": {"drift_pct": drift_pct, "min_speedup_pct": min_speedup_pct,
                       "throttle_reasons": list(throttle_reasons), "require_clean_tree": require_clean_tree},
        "baseline_drift_pct": overall_drift,
        "arms": arms,
        "visits": visit_stats,
        "comparisons": comparisons,
    }


def _dedupe(items):
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _ordered_unique(items):
    return _dedupe(items)


# ---------------------------------------------------------------------------------------------- progress


def _fmt_duration(seconds):
    seconds = int(round(max(0.0, seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return "%dh%02dm" % (hours, minutes)
    if minutes:
        return "%dm%02ds" % (minutes, secs)
    return "%ds" % secs


def progress_line(visits, done_runs, visit_index, elapsed_s):
    """One line after each visit: which arm, its figures, and an ETA from the mean visit time so far."""
    total = len(visits)
    done = visit_index + 1
    visit = visits[visit_index]
    vruns = [r for r in done_runs if int(r["visit"]) == int(visit["index"])]
    figures = []
    for conc in sorted({int(r["concurrency"]) for r in vruns}):
        vals = [r["metrics"]["output_throughput"] for r in vruns if int(r["concurrency"]) == conc]
        st = summarize(vals)
        figures.append("c=%d %.2f tok/s (n=%d, spread %.1f%%)" % (conc, st["median"], st["n"], st["spread_pct"] or 0.0))
    eta = elapsed_s / done * (total - done) if done else 0.0
    return "[%d/%d] %s (%s): %s; elapsed %s, ETA %s" % (
        done, total, visit["arm"], visit["kind"], "; ".join(figures) or "no runs",
        _fmt_duration(elapsed_s), _fmt_duration(eta))
