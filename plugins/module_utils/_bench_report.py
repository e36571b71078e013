# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark report rendering (JSON document, Markdown, PNG chart): private to this collection.

Pure functions of the verdict and the runs, and the body of the sglang_bench_report module (write_report),
which judges the runs and writes what the renderers return.
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import (
    BASELINE,
    DEFAULT_MATCHED_REASONS,
    DEFAULT_THROTTLE_REASONS,
    BenchError,
)
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_png import (
    GLYPH_H,
    Canvas,
    decode_png,
    text_width,
)
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_verdict import verdict as judge
from ansible_collections.gpuserve.sglang.plugins.module_utils._health_drift import link, where, xid_events

REPORT_FORMAT = 1

COLORS = {
    "baseline": (140, 140, 140),
    "accepted": (46, 139, 87),
    "rejected": (230, 145, 30),
    "inconclusive": (200, 180, 60),
    "draft_not_working": (130, 60, 160),
    "invalid": (200, 40, 40),
    "axis": (40, 40, 40),
    "grid": (225, 225, 225),
    "whisker": (0, 0, 0),
    "text": (20, 20, 20),
}
# The chart's legend: a visit's colour is its arm's decision
LEGEND = ("baseline", "accepted", "rejected", "inconclusive", "draft_not_working", "invalid")


def build_document(verdict, runs, visits, meta):
    """The results JSON: everything needed to re-judge the benchmark later, provenance with every figure."""
    return {
        "format": REPORT_FORMAT,
        "meta": meta,
        "verdict": {k: verdict[k] for k in ("valid", "winner", "best_valid_arm", "summary", "problems",
                                            "decision_concurrency", "decision_concurrency_why", "serving_concurrency",
                                            "concurrencies", "thresholds", "baseline_drift_pct")},
        "arms": verdict["arms"],
        "comparisons": verdict["comparisons"],
        "visits": [dict(v, stats=s) for v, s in zip(_strip_args(visits), verdict["visits"])],
        "runs": runs,
    }


def _strip_args(visits):
    return [{"index": v["index"], "arm": v["arm"], "kind": v["kind"], "round": v.get("round", 1),
             "server_args": v["args"]} for v in visits]


def render_json(document):
    return json.dumps(document, indent=2, sort_keys=True, default=str) + "\n"


def _f(value, fmt="%.2f"):
    return "-" if value is None else fmt % value


def _table(header, rows):
    """Markdown table lines: header, separator, one line per row."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in rows])


def _decision(arm):
    return "baseline" if arm["name"] == BASELINE else arm.get("decision", "-")


def _words(code):
    return code.replace("_", " ")


def render_markdown(verdict, runs, meta):
    concs = verdict["concurrencies"]
    dc = verdict["decision_concurrency"]
    out = ["# SGLang benchmark %s" % meta.get("timestamp", ""), ""]
    out.append("**Verdict: %s**" % verdict["summary"])
    out.append("")
    th = verdict["thresholds"]
    out.append("Decision at concurrency %d, %s; an arm must be at least %.1f%% faster than the mean of its two "
               "adjacent fresh baselines, which may drift at most %.1f%%, with the gain outside the scatter of the "
               "repeats, and no more than %.1f%% slower at any measured concurrency; an accept length at or below "
               "%.2f is a draft that does not work; throttle reasons that invalidate: %s; "
               "reasons that must match between a variant and its baselines: %s. "
               "Baseline drift over the whole benchmark: %.1f%%."
               % (dc, verdict["decision_concurrency_why"], th["min_speedup_pct"], th["drift_pct"],
                  th["min_speedup_pct"], th["draft_works_above"], ", ".join(th["throttle_reasons"]) or "none",
                  ", ".join(th["matched_reasons"]) or "none", verdict["baseline_drift_pct"]))
    out.append("")
    header = ["arm", "decision"]
    for c in concs:
        header += ["c=%d tok/s median (min-max, n)" % c, "c=%d speedup" % c, "c=%d accept len" % c,
                   "c=%d TPOT ms" % c]
    rows = []
    for arm in verdict["arms"]:
        row = [arm["name"], _words(_decision(arm))]
        for c in concs:
            e = arm["concurrency"].get(str(c), {})
            t = e.get("output_throughput", {})
            row.append("%s (%s-%s, %s)" % (_f(t.get("median")), _f(t.get("min")), _f(t.get("max")), t.get("n", 0)))
            row.append("-" if arm["name"] == BASELINE else _f(e.get("speedup_pct"), "%+.1f%%"))
            row.append(_f((e.get("accept_length") or {}).get("median")))
            row.append(_f((e.get("mean_tpot_ms") or {}).get("median")))
        rows.append(row)
    out += _table(header, rows)
    out += ["", "## Decisions", ""] + _decision_lines(verdict)
    out += ["", "## Visits (in the order run)", ""]
    header = ["#", "arm", "round"] + ["c=%d median tok/s (spread)" % c for c in concs] + ["problems"]
    rows = []
    for v in verdict["visits"]:
        row = [str(v["index"]), v["arm"], str(v["round"])]
        for c in concs:
            t = v["concurrency"][str(c)]["output_throughput"]
            row.append("%s (%s%%)" % (_f(t["median"]), _f(t["spread_pct"], "%.1f")))
        row.append("; ".join(v["problems"]) or "-")
        rows.append(row)
    out += _table(header, rows)
    out += ["", "## Comparisons with the adjacent baselines", ""]
    header = ["visit", "arm", "baselines"] + ["c=%d drift / speedup" % c for c in concs] + ["valid"]
    rows = []
    for comp in verdict["comparisons"]:
        row = [str(comp["visit"]), comp["arm"], ",".join(str(i) for i in comp["baseline_visits"])]
        for c in concs:
            e = comp["concurrency"].get(str(c), {})
            row.append("%s / %s" % (_f(e.get("drift_pct"), "%.1f%%"), _f(e.get("speedup_pct"), "%+.1f%%")))
        row.append("yes" if comp["valid"] else "no")
        rows.append(row)
    out += _table(header, rows)
    if verdict["problems"]:
        out += ["", "## Problems", ""] + ["- " + p for p in verdict["problems"]]
    out += ["", "## Provenance", ""]
    out += _provenance_lines(runs, meta)
    out += ["", "Chart: `%s`. Full data: `%s`." % (meta.get("chart", "chart.png"), meta.get("json", "results.json")), ""]
    return "\n".join(out)


def _decision_lines(verdict):
    """One line per variant arm: its decision and why, its accept length and where it was read, the settings that
    make its verification lossy or its steps change."""
    lines = []
    for arm in verdict["arms"]:
        if arm["name"] == BASELINE:
            continue
        why = arm.get("reason") or ("; ".join(arm["problems"]) if arm["decision"] == "invalid" else
                                    "%+.1f%% at concurrency %d" % (arm["speedup_pct"], verdict["decision_concurrency"]))
        accept = "none" if arm["accept_length"] is None else "%.2f%s" % (
            arm["accept_length"], " (%s)" % ", ".join(arm["accept_length_sources"])
            if arm["accept_length_sources"] else "")
        lines.append("- %s: %s: %s. Accept length %s. Lossy or adaptive settings: %s."
                     % (arm["name"], _words(arm["decision"]), why, accept, "; ".join(arm["flags"]) or "none"))
    return lines


def _provenance_lines(runs, meta):
    lines = []
    commits = sorted({"%s%s" % ((r.get("provenance") or {}).get("sglang_commit"),
                                " (dirty)" if (r.get("provenance") or {}).get("sglang_dirty") else "") for r in runs})
    drivers = sorted({str((r.get("provenance") or {}).get("driver_version")) for r in runs})
    envs = sorted({json.dumps((r.get("provenance") or {}).get("nccl_env") or {}, sort_keys=True) for r in runs})
    lines.append("- SGLang commit: %s" % ", ".join(commits))
    lines.append("- driver: %s" % ", ".join(drivers))
    lines.append("- worker NCCL env: %s" % "; ".join("`%s`" % e for e in envs))
    gpus = [g for r in runs for key in ("gpu_before", "gpu_after") for g in (r.get(key) or [])]
    if gpus:
        lines.append("- GPU state over all measured runs (before and after each): SM clock %d-%d MHz, "
                     "temperature %d-%d C, power %.0f-%.0f W, pstates %s, reasons seen: %s"
                     % (min(g["clocks_sm_mhz"] for g in gpus), max(g["clocks_sm_mhz"] for g in gpus),
                        min(g["temperature_c"] for g in gpus), max(g["temperature_c"] for g in gpus),
                        min(g["power_w"] for g in gpus), max(g["power_w"] for g in gpus),
                        ",".join(sorted({g["pstate"] for g in gpus})),
                        ",".join(sorted({n for g in gpus for n in g["clocks_event_reason_names"]})) or "none"))
    readings = [h for h in ((r.get("provenance") or {}).get("gpu_health") for r in runs) if h is not None]
    if readings:
        links = sorted({"%s %s" % (where(g), link(g) or "unknown") for h in readings for g in h.get("gpus") or ()})
        xids = sorted({"%s: %s" % (where(g), f.get("value")) for h in readings for g, f in xid_events(h)})
        unread = sorted({h["error"] for h in readings if h.get("error")})
        lines.append("- GPU health after each run: PCIe links %s; Xid events: %s%s"
                     % ("; ".join(links) or "none listed", "; ".join(xids) or "none",
                        "; not read: %s" % "; ".join(unread) if unread else ""))
    if runs:
        lines.append("- measured runs: %d, from %s to %s" % (len(runs), min(r["started"] for r in runs),
                                                             max(r["finished"] for r in runs)))
    for key in ("client", "dataset_path", "tokenizer", "num_prompts", "input_len", "output_len", "host"):
        if meta.get(key) is not None:
            lines.append("- %s: `%s`" % (key, meta[key]))
    return lines


def render_png(verdict, title="SGLang output tok/s per visit (median, min-max)"):
    """Bar chart: one panel per concurrency, one bar per visit in run order (so drift shows), whiskers min-max."""
    visits = verdict["visits"]
    concs = verdict["concurrencies"]
    decisions = {a["name"]: _decision(a) for a in verdict["arms"]}
    slot = max(70, max(text_width(v["arm"][:14]) for v in visits) + 10) if visits else 70
    left, right, top = 70, 20, 40
    panel_h, gap = 240, 60
    legend_w = sum(12 + text_width(_words(key)) + 10 for key in LEGEND)
    width = max(left + right + slot * max(1, len(visits)), left + legend_w)
    height = top + len(concs) * (panel_h + gap) + 40
    cv = Canvas(width, height)
    cv.text(left, 12, title, COLORS["text"], scale=2 if text_width(title, 2) < width - left else 1)
    for p, conc in enumerate(concs):
        y0 = top + p * (panel_h + gap) + 20
        y1 = y0 + panel_h  # baseline of the bars
        vals = [v["concurrency"][str(conc)]["output_throughput"] for v in visits]
        vmax = max([t["max"] for t in vals if t["max"] is not None] or [1.0]) * 1.15
        cv.text(left, y0 - 14, "concurrency %d" % conc, COLORS["text"])
        for k in range(0, 5):
            gy = y1 - panel_h * k / 4.0
            cv.hline(left, width - right, int(gy), COLORS["grid"])
            label = "%.1f" % (vmax * k / 4.0)
            cv.text(left - 6 - text_width(label), int(gy) - GLYPH_H // 2, label, COLORS["text"])
        cv.vline(left, y0, y1, COLORS["axis"])
        cv.hline(left, width - right, y1, COLORS["axis"])

        def ypix(val):
            return y1 - panel_h * (val / vmax if vmax else 0.0)

        for i, (visit, st) in enumerate(zip(visits, vals)):
            x0 = left + i * slot + 8
            x1 = left + (i + 1) * slot - 8
            if visit["kind"] == "baseline":
                color = COLORS["baseline"]
            else:
                color = COLORS.get(decisions.get(visit["arm"]), COLORS["rejected"])
            if visit["problems"]:
                color = COLORS["invalid"]
            if st["median"] is not None:
                cv.rect(x0, ypix(st["median"]), x1, y1 - 1, color)
                xm = (x0 + x1) // 2
                cv.vline(xm, ypix(st["max"]), ypix(st["min"]), COLORS["whisker"], width=2)
                cv.hline(xm - 6, xm + 6, int(ypix(st["max"])), COLORS["whisker"], width=2)
                cv.hline(xm - 6, xm + 6, int(ypix(st["min"])), COLORS["whisker"], width=2)
                label = "%.1f" % st["median"]
                cv.text(xm - text_width(label) // 2, int(ypix(st["max"])) - GLYPH_H - 4, label, COLORS["text"])
            name = visit["arm"][:14]
            cv.text((x0 + x1) // 2 - text_width(name) // 2, y1 + 6, name, COLORS["text"])
            tag = "#%d" % visit["index"]
            cv.text((x0 + x1) // 2 - text_width(tag) // 2, y1 + 6 + GLYPH_H + 3, tag, COLORS["text"])
    legend_y = height - 16
    x = left
    for key in LEGEND:
        cv.rect(x, legend_y, x + 8, legend_y + GLYPH_H - 1, COLORS[key])
        x += 12 + cv.text(x + 12, legend_y, _words(key), COLORS["text"]) + 10
    return cv.png()


REPORT_ARGS = dict(
    dest=dict(type="path", required=True),
    runs=dict(type="list", elements="dict", required=True),
    visits=dict(type="list", elements="dict", required=True),
    drift_pct=dict(type="float", default=3.0),
    min_speedup_pct=dict(type="float", default=3.0),
    throttle_reasons=dict(type="list", elements="str", default=list(DEFAULT_THROTTLE_REASONS)),
    matched_reasons=dict(type="list", elements="str", default=list(DEFAULT_MATCHED_REASONS)),
    decision_concurrency=dict(type="int"),
    require_clean_tree=dict(type="bool", default=True),
    meta=dict(type="dict", default={}),
)
REPORT_FILES = (("json", "results.json"), ("markdown", "report.md"), ("png", "chart.png"))


class ReportError(Exception):
    """The runs cannot be judged; nothing was written."""


def write_report(params, check_mode=False):
    """Judges params' runs and writes the three files into dest (only those whose bytes differ; nothing in check
    mode). Returns (changed, verdict, {kind: path})."""
    try:
        result = judge(params["runs"], params["visits"], drift_pct=params["drift_pct"],
                       min_speedup_pct=params["min_speedup_pct"], throttle_reasons=params["throttle_reasons"],
                       decision_concurrency=params["decision_concurrency"],
                       require_clean_tree=params["require_clean_tree"], matched_reasons=params["matched_reasons"])
    except (BenchError, KeyError, TypeError) as exc:
        raise ReportError("cannot judge the runs: %s" % exc) from None
    files = {kind: os.path.join(params["dest"], name) for kind, name in REPORT_FILES}
    meta = dict(params["meta"], json="results.json", chart="chart.png")
    payload = {
        "json": render_json(build_document(result, params["runs"], params["visits"], meta)).encode("utf-8"),
        "markdown": render_markdown(result, params["runs"], meta).encode("utf-8"),
        "png": render_png(result),
    }
    decode_png(payload["png"])  # a chart that does not decode is a bug, not a report
    if check_mode:
        return False, result, files
    os.makedirs(params["dest"], exist_ok=True)
    changed = False
    for kind, path in files.items():
        old = None
        if os.path.exists(path):
            with open(path, "rb") as handle:
                old = handle.read()
        if old != payload[kind]:
            tmp = path + ".tmp"
            with open(tmp, "wb") as handle:
                handle.write(payload[kind])
            os.replace(tmp, path)
            changed = True
    return changed, result, files
