"""A container's GPUs are device minors (/dev/nvidiaN), and nvidia-smi's index is not always N.

On the lab "PVE host" the SIMULATED GPUs are put in another PCI bus order (lab/lab gpus --bus-order
4,5,6,7,0,1,2,3: /dev/nvidia0 is nvidia-smi's GPU 4), a host process holds /dev/nvidia0's file, and the
collection's gate module runs there as the lifecycle runs it (target local, the lab's SIMULATED driver
information). The gate of the container owning minors 4-7 passes although GPU 4 is busy, the gate of the one owning
minors 0-3 waits on GPU 4 and names its holder, and a gate by the same numbers as indexes would have waited on the
wrong GPUs. Needs a deployed lab; the server is stopped for the gate runs and started again, the bus order
restored.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from labutil import GPU_FILES, LAB_MARKS, ROOT, VENV_BIN, gpu_memory_used, pct, wait_ready

pytestmark = LAB_MARKS

LAB = os.path.join(ROOT, "lab", "lab")
INFO_ROOT = "/var/lib/gpuserve-lab/driver/gpus"  # inventory/lab: gpuserve_gpu_info_root
ORDER = "4,5,6,7,0,1,2,3"


def bus_order(order):
    subprocess.run([LAB, "gpus", "--bus-order", order], check=True, capture_output=True, text=True, timeout=60)


def gate(**args):
    """gpuserve.sglang.gpu_memory_gate on the lab host (ad hoc, local): (ok, result)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=VENV_BIN + ":" + os.environ["PATH"])
    args = dict(dict(gpu_info_root=INFO_ROOT, nvidia_smi="/usr/local/bin/nvidia-smi", poll_interval=0.05), **args)
    out = subprocess.run([os.path.join(VENV_BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local", "-o",
                          "-e", "ansible_python_interpreter=" + sys.executable,
                          "-m", "gpuserve.sglang.gpu_memory_gate", "-a", json.dumps(args)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120).stdout
    head, sep, body = out.partition(" => ")
    assert sep, out
    return "SUCCESS" in head, json.loads(body)


@pytest.fixture
def remapped_with_gpu4_held():
    """The server stopped, the bus order 4,5,6,7,0,1,2,3, and a host process holding /dev/nvidia0's file (GPU 4);
    afterwards the holder is gone, the order is the identity again and the server runs."""
    if pct("systemctl", "is-active", "sglang.service", check=False).stdout.strip() != "active":
        pytest.fail("sglang.service is not active: run scripts/deploy first", pytrace=False)
    pct("systemctl", "stop", "sglang.service", timeout=120)
    holder = None
    try:
        bus_order(ORDER)
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); time.sleep(600)",
                                   os.path.join(GPU_FILES, "nvidia0")], env=dict(os.environ, GPUSIM_MIB="40960"))
        deadline = time.monotonic() + 10
        while gpu_memory_used() != [0, 0, 0, 0, 40969, 0, 0, 0]:
            assert time.monotonic() < deadline, gpu_memory_used()
            time.sleep(0.05)
        yield holder.pid
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
        bus_order("")
        pct("systemctl", "start", "sglang.service", timeout=300)
        wait_ready(120)


def test_the_gate_finds_a_containers_gpus_by_minor_on_a_remapped_host(remapped_with_gpu4_held):
    holder = remapped_with_gpu4_held
    # minors 4-7 are GPUs 0-3: idle, although /dev/nvidia0 (GPU 4) is busy
    ok, res = gate(minors=[4, 5, 6, 7], timeout=1)
    assert ok, res
    assert [(g["index"], g["minor"]) for g in res["gpus"]] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    # minors 0-3 are GPUs 4-7: the gate waits on GPU 4 and names its holder on the host
    ok, res = gate(minors=[0, 1, 2, 3], timeout=0.5)
    assert not ok
    assert "GPU 4 still holds 40969 MiB (limit 0): pid %d on the host" % holder in res["msg"], res["msg"]
    assert [(g["index"], g["minor"]) for g in res["gpus"]] == [(4, 0), (5, 1), (6, 2), (7, 3)]
    # taking the minors for indexes would gate the wrong GPUs: "4-7" would wait on the busy GPU 4
    ok, res = gate(gpus=[4, 5, 6, 7], timeout=0.3)
    assert not ok and "GPU 4 still holds" in res["msg"], res

