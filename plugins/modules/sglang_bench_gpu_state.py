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
  - ansible.builtin.action_common_attributes
options:
  nvidia_smi:
    description: nvidia-smi executable.
    type: path
    default: nvidia-smi
  gpus:
    description: GPU indexes to query (C(--id)); empty for all.
    type: list
    elements: int
    default: []
  expected_count:
    description: Fail when fewer GPUs answer; V(0) to skip.
    type: int
    default: 0
attributes:
  check_mode:
    support: full
    details: Read-only, runs in check mode too.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: GPU state before a measured run
  gpuserve.sglang.sglang_bench_gpu_state:
    expected_count: 8
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

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import CLOCKS_QUERY_ARGV, BenchError, parse_gpu_clocks


def gpu_state(module):
    p = module.params
    select = ["--id=" + ",".join(str(i) for i in p["gpus"])] if p["gpus"] else []
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rc, out, err = module.run_command([p["nvidia_smi"]] + list(CLOCKS_QUERY_ARGV) + select)
    if rc != 0:
        module.fail_json(msg="nvidia-smi clocks query exited %d: %s" % (rc, (out + err).strip()[:500]))
    try:
        gpus = parse_gpu_clocks(out)
    except BenchError as exc:
        module.fail_json(msg=str(exc))
    if p["expected_count"] and len(gpus) < p["expected_count"]:
        module.fail_json(msg="nvidia-smi answered for %d GPUs, expected %d: %r" % (len(gpus), p["expected_count"], out))
    rc, dout, derr = module.run_command([p["nvidia_smi"], "--query-gpu=driver_version", "--format=csv,noheader"] + select)
    versions = sorted({ln.strip() for ln in dout.splitlines() if ln.strip()})
    if rc != 0 or len(versions) != 1 or not versions[0][:1].isdigit():
        module.fail_json(msg="nvidia-smi driver_version query gave rc %d: %r" % (rc, (dout + derr)[:500]))
    module.exit_json(changed=False, gpus=gpus, driver_version=versions[0], time=now)


def main():
    module = AnsibleModule(argument_spec=dict(
        nvidia_smi=dict(type="path", default="nvidia-smi"),
        gpus=dict(type="list", elements="int", default=[]),
        expected_count=dict(type="int", default=0),
    ), supports_check_mode=True)
    gpu_state(module)


if __name__ == "__main__":
    main()
