# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Statistics of the benchmark's measurements (median, spread, stdev, the band of a median): private to this
collection."""

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


# How sure the band of a median is (median_band). At the 3 repeats the benchmark runs by default the range of the
# repeats is the narrowest interval that holds the median this often, so the band is the range up to 5 repeats and
# leaves out the extreme repeats from 6 on: more repeats narrow it, as they narrow what the median may be.
BAND_CONFIDENCE = 0.75


def _coverage(n, k):
    """How often the k-th smallest to the k-th largest of n repeats holds their population's median:
    1 - 2 P(Binomial(n, 1/2) <= k - 1), whatever the distribution."""
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / 2.0 ** n


def median_band(values):
    """(low, high): the k-th smallest to the k-th largest value, k the largest whose interval holds the median with
    BAND_CONFIDENCE (distribution-free, from order statistics); the range when no narrower one does. (None, None)
    for no values."""
    vals = sorted(float(v) for v in values)
    if not vals:
        return None, None
    k = 1
    # at or past the middle the coverage is 0 or less: the loop ends there
    while _coverage(len(vals), k + 1) >= BAND_CONFIDENCE:
        k += 1
    return vals[k - 1], vals[-k]
