# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's progress line (done / total runs, ETA): private to this collection."""

from __future__ import annotations

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_stats import summarize


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
