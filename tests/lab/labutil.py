"""What every lab test shares: whether the lab is up, the lane a test runs in (tests/lab/lanes.py: its node, its
container, its inventory overlay), the marks that select and skip lab tests, and the few calls the lifecycle tests
make (a command in the lane's CT, a playbook run limited to the lane's hosts, waiting)."""
import json
import os
import subprocess
import sys
import time

import pytest

import lanes

LANE = lanes.current()  # GPUSERVE_LANE (tests/lab/conftest.py sets it when the selected files are one lane's)
VMID = LANE["vmid"]  # the lane's container: CT 101 in lane main
HOST = LANE["host"]
NODE = LANE["node"]  # its PVE node: lab-pve in lane main
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)
HELPER = "/usr/local/sbin/gpuserve-sglang"
# The SGLang stand-in's SIMULATED startup fault (docs/lab.md): while this file exists in a container, that container's
# next server start exits 1 (and removes it): the lab's failure after the lifecycle's stop. Remove it in a finally.
STANDIN_FAULT = "/etc/gpuserve-lab/standin-fault"
LAB = os.path.join(ROOT, "lab", "lab")


def node_env(node=NODE, base=None):
    """An environment for a command on the lab host acting as NODE (GPUSERVE_LAB_NODE, as that node's sshd sets it
    for its sessions: pct, nvidia-smi and lab/lab then see that node's containers and GPUs)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if k not in ("GPUSERVE_LAB_NODE", "GPUSERVE_PVE_NODE")}
    if node != lanes.NODES[0]:
        env["GPUSERVE_LAB_NODE"] = node
    return env


def ct_status(vmid=VMID, node=NODE):
    try:
        return subprocess.run(["/usr/sbin/pct", "status", vmid], capture_output=True, text=True, check=False,
                              env=node_env(node), timeout=60).stdout.strip()
    except OSError:
        return "no pct"


def lab_is_up():
    """Root, the lab pct installed, and CT 101 running (lab/lab up)."""
    return os.geteuid() == 0 and ct_status("101", lanes.NODES[0]) == "status: running"


# scripts/lab-tests sets GPUSERVE_LAB_REQUIRED=1: there a lab test that cannot run is a failure, never a skip.
LAB_REQUIRED = os.environ.get("GPUSERVE_LAB_REQUIRED") == "1"


def lab_skip(reason):
    """Skip (a developer's run without the lab), or fail where every lab test must run (scripts/lab-tests)."""
    if LAB_REQUIRED:
        pytest.fail("%s; GPUSERVE_LAB_REQUIRED=1 (scripts/lab-tests) runs every lab test" % reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def lab_up():
    """The lab is up; in a lane that provisions its container first (tests/lab/lanes.py), that container is
    deployed (created through fakepve's API from the lab's installed image, which is saved from CT 101 if this lab
    has none yet)."""
    if not lab_is_up():
        lab_skip("the lab is not up (sudo lab/lab up)")
    if LANE.get("provision") and ct_status() != "status: running":
        ensure_image()
        code, out = finish(playbook("playbooks/deploy_eagle3.yml"), limit=1200)
        assert code == 0, "lane %s: deploying CT %s from the installed image failed:\n%s" % (
            LANE["name"], VMID, out[-4000:])


def ensure_image():
    """The lab's installed image (lab/lab image save: CT 101 after scripts/deploy, less the server's config and
    state), which the lanes' containers are created from; made now if this lab has none yet."""
    res = subprocess.run([LAB, "image", "save", "101"], capture_output=True, text=True, check=False, timeout=600)
    assert res.returncode == 0, "lab/lab image save 101 failed: " + res.stdout + res.stderr


GPU_FILES = lanes.node_dir(NODE) + "/gpus"  # the lane node's SIMULATED GPU files


def gpu_bus_id(index):
    """The lane node's SIMULATED GPU index as nvidia-smi on the lab host names its PCI bus (00000000:BB:DD.0)."""
    out = subprocess.run(["/usr/local/bin/nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True, timeout=30, env=node_env()).stdout
    return dict(line.split(", ") for line in out.splitlines())[str(index)]


def gpu_memory_used():
    """Per-GPU memory.used (MiB) of the lane's node, from the SIMULATED nvidia-smi on the lab host."""
    res = subprocess.run(["/usr/local/bin/nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=30, env=node_env())
    return [int(v) for v in res.stdout.split()]


@pytest.fixture()
def idle_gpus():
    """Every SIMULATED GPU reads 0 MiB. What the README's first command leaves running (the server that
    scripts/deploy started) or an interrupted test left behind is stopped first: the unit, then any process still
    holding a GPU file (host PIDs: the files are bind-mounted into the CT)."""
    if any(gpu_memory_used()):
        subprocess.run(["/usr/sbin/pct", "exec", VMID, "--", "systemctl", "stop", "sglang.service"],
                       capture_output=True, check=False, timeout=120, env=node_env())
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
    """A command in the lane's CT (pct exec on its node), text output captured."""
    return subprocess.run(["/usr/sbin/pct", "exec", VMID, "--"] + list(argv), capture_output=True, text=True,
                          check=check, input=stdin, timeout=timeout, env=node_env())


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


def inventory_args():
    """-i inventory/lab, and in a lane with an overlay that overlay and --limit to the lane's hosts (so a run there
    touches no other lane's container)."""
    argv = ["-i", "inventory/lab"]
    if LANE["inventory"]:
        argv += ["-i", LANE["inventory"], "--limit", ",".join(LANE["limit"])]
    return argv


def playbook(name, *extra):
    """ansible-playbook NAME on the lane's inventory (inventory_args), started in its own session (killpg ends it
    with its workers); stdout and stderr together, as text."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=VENV_BIN + ":" + os.environ["PATH"], ANSIBLE_FORCE_COLOR="0")
    if LANE.get("controller_tz"):  # the lane's controller time zone (tests/lab/lanes.py)
        env["TZ"] = LANE["controller_tz"]
    return subprocess.Popen([os.path.join(VENV_BIN, "ansible-playbook")] + inventory_args() + [name]
                            + list(extra), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def documented(*args):
    """scripts/deploy ARGS, the README's command (e.g. --fleet, docs/fleet.md), as a user runs it, started like
    playbook()."""
    env = dict(os.environ, GPUSERVE_VENV=os.path.dirname(VENV_BIN), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.Popen([os.path.join(ROOT, "scripts", "deploy")] + list(args), cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(proc, limit=600):
    out, _ = proc.communicate(timeout=limit)
    return proc.returncode, out


def why(out, tail=2500):
    """A failed run's output for an assertion message: every failed task's line (a long rollback report can push
    it out of the tail), then the tail."""
    failed = [line[:1500] for line in out.splitlines() if line.startswith("fatal:") or "FAILED!" in line]
    return "\n".join(failed[-6:] + ["--- tail ---", out[-tail:]])
