"""What every lab test shares: whether the lab is up, and the marks that select and skip lab tests."""
import os
import subprocess

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


LAB_MARKS = [pytest.mark.lab, pytest.mark.usefixtures("lab_up")]
