"""What every lab test shares: whether the lab is up, and the marks that select and skip lab tests."""
import os
import subprocess
import time

import pytest

VMID = "101"


def lab_is_up():
    """Root, the lab pct installed, and CT 101 running (lab/lab up)."""
    try:
        return os.geteuid() == 0 and subprocess.run(["/usr/sbin/pct", "status", VMID], capture_output=True,
                                                    text=True, check=False).stdout == "status: running\n"
    except OSError:
        return False


# scripts/lab-tests sets GPUSERVE_LAB_REQUIRED=1: there a lab test that cannot run is a failure, never a skip.
LAB_REQUIRED = os.environ.get("GPUSERVE_LAB_REQUIRED") == "1"


def lab_skip(reason):
    """Skip (a developer's run without the lab), or fail where every lab test must run (scripts/lab-tests)."""
    if LAB_REQUIRED:
        pytest.fail("%s; GPUSERVE_LAB_REQUIRED=1 (scripts/lab-tests) runs every lab test" % reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def lab_up():
    if not lab_is_up():
        lab_skip("the lab is not up (sudo lab/lab up)")


GPU_FILES = "/var/lib/gpuserve-lab/gpus"


def gpu_memory_used():
    """Per-GPU memory.used (MiB) from the SIMULATED nvidia-smi on the lab host."""
    res = subprocess.run(["/usr/local/bin/nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=30)
    return [int(v) for v in res.stdout.split()]


@pytest.fixture()
def idle_gpus():
    """Every SIMULATED GPU reads 0 MiB. What the README's first command leaves running (the server that
    scripts/deploy started) or an interrupted test left behind is stopped first: the unit, then any process still
    holding a GPU file (host PIDs: the files are bind-mounted into the CT)."""
    if any(gpu_memory_used()):
        subprocess.run(["/usr/sbin/pct", "exec", VMID, "--", "systemctl", "stop", "sglang.service"],
                       capture_output=True, check=False, timeout=120)
        subprocess.run(["fuser", "-s", "-k"] + sorted(os.path.join(GPU_FILES, f) for f in os.listdir(GPU_FILES)),
                       capture_output=True, check=False, timeout=30)
    deadline = time.monotonic() + 30
    while any(gpu_memory_used()):
        if time.monotonic() > deadline:
            pytest.fail("the SIMULATED GPUs still hold memory 30 s after stopping sglang.service: %s"
                        % gpu_memory_used(), pytrace=False)
        time.sleep(0.05)


LAB_MARKS = [pytest.mark.lab, pytest.mark.usefixtures("lab_up")]
