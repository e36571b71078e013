#!/usr/bin/python
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r'''
module: gpu_memory_gate
short_description: Wait until GPU memory is free, or fail naming who holds it
version_added: 0.1.0
description:
  - 'Polls GPU memory until every selected GPU reports at most O(max_used_mib) MiB C(memory.used), then passes;
    after O(timeout) seconds it fails with a message such as
    "GPU 3 still holds 81920 MiB (limit 0): pid 4242 in CT 105".'
  - Replaces C(sleep 3 && nvidia-smi ...) and eyeballing zeros; it returns within one O(poll_interval) of the
    memory reading zero.
  - Fails closed. Unparseable or partial lines, C([N/A]) or C([Not Supported]) figures, a non-zero exit,
    C(No devices were found), NVML or driver errors, another GPU count than O(expected_count), duplicate or
    missing indexes and a hung C(nvidia-smi) each fail the task with the raw output and what to do.
  - Read-only; never reports a change.
extends_documentation_fragment:
  - gpuserve.sglang._attributes
  - gpuserve.sglang._target
  - gpuserve.sglang._gate
attributes:
  check_mode:
    support: full
    details: In check mode the gate reads exactly once and judges that read, without waiting.
seealso:
  - module: gpuserve.sglang.gpu_release
author:
  - gpuserve engineers (@gpuserve)
'''

EXAMPLES = r'''
- name: Wait until all 8 GPUs of the host read 0 MiB
  gpuserve.sglang.gpu_memory_gate:
    expected_count: 8
    timeout: 30

- name: Check the two GPUs passed to CT 105, tolerating a little used memory
  gpuserve.sglang.gpu_memory_gate:
    gpus: [2, 3]
    max_used_mib: 16
  register: gate

- name: Read through NVML (v2 memory info) instead of nvidia-smi
  gpuserve.sglang.gpu_memory_gate:
    backend: nvml
    poll_interval: 0.01

- name: Refuse a GPU that cannot serve (Xid, row remap, ECC, missing), before anything is stopped
  gpuserve.sglang.gpu_memory_gate:
    minors: [0, 1, 2, 3, 4, 5, 6, 7]
    expected_count: 8
    memory: false
    xid_since: "{{ last_verified_start_epoch | default(omit) }}"
    health:
      pcie_link: refuse

- name: Read with the nvidia-smi inside CT 101
  gpuserve.sglang.gpu_memory_gate:
    target: pct
    vmid: 101
'''

RETURN = r'''
gpus:
  description: The checked GPUs as last read.
  returned: when a read succeeded
  type: list
  elements: dict
  contains:
    index:
      description: GPU index as C(nvidia-smi) numbers it.
      type: int
    uuid:
      description: GPU UUID.
      type: str
    used_mib:
      description: C(memory.used) in MiB.
      type: int
    total_mib:
      description: C(memory.total) in MiB.
      type: int
  sample: [{index: 0, uuid: GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7, used_mib: 0, total_mib: 143771}]
passed:
  description: Whether every checked GPU was at or under O(max_used_mib).
  returned: always
  type: bool
polls:
  description: How many reads were made.
  returned: always
  type: int
  sample: 3
elapsed_s:
  description: Seconds from the first read to the last.
  returned: when a read succeeded
  type: float
  sample: 0.112
clear_at_s:
  description:
    - Per-GPU release times, seconds into the gate of each GPU's first read at or under O(max_used_mib),
      keyed by GPU index. A GPU still over the limit is absent.
  returned: when a read succeeded
  type: dict
  version_added: 0.1.0
  sample: {"0": 0.0, "3": 0.162}
raw:
  description: The last raw output read (C(nvidia-smi) stdout, or NVML figures in the same CSV form).
  returned: always
  type: str
  sample: "0, GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7, 0, 143771\n"
backend:
  description: The backend that read, V(nvidia-smi) or V(nvml).
  returned: always
  type: str
max_used_mib:
  description: The limit applied.
  returned: always
  type: int
holders:
  description: Compute processes on the GPUs over the limit, when the gate failed on memory.
  returned: on failure, when O(name_holders=true)
  type: list
  elements: dict
  contains:
    gpu:
      description: GPU index.
      type: int
    pid:
      description: PID as C(nvidia-smi) reports it (host PID namespace when read on the host).
      type: int
    used_mib:
      description: Memory the process uses on that GPU, in MiB.
      type: int
    container:
      description: V(CT 105), V(the host), V(the LXC monitor of CT 105), or V(null) when unknown.
      type: str
  sample: [{gpu: 3, pid: 4242, used_mib: 81920, container: CT 105}]
health:
  description: The health stage's result, when O(health) was given.
  returned: when O(health) is set and its reads succeeded
  type: dict
  version_added: 0.1.0
  contains:
    passed:
      description: Whether no check under V(refuse) found anything (or read unknown).
      type: bool
    checks:
      description: The action of every check, defaults filled in.
      type: dict
    gpus:
      description:
        - Each selected GPU as read; a value the driver could not give is V(null).
        - C(pcie) holds C(gen), C(gen_max), C(width), C(width_max); C(clock_reasons) is the bit mask as a number.
      type: list
      elements: dict
    findings:
      description: Each check that found something or read unknown and is not ignored, with its GPU.
      type: list
      elements: dict
      contains:
        gpu:
          description: The GPU index, V(null) for a finding about the host (a missing GPU).
          type: int
        bus_id:
          description: The GPU's PCI bus id.
          type: str
        uuid:
          description: The GPU UUID.
          type: str
        check:
          description: The check's name, a key of O(health).
          type: str
        value:
          description: What was read.
          type: str
        action:
          description: V(refuse) or V(warn).
          type: str
        unknown:
          description: Whether the value could not be read.
          type: bool
        message:
          description: The GPU, the check, the value and what to do.
          type: str
    refused:
      description: The messages of the findings under V(refuse).
      type: list
      elements: str
    warnings:
      description: The messages of the findings under V(warn) (also shown as warnings).
      type: list
      elements: str
    kernel_log:
      description: V(read), or why the kernel log could not be read; V(null) when no Xid check ran.
      type: str
    xid_since_boot_s:
      description: O(xid_since) as seconds after boot, as the kernel log counts; V(null) for since boot.
      type: float
    raw:
      description: The health query's raw output.
      type: str
  sample:
    passed: false
    findings:
      - gpu: 3
        bus_id: "0000:3b:00.0"
        check: xid
        action: refuse
        message: "GPU 3 (bus 0000:3b:00.0): xid: 1 Xid event(s) since boot (codes 79), last: Xid 79 ..."
memory:
  description: "V(not checked (memory: false)) when the memory poll was not run."
  returned: when O(memory=false)
  type: str
rc:
  description: Exit code of the C(nvidia-smi) call that failed.
  returned: when a read failed
  type: int
stderr:
  description: Standard error of the C(nvidia-smi) call that failed.
  returned: when a read failed
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS, GateFailed, run_gate
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import TARGET_ARGS, TARGET_REQUIRED_IF


def main():
    module = AnsibleModule(argument_spec=dict(**TARGET_ARGS, **GATE_ARGS), required_if=TARGET_REQUIRED_IF,
                           supports_check_mode=True)
    try:
        module.exit_json(changed=False, **run_gate(module, module.params, module.check_mode))
    except GateFailed as exc:
        module.fail_json(msg=exc.msg, changed=False, **exc.result)


if __name__ == '__main__':
    main()
