# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the sglang_benchmark role: the arm schedule and the per-arm progress line."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import BenchError, plan_arms
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_progress import progress_line


def bench_plan(server_args, arms, max_running_requests, baseline_args=None, rounds=1):
    """sglang_server_args + arms -> visits [{index, arm, kind, round, args}] in the order A B A C A."""
    try:
        return plan_arms(server_args, arms, max_running_requests, baseline_args=baseline_args, rounds=rounds)
    except BenchError as exc:
        raise AnsibleFilterError("bench_plan: %s" % exc)


def bench_progress(visits, runs, visit_index, elapsed_s):
    """One progress line after a visit, with an ETA from the mean visit time so far."""
    try:
        return progress_line(visits, runs, int(visit_index), float(elapsed_s))
    except (BenchError, KeyError, IndexError) as exc:
        raise AnsibleFilterError("bench_progress: %s" % exc)


class FilterModule:
    def filters(self):
        return {"bench_plan": bench_plan, "bench_progress": bench_progress}
