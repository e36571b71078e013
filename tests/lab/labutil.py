"""What every lab test shares: whether the lab is up, the marks that select and skip lab tests, and the few
calls the lifecycle tests make (a command in the CT, a playbook run, waiting)."""
import json
import os
import subprocess
import sys
import time

import pytest

VMID = "101"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)
HELPER = "/usr/local/sbin/gpuserve-sglang"


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


def pct(*argv, check=True, stdin=None, timeout=120):
    """A command in CT 101 (pct exec), text output captured."""
    return subprocess.run(["/usr/sbin/pct", "exec", VMID, "--"] + list(argv), capture_output=True, text=True,
                          check=check, input=stdin, timeout=timeout)


def wait_for(predicate, limit, what):
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            pytest.fail("waited %s s for %s" % (limit, what), pytrace=False)
        time.sleep(0.2)


def wait_ready(budget=120):
    """The server answers /health_generate (the helper's own wait); its JSON."""
    out = pct("/usr/bin/python3", HELPER, "wait-ready", "--port", "30000", "--budget", str(budget), check=False,
              timeout=budget + 30)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def playbook(name, *extra):
    """ansible-playbook -i inventory/lab NAME, started in its own session (killpg ends it with its workers);
    stdout and stderr together, as text."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=VENV_BIN + ":" + os.environ["PATH"], ANSIBLE_FORCE_COLOR="0")
    return subprocess.Popen([os.path.join(VENV_BIN, "ansible-playbook"), "-i", "inventory/lab", name]
                            + list(extra), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def finish(proc, limit=600):
    out, _ = proc.communicate(timeout=limit)
    return proc.returncode, out
