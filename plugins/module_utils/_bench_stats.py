# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Statistics of the benchmark's measurements (median, spread, stdev): private to this collection."""

from __future__ import annotations

import math

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import BenchError


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
