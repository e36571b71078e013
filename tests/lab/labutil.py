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


LAB_MARKS = [pytest.mark.lab, pytest.mark.skipif(not lab_is_up(), reason="the lab is not up (sudo lab/lab up)")]
