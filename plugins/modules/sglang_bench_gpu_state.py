#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench_gpu_state
short_description: GPU clocks, temperature, power, pstate and clock event (throttle) reasons, parsed strictly
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_event_reasons.active,pstate
    --format=csv,noheader,nounits) and C(--query-gpu=driver_version) and returns one record per GPU.
  - Fails closed, quoting the raw line, on anything it cannot read as numbers (V([N/A]), driver errors, a field count
    other than seven, fewer GPUs than expected), because a benchmark figure is never recorded without the GPU state.
  - Read-only; always returns C(changed=false). Runs where nvidia-smi sees the GPUs (the PVE host).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
  - gpuserve.sglang._attributes.info_module
options:
  nvidia_smi:
    description: nvidia-smi executable.
    type: path
    default: nvidia-smi
  nvidia_smi_timeout:
    description: Seconds one C(nvidia-smi) call may take (coreutils C(timeout)); a hung driver fails the task.
    type: float
    default: 10.0
    version_added: "0.2.0"
  gpus:
    description: GPU indexes to query (C(--id)); empty for all.
    type: list
    elements: int
    default: []
  min_count:
    description: Fail when fewer GPUs answer (a minimum; the gate's O(gpuserve.sglang.gpu_memory_gate#module:expected_count)
      is exact); V(0) to skip.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: GPU state before a measured run
  gpuserve.sglang.sglang_bench_gpu_state:
    min_count: 8
  delegate_to: "{{ gpuserve_pve_host }}"
  register: gpu_before
"""

RETURN = r"""
gpus:
  description: Per GPU index, clocks_sm_mhz, clocks_mem_mhz, temperature_c, power_w, clocks_event_reasons (int),
    clocks_event_reasons_hex, clocks_event_reason_names, pstate.
  returned: success
  type: list
  elements: dict
driver_version:
  description: Driver version reported by nvidia-smi.
  returned: success
  type: str
time:
  description: UTC time of the query (ISO 8601).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_gpu_state import GPU_STATE_ARGS, run_module


def main():
    run_module(AnsibleModule(argument_spec=GPU_STATE_ARGS, supports_check_mode=True))


if __name__ == "__main__":
    main()
