# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the zero-memory gate (module_utils/_gate.py GATE_ARGS), written once: gpu_memory_gate takes them as its
own options (DOCUMENTATION), gpu_release as the suboptions of its gate (RELEASE, the same text with each O() made
O(gate.NAME)). Private to this collection."""
from __future__ import annotations

import re

# The gate's options at the top level; O(NAME) names one of them (or of the runner's target, which the release's gate
# has too)
GATE_OPTIONS = r'''
  gpus:
    description:
      - GPU indexes (as C(nvidia-smi) numbers them) to check. Empty checks every GPU.
      - Every index given must be listed by C(nvidia-smi), else the gate fails.
    type: list
    elements: int
    default: []
  minors:
    description:
      - The GPUs to check by device minor, the N of C(/dev/nvidiaN) (what a container's C(devN) entries pass
        in). Each is mapped to its GPU through the driver's O(gpu_info_root) (C(Device Minor) and C(GPU UUID)),
        then found in C(nvidia-smi)'s list by UUID, since C(nvidia-smi)'s index follows PCI bus order and the
        minor the driver's probe order; they differ on some hosts.
      - Only with O(target=local) (the PVE host). Not together with O(gpus). Empty selects by O(gpus).
      - A minor the driver does not list, or a GPU C(nvidia-smi) does not list, fails the gate.
    type: list
    elements: int
    default: []
  gpu_info_root:
    description:
      - Where the driver lists its GPUs, one C(<bus id>/information) file each. Only read with O(minors).
    type: str
    default: /proc/driver/nvidia/gpus
  expected_count:
    description:
      - How many GPUs C(nvidia-smi) must list in total (before O(gpus) selects). Any other count fails the
        gate, since a GPU that fell off the bus must not look like a free one.
      - Unset, any count of at least one GPU is accepted.
    type: int
  max_used_mib:
    description:
      - Highest C(memory.used) in MiB each checked GPU may report for the gate to pass.
      - C(nvidia-smi) (and NVML v2) report V(0) on an idle GPU; NVML v1 would not (it counts reserved memory).
    type: int
    default: 0
  timeout:
    description:
      - Seconds to keep polling before the gate fails, naming what still holds memory.
      - V(0) reads once.
    type: float
    default: 30
  poll_interval:
    description:
      - Seconds between reads. One C(nvidia-smi) read takes about 20 ms on an H200.
    type: float
    default: 0.05
  backend:
    description:
      - V(nvidia-smi) runs C(nvidia-smi --query-gpu=index,uuid,memory.used,memory.total
        --format=csv,noheader,nounits) once per poll, in the target.
      - V(nvml) reads through nvidia-ml-py (C(pynvml)) in the module process, using only v2 memory info.
        Only with O(target=local); fails when C(pynvml) or its C(nvmlMemory_v2) is missing.
    type: str
    choices: [nvidia-smi, nvml]
    default: nvidia-smi
  nvidia_smi:
    description:
      - Path or name of C(nvidia-smi) in the target.
    type: str
    default: nvidia-smi
  nvidia_smi_timeout:
    description:
      - Seconds one C(nvidia-smi) call may take; a hung call fails the gate (check C(dmesg) for Xid errors).
    type: float
    default: 10
  name_holders:
    description:
      - On failure, list the compute processes on the GPUs still over the limit
        (C(nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory)), each with the container it runs in, read
        from C(/proc/PID/cgroup) (Proxmox C(/lxc/VMID/), LXC C(lxc.payload.NAME)). Container names are only known
        when the gate reads on this host (O(target=local)).
    type: bool
    default: true
  health:
    description:
      - The health stage, run before the memory poll on the GPUs the gate selects. One C(nvidia-smi --query-gpu)
        of the PCIe link, ECC, row remapping, clock event reasons and persistence mode (or NVML with
        O(backend=nvml)), and the Xid events of the host kernel log (O(dmesg)), attributed to each GPU by bus id.
      - Each check is V(refuse) (the gate fails, naming the GPU by index and bus id, the check, the value and what
        to do), V(warn) (a warning, the gate goes on) or V(ignore). The defaults refuse what makes a launch fail
        or compute wrong and warn on what only slows.
      - A value the driver cannot give (C([N/A]), C([Not Supported]), an NVML error, a kernel log that cannot be
        read) is unknown, never healthy; under V(refuse) it refuses, saying it is unknown.
      - Unset, there is no health stage. V({}) runs it with every default below.
      - Refused by the health stage, the gate reads no memory. M(gpuserve.sglang.gpu_release) runs its gate after
        the kill; to refuse before anything is stopped, run M(gpuserve.sglang.gpu_memory_gate) with
        O(gpuserve.sglang.gpu_memory_gate#module:memory=false) first (the sglang_server role does).
    type: dict
    suboptions:
      xid:
        description:
          - A fatal Xid (48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154; double bit ECC, row remap
            pending or failed, NVLink, fallen off the bus, contained or uncontained ECC, GSP errors, recovery
            needed) logged by the host kernel for this GPU (by bus id) since O(xid_since), else since boot. A kernel
            log that cannot be read is unknown.
        type: str
        choices: [refuse, warn, ignore]
        default: refuse
      xid_other:
        description:
          - Any other Xid for this GPU in that time (often an application fault, such as 13, 31, 43 or 45).
        type: str
        choices: [refuse, warn, ignore]
        default: warn
      row_remap:
        description:
          - Remapped rows pending or failed (C(remapped_rows.pending), C(remapped_rows.failure)); on a GPU without
            row remapping, retired pages pending (C(retired_pages.pending)).
        type: str
        choices: [refuse, warn, ignore]
        default: refuse
      ecc:
        description:
          - Volatile uncorrectable ECC errors (C(ecc.errors.uncorrected.volatile.total) above 0). A GPU with ECC off
            reads it as unknown.
        type: str
        choices: [refuse, warn, ignore]
        default: refuse
      missing:
        description:
          - A GPU expected by O(expected_count), O(gpus) or O(minors) that C(nvidia-smi) does not list.
        type: str
        choices: [refuse, warn, ignore]
        default: refuse
      pcie_link:
        description:
          - The PCIe link below its max generation or width (C(pcie.link.gen.current) and C(pcie.link.width.current)
            against their C(.max)). Some GPUs lower the link generation at idle to save power; then set V(ignore).
        type: str
        choices: [refuse, warn, ignore]
        default: warn
      persistence:
        description:
          - Persistence mode off.
        type: str
        choices: [refuse, warn, ignore]
        default: warn
      clocks:
        description:
          - A thermal or power slowdown in C(clocks_event_reasons.active) while the gate runs (the GPU idle), such
            as SW power cap, HW slowdown, SW or HW thermal slowdown, HW power brake.
        type: str
        choices: [refuse, warn, ignore]
        default: warn
  memory:
    description:
      - Whether to run the zero-memory poll. V(false) runs the health stage only (a preflight before anything
        is stopped, while the server still holds the GPUs).
    type: bool
    default: true
  dmesg:
    description:
      - Path or name of C(dmesg), whose output the health stage searches for C(NVRM) Xid lines. It needs root
        or C(kernel.dmesg_restrict=0); inside an unprivileged container it usually fails, and the Xid checks then
        read unknown.
    type: str
    default: dmesg
  xid_since:
    description:
      - Wall-clock time (seconds since the epoch) before which an Xid no longer counts, such as the last
        verified start or a GPU reset. The kernel log's stamps are placed with the host's boot time
        (C(/proc/stat) C(btime), read only with O(target=local)); unset, or not on this host, every Xid since
        boot counts.
    type: float
'''


def _indent(text, spaces):
    return "".join((" " * spaces + line) if line.strip() else line for line in text.splitlines(True))


def _in_gate(text):
    """The options as suboptions of gpu_release's gate: every O() reference of this collection's own made O(gate.X)."""
    return re.sub(r"O\((?!gpuserve\.)", "O(gate.", text)


class ModuleDocFragment:
    """DOCUMENTATION and RELEASE are computed from GATE_OPTIONS below the class: ansible-test's yamllint sanity test
    reads every assignment in a fragment's class body as a string literal and fails on an expression."""


ModuleDocFragment.DOCUMENTATION = "options:" + GATE_OPTIONS

ModuleDocFragment.RELEASE = r'''
options:
  gate:
    description:
      - The zero-memory gate run last, as M(gpuserve.sglang.gpu_memory_gate) runs it, plus O(gate.enabled). It reads
        where O(gate.target) says, by default on the host the module runs on (where C(nvidia-smi) sees every GPU),
        not in O(target).
    type: dict
    suboptions:
      enabled:
        description: Whether to run the gate.
        type: bool
        default: true
      target:
        description: Where C(nvidia-smi) runs, as O(target) takes it.
        type: str
        choices: [local, pct, lxc]
        default: local
      vmid:
        description: Container id when O(gate.target=pct).
        type: int
      container_name:
        description: Container name when O(gate.target=lxc).
        type: str
''' + _indent(_in_gate(GATE_OPTIONS), 4).lstrip("\n")
