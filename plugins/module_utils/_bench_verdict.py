# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's verdict: each variant against the mean of its adjacent fresh baselines, with the drift,
throttle, failed-request, provenance and GPU-health rules that make a comparison valid. Private to this collection."""

from __future__ import annotations

import json

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import (
    BASELINE, DEFAULT_MATCHED_REASONS, DEFAULT_THROTTLE_REASONS, BenchError, matched_reasons_seen, reason_names,
    throttle_mask, throttled_gpus)
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_stats import median, median_band, summarize
from ansible_collections.gpuserve.sglang.plugins.module_utils._health_drift import differences, where, xid_events
from ansible_collections.gpuserve.sglang.plugins.module_utils._speculative import lossy_settings, speculative

# An accept length at or below this is a draft that does not work: every verify step emits about the one token the
# target makes anyway (EAGLE with an EAGLE-3 head gives exactly 1.00; SGLang's own CI wants more than 1.6 of a
# working EAGLE-3 draft), so the arm is judged by that, not by its speed.
DRAFT_WORKS_ABOVE = 1.05


def _scattered_baseline(baselines, key, drift_pct):
    """Why a drift may be no drift: a baseline visit whose own repeats scatter beyond the drift allowed was not
    steady, so its median is no reference. Seen on a real H100: the first visit after the machine's first server
    start ran two of its four batches of 32 at a fifth and a quarter of the later speed (time to first token 1.4 and
    0.9 s, against 0.05 s in every later visit)."""
    for b in baselines:
        out = b["concurrency"][key]["output_throughput"]
        if out["spread_pct"] is not None and out["spread_pct"] > drift_pct:
            return ("; baseline visit %d's own repeats scatter %.1f%% (%.2f-%.2f tok/s): it was not steady, "
                    "so raise sglang_benchmark_warmup_runs" % (b["index"], out["spread_pct"], out["min"], out["max"]))
    return ""


def _pct(new, old):
    return (new / old - 1.0) * 100.0 if old else None


def _serving_concurrency(visits):
    """The arms' max_running_requests (plan_arms forces one value on every arm), or None when the visits do not say."""
    values = {(v.get("args") or {}).get("max_running_requests") for v in visits} - {None}
    return int(values.pop()) if len(values) == 1 else None


def _decision_concurrency(chosen, serving, measured):
    """(concurrency, why): the operator's choice, else the serving concurrency, else the highest measured. Not the
    lowest: EAGLE-3's gain shrinks as the batch grows, so a gain at concurrency 1 says little of the load the
    server runs."""
    if chosen is not None:
        chosen = int(chosen)
        if chosen not in measured:
            raise BenchError("decision concurrency %d was not measured (measured: %s)" % (chosen, measured))
        return chosen, "set by the operator (sglang_benchmark_decision_concurrency)"
    if serving in measured:
        return serving, "the serving concurrency (max_running_requests %d)" % serving
    if serving is None:
        return measured[-1], "the highest measured (the serving concurrency, max_running_requests, is not known)"
    return measured[-1], ("the highest measured: the serving concurrency (max_running_requests %d) was not measured; "
                          "add it to sglang_benchmark_concurrency to decide there" % serving)


def _accept_problems(visit, vruns, concurrencies):
    """A speculative visit's runs without an accept-length reading, per concurrency: without one, whether its draft
    works is unknown, so the run is no pass."""
    problems = []
    for conc in concurrencies:
        here = [r for r in vruns if int(r["concurrency"]) == conc]
        missing = [r for r in here if not (r.get("metrics") or {}).get("accept_length")]
        if missing:
            problems.append("visit %d %s at concurrency %d: %d of %d runs have no accept-length reading, so whether "
                            "the draft works is unknown; a speculative run without one is no pass"
                            % (visit["index"], visit["arm"], conc, len(missing), len(here)))
    return problems


def _noise(comp, stats, key):
    """Why the comparison's gain at concurrency key cannot be told from the scatter of the repeats, or None. A gain
    is a win only when the band of the arm's median (median_band) stays above the baselines' reference and the
    arm's median above the band of each adjacent baseline."""
    entry = comp["concurrency"][key]
    low, high = median_band(stats[comp["visit"]]["concurrency"][key]["samples"])
    inside = []
    if low <= entry["baseline_ref"]:
        inside.append("the band of its median, %.2f-%.2f tok/s, reaches down to the baselines' %.2f"
                      % (low, high, entry["baseline_ref"]))
    for index in comp["baseline_visits"]:
        b_low, b_high = median_band(stats[index]["concurrency"][key]["samples"])
        if b_high >= entry["median"]:
            inside.append("baseline visit %d's, %.2f-%.2f tok/s, reaches up to its median %.2f"
                          % (index, b_low, b_high, entry["median"]))
    if not inside:
        return None
    return ("visit %d %s at concurrency %s: %+.1f%% is inside the scatter of the repeats (%s)"
            % (comp["visit"], comp["arm"], key, entry["speedup_pct"], "; ".join(inside)))


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


def _health_problems(variant, baselines, by_visit):
    """A comparison's GPU-health problems: every run of the variant visit and of its adjacent baselines
    must carry a health reading (provenance.gpu_health, read after the run on the GPU host, Xid events since the
    visit's deploy) when any of them does; no reading may hold an Xid event, known or unknown; and every GPU's
    PCIe link must read the same in all of them as in the variant's first run. [] when no run carries one (None:
    the benchmark's health read off)."""
    involved = [(v, r) for v in [variant] + list(baselines) for r in by_visit.get(v["index"], [])]
    if all((r.get("provenance") or {}).get("gpu_health") is None for _vs, r in involved):
        return []
    problems, readings = [], []
    for vs, run in involved:
        label = "visit %d %s" % (vs["index"], vs["arm"])
        health = (run.get("provenance") or {}).get("gpu_health")
        if not isinstance(health, dict) or not isinstance(health.get("gpus"), list):
            why = health.get("error") if isinstance(health, dict) and health.get("error") else "not recorded"
            problems.append("%s: no GPU health reading (%s), so its link states and Xid events are unknown"
                            % (label, why))
            continue
        readings.append((label, health))
        for gpu, finding in xid_events(health):
            if finding.get("unknown"):
                problems.append("%s: %s: Xid events unknown: %s" % (label, where(gpu), finding.get("value")))
            elif health.get("xid_since_boot_s") is None:
                problems.append("%s: %s: %s, and the visit's start could not be placed in the kernel log, so they "
                                "may have come between arms" % (label, where(gpu), finding.get("value")))
            else:
                problems.append("%s: %s: a new Xid event during the visit: %s"
                                % (label, where(gpu), finding.get("value")))
    if readings:
        ref_label, ref = readings[0]
        for label, health in readings[1:]:
            for gpu, what, mine, theirs in differences(ref, health):
                problems.append("%s: %s: %s %s, but %s on %s; arms must run on the same links"
                                % (ref_label, where(gpu), what, mine, theirs, label))
    return problems


def verdict(runs, visits, drift_pct=3.0, min_speedup_pct=3.0, throttle_reasons=DEFAULT_THROTTLE_REASONS,
            decision_concurrency=None, require_clean_tree=True, matched_reasons=DEFAULT_MATCHED_REASONS):
    """Judge measured runs against their adjacent fresh baselines.

    runs: [{visit, arm, repeat, concurrency, metrics{output_throughput,...}, gpu_before, gpu_after,
            provenance{sglang_commit, sglang_dirty, nccl_env, driver_version, gpu_health}, started, finished}]
    visits: the plan_arms schedule. A variant visit is compared with the baseline visits right before and after
    it; the comparison is invalid when those two baselines differ by more than drift_pct, when a GPU showed a
    throttle reason before/after any run involved, when a matched reason (the power cap) was seen on one side of
    the comparison but not the other at a concurrency, when requests failed, when the provenance is not the
    same everywhere, or when the GPU health of the runs involved (provenance.gpu_health) shows an Xid event, a
    PCIe link that differs, or could not be read, or when a speculative run has no accept-length reading.

    The decision concurrency is decision_concurrency when given, else the serving concurrency (the visits'
    max_running_requests) when it was measured, else the highest measured. A valid arm is, in this order:
    draft_not_working when its accept length is at most DRAFT_WORKS_ABOVE; rejected when it is slower than the
    baselines by more than min_speedup_pct at any measured concurrency, or not faster by min_speedup_pct at the
    decision concurrency (a gain smaller than the tolerated drift cannot be told from drift); inconclusive when that
    gain is inside the scatter of the repeats (_noise); accepted otherwise.
    """
    mask = throttle_mask(throttle_reasons)
    matched_mask = throttle_mask(matched_reasons)
    both = mask & matched_mask
    if both:
        raise BenchError("a clock event reason cannot both always invalidate and need only to match: %s"
                         % ", ".join(reason_names(both)))
    by_visit = {}
    for run in runs:
        by_visit.setdefault(int(run["visit"]), []).append(run)
    concurrencies = sorted({int(r["concurrency"]) for r in runs})
    if not concurrencies:
        raise BenchError("no measured runs to judge")
    serving = _serving_concurrency(visits)
    decision_concurrency, decision_why = _decision_concurrency(decision_concurrency, serving, concurrencies)

    global_problems = []
    commits = sorted({str((r.get("provenance") or {}).get("sglang_commit")) for r in runs})
    if len(commits) > 1:
        global_problems.append("the SGLang commit changed during the benchmark: %s" % ", ".join(commits))
    envs = sorted({json.dumps((r.get("provenance") or {}).get("nccl_env") or {}, sort_keys=True) for r in runs})
    if len(envs) > 1:
        global_problems.append("the workers' NCCL environment differed between runs: %s" % "; ".join(envs))

    visit_stats = []
    for visit in visits:
        vruns = by_visit.get(visit["index"], [])
        probs = []
        for run in vruns:
            probs.extend(_run_problems(run, mask, require_clean_tree))
        if speculative(visit.get("args")):
            probs.extend(_accept_problems(visit, vruns, concurrencies))
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
                "matched_reasons": matched_reasons_seen([r for r in vruns if int(r["concurrency"]) == conc],
                                                        matched_mask),
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
        comp["problems"].extend(_health_problems(vs, adj, by_visit))
        for conc in concurrencies:
            key = str(conc)
            arm_med = vs["concurrency"][key]["output_throughput"]["median"]
            meds = [b["concurrency"][key]["output_throughput"]["median"] for b in adj]
            meds = [m for m in meds if m is not None]
            entry = {"median": arm_med, "baseline_medians": meds, "baseline_ref": None, "drift_pct": None,
                     "speedup_pct": None}
            mine = vs["concurrency"][key]["matched_reasons"]
            for b in adj:
                theirs = b["concurrency"][key]["matched_reasons"]
                if arm_med is not None and b["concurrency"][key]["output_throughput"]["median"] is not None \
                        and theirs != mine:
                    comp["problems"].append(
                        "visit %d %s at concurrency %d: %s, but %s on baseline visit %d; a power cap must act on "
                        "both sides of a comparison or on neither"
                        % (vs["index"], vs["arm"], conc, ", ".join(mine) or "no matched reason",
                           ", ".join(theirs) or "none", b["index"]))
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
                            "more than the %.1f%% allowed%s"
                            % (vs["index"], vs["arm"], conc, drift, meds[0], meds[1], drift_pct,
                               _scattered_baseline(adj, key, drift_pct)))
            elif arm_med is None:
                comp["problems"].append("visit %d %s: no run at concurrency %d" % (vs["index"], vs["arm"], conc))
            elif adj:
                # baselines ran but not at this concurrency: a speedup against nothing is no figure
                comp["problems"].append("visit %d %s at concurrency %d: no adjacent baseline run to compare with"
                                        % (vs["index"], vs["arm"], conc))
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
            readings = [r["metrics"]["accept_length"] for r in vruns if r["metrics"].get("accept_length")]
            arm["accept_length"] = median(readings) if readings else None
            arm["accept_length_sources"] = sorted({str(r["metrics"]["accept_length_source"]) for r in vruns
                                                   if r["metrics"].get("accept_length_source")})
            arm["flags"] = lossy_settings(next(v.get("args") for v in visits if v["arm"] == name))
            arm["losses"] = [{"concurrency": c, "speedup_pct": pct} for c in concurrencies
                             for pct in [arm["concurrency"][str(c)]["speedup_pct"]]
                             if pct is not None and pct < -min_speedup_pct]
            _decide(arm, comps, visit_stats, decision_concurrency, min_speedup_pct)
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
    summary = "; ".join([summary] + [note for a in arms for note in _notes(a)])
    if not valid:
        summary = "INVALID: " + problems[0] + ("" if len(problems) == 1 else " (+%d more)" % (len(problems) - 1))
    return {
        "valid": valid,
        "winner": winner if valid else None,
        "best_valid_arm": winner,
        "summary": summary,
        "problems": problems,
        "decision_concurrency": decision_concurrency,
        "decision_concurrency_why": decision_why,
        "serving_concurrency": serving,
        "concurrencies": concurrencies,
        "thresholds": {"drift_pct": drift_pct, "min_speedup_pct": min_speedup_pct,
                       "throttle_reasons": list(throttle_reasons), "matched_reasons": list(matched_reasons),
                       "require_clean_tree": require_clean_tree, "draft_works_above": DRAFT_WORKS_ABOVE},
        "baseline_drift_pct": overall_drift,
        "arms": arms,
        "visits": visit_stats,
        "comparisons": comparisons,
    }


def _decide(arm, comps, visit_stats, decision_concurrency, min_speedup_pct):
    """Sets a variant arm's decision (and its reason, when not accepted); the rules are verdict's."""
    sp, key = arm["speedup_pct"], str(decision_concurrency)
    if not arm["valid"]:
        arm["decision"] = "invalid"
        return
    if arm["accept_length"] is not None and arm["accept_length"] <= DRAFT_WORKS_ABOVE:
        arm["decision"] = "draft_not_working"
        arm["reason"] = ("the draft is not working (accept length %.2f): check the algorithm and the draft"
                         % arm["accept_length"])
        return
    if arm["losses"]:
        arm["decision"] = "rejected"
        arm["reason"] = ("%s than the adjacent baselines: a loss beyond %.1f%% at any measured concurrency blocks "
                         "acceptance" % (_losses(arm), min_speedup_pct))
        return
    # a valid arm has a speedup at every concurrency: a comparison without one (no baseline, no run, a baseline at
    # 0 tok/s, which drifts inf %) is invalid
    if sp < min_speedup_pct:
        arm["decision"] = "rejected"
        arm["reason"] = ("%.1f%% vs the adjacent baselines at concurrency %d, below the %.1f%% needed"
                         % (sp, decision_concurrency, min_speedup_pct))
        return
    stats = {v["index"]: v for v in visit_stats}
    noise = [n for n in (_noise(c, stats, key) for c in comps) if n]
    if noise:
        arm["decision"] = "inconclusive"
        arm["reason"] = ("%+.1f%% at concurrency %d is no win yet: %s. Measure again with more repeats "
                         "(sglang_benchmark_repeats: from 6 the band leaves out the extreme ones) or rounds, or find "
                         "what scatters the runs" % (sp, decision_concurrency, "; ".join(noise)))
        return
    arm["decision"] = "accepted"


def _losses(arm):
    return " and ".join("%.1f%% slower at concurrency %d" % (-loss["speedup_pct"], loss["concurrency"])
                        for loss in arm["losses"])


def _notes(arm):
    """What the summary says of a valid variant arm beside the winner: a draft that does not work, a loss at any
    measured concurrency, a gain inside the scatter."""
    notes = []
    if arm.get("decision") in ("draft_not_working", "inconclusive"):
        notes.append("%s: %s" % (arm["name"], arm["reason"]))
    if arm.get("valid") and arm.get("losses"):
        notes.append("%s is %s" % (arm["name"], _losses(arm)))
    return notes


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
