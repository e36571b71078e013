# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the zero-memory gate (module_utils/_gate.py GATE_ARGS). Private to this collection."""
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r'''
options:
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
'''
