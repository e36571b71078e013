#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench_report
short_description: Judge an SGLang A/B benchmark and write its report (JSON, Markdown, PNG chart)
version_added: "0.1.0"
description:
  - Computes the verdict over the measured runs - median and spread per arm, speedup against the two adjacent
    fresh baselines, invalid when those baselines drift more than O(drift_pct), a GPU showed a throttle reason
    (or a matched reason on one side of a comparison only),
    requests failed, or the SGLang commit, tree or worker NCCL environment was not the same everywhere.
  - Writes C(results.json), C(report.md) and C(chart.png) (a dependency-free PNG of tok/s per visit with min-max
    whiskers) into O(dest), then decodes the PNG it wrote to prove it opens.
  - Meant for the controller, delegated to C(localhost).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  dest:
    description: Report directory; created if missing.
    type: path
    required: true
  runs:
    description: Measured runs as the sglang_benchmark role records them.
    type: list
    elements: dict
    required: true
  visits:
    description: The schedule from the P(gpuserve.sglang.bench_plan#filter) filter.
    type: list
    elements: dict
    required: true
  drift_pct:
    description: Largest allowed difference between the two baselines around a variant, in percent.
    type: float
    default: 3.0
  min_speedup_pct:
    description: Smallest speedup over the adjacent baselines for an arm to be accepted, in percent.
    type: float
    default: 3.0
  throttle_reasons:
    description:
      - Clock event reasons that invalidate every comparison a run that saw them belongs to (thermal and hardware
        slowdowns).
      - A reason may not be in both this list and O(matched_reasons).
    type: list
    elements: str
    default: [hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown]
  matched_reasons:
    description:
      - Clock event reasons that invalidate a comparison only when they differ between a variant and one of its
        adjacent baselines, at the same concurrency (each side's reasons are those any GPU showed before or after
        any of its runs).
      - The power cap engages on every heavily loaded H200; when it acts on both sides alike, the comparison is
        made at the same ceiling.
    type: list
    elements: str
    default: [sw_power_cap]
  decision_concurrency:
    description:
      - Concurrency whose figures decide.
      - Default the serving concurrency, the arms' C(max_running_requests) in O(visits), when it was measured,
        else the highest measured; the verdict's C(decision_concurrency_why) says which and why.
    type: int
  require_clean_tree:
    description: A dirty SGLang tree invalidates the benchmark.
    type: bool
    default: true
  meta:
    description: Free-form facts recorded in the report (timestamp, client, dataset, host, ...).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: In check mode the verdict is computed and nothing is written.
"""

EXAMPLES = r"""
- name: Judge and report
  gpuserve.sglang.sglang_bench_report:
    dest: "artifacts/benchmark/{{ ts }}"
    runs: "{{ runs }}"
    visits: "{{ visits }}"
  delegate_to: localhost
  run_once: true
  register: report
"""

RETURN = r"""
verdict:
  description:
    - valid, winner (V(null) when invalid), best_valid_arm, summary, problems, decision_concurrency,
      decision_concurrency_why, serving_concurrency, arms, comparisons, visits.
    - Each variant arm's decision is V(accepted), V(rejected), V(inconclusive) (a gain inside the scatter of the
      repeats), V(draft_not_working) (accept length at most 1.05) or V(invalid), with its reason, accept_length,
      accept_length_sources, losses and flags (lossy or adaptive speculative settings).
  returned: always
  type: dict
files:
  description: Paths written (json, markdown, png).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_report import REPORT_ARGS, ReportError, write_report


def main():
    module = AnsibleModule(argument_spec=REPORT_ARGS, supports_check_mode=True)
    try:
        changed, verdict, files = write_report(module.params, module.check_mode)
    except ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=changed, verdict=verdict, files=files)


if __name__ == "__main__":
    main()
