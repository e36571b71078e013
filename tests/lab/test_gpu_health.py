"""GPU health in the lab: a GPU that cannot serve is refused before anything is stopped, naming the GPU
and the check, and the running server is left alone (its PID unchanged).

SIMULATED: the lab's nvidia-smi stand-in reads a GPU's health from the lane node's gpu-health.json (the fields of
the real H200 capture, tests/fixtures/nvidia-smi-h200-health, otherwise), and the lab's kernel log stand-in
(/usr/local/bin/gpuserve-lab-dmesg, inventory/lab's sglang_server_gate_dmesg) prints the node's kernel.log, where a
test writes an Xid line in the real dmesg format. One class goes through the whole restart_server.yml (the
lifecycle's health read before the stop); the others through the same module call on the lane's PVE host
(gpu_memory_gate, memory: false: the preflight path, seconds each); audit.yml reports a link that dropped since
the verified start. Needs a deployed lab; leaves the server running.
"""
import json
import os
import re
import subprocess
import time

import pytest

import lanes
from labutil import LAB_MARKS, LANE, NODE, ROOT, VENV_BIN, finish, gpu_bus_id, pct, playbook

pytestmark = LAB_MARKS

NODE_DIR = lanes.node_dir(NODE)
HEALTH = NODE_DIR + "/gpu-health.json"  # SIMULATED GPU health (lab/files/nvidia-smi health_path)
KERNEL_LOG = NODE_DIR + "/kernel.log"  # SIMULATED kernel log (lab/files/gpuserve-lab-dmesg)
GPU = 3
RESTART = "playbooks/restart_server.yml"


def main_pid():
    return pct("systemctl", "show", "sglang.service", "--property=MainPID", "--value").stdout.strip()


def log_xid(code, text, ago=0.0):
    """An Xid line for GPU's bus in the SIMULATED kernel log, stamped now less ago seconds (seconds since boot, as
    dmesg stamps)."""
    with open("/proc/uptime", encoding="utf-8") as f:
        now = float(f.read().split()[0]) - ago
    bus = gpu_bus_id(GPU)[4:-2].lower()  # dmesg names the bus without the function: PCI:0000:02:09
    with open(KERNEL_LOG, "a", encoding="utf-8") as f:
        f.write("[%12.6f] NVRM: Xid (PCI:%s): %d, %s\n" % (now, bus, code, text))


def manifest():
    return json.loads(pct("cat", "/var/lib/gpuserve/sglang-manifest.json").stdout)


def set_health(**fields):
    with open(HEALTH, "w", encoding="utf-8") as f:
        json.dump({str(GPU): fields}, f)


def health_gate():
    """The lifecycle's health read (gpu_memory_gate, memory: false) on the lane's PVE host, as an ad-hoc run;
    the module's result."""
    inventory = ["-i", "inventory/lab"] + (["-i", LANE["inventory"]] if LANE["inventory"] else [])
    args = dict(minors=list(range(8)), gpu_info_root=NODE_DIR + "/driver/gpus", memory=False, health={},
                dmesg="/usr/local/bin/gpuserve-lab-dmesg")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", PATH=VENV_BIN + ":" + os.environ["PATH"])
    res = subprocess.run([os.path.join(VENV_BIN, "ansible"), NODE] + inventory
                         + ["-m", "gpuserve.sglang.gpu_memory_gate", "-a", json.dumps(args)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = json.loads(res.stdout)
    return out["plays"][0]["tasks"][0]["hosts"][NODE]


@pytest.fixture
def served(lab_up):
    """The lane's server runs; afterwards the SIMULATED GPUs are healthy again and the kernel log is empty."""
    pid = main_pid()
    assert pid not in ("", "0"), "sglang.service is not running: deploy the lane first"
    yield pid
    for path in (HEALTH, KERNEL_LOG):
        if os.path.exists(path):
            os.remove(path)


def test_the_healthy_simulated_gpus_pass_and_a_slow_link_only_warns(served):
    res = health_gate()
    assert not res.get("failed"), res.get("msg")
    assert res["health"]["passed"] and res["health"]["findings"] == [] and len(res["health"]["gpus"]) == 8
    set_health(**{"pcie.link.width.current": "8"})
    res = health_gate()
    assert not res.get("failed"), res.get("msg")
    (warning,) = res["health"]["warnings"]
    assert re.match(r"GPU %d \(bus [0-9a-f:.]+, /dev/nvidia%d\): pcie_link: Gen 5 x8 \(max Gen 5 x16\)" % (GPU, GPU),
                    warning), warning


def test_a_fatal_xid_refuses_the_restart_before_the_stop_and_the_server_runs_on(served):
    log_xid(79, "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    rc, out = finish(playbook(RESTART), limit=300)
    flat = " ".join(out.split())
    assert rc != 0, out[-3000:]
    # counted from the last verified start (its manifest's started_epoch placed in the kernel log's clock), not boot
    assert re.search(r"not restarting: GPU health: not starting on a GPU that cannot serve \(at full speed\): GPU %d "
                     r"\(bus [0-9a-f:.]+, /dev/nvidia%d\): xid: 1 Xid event\(s\) since [0-9.]+ s after boot \(codes "
                     r"79\), last: Xid 79 .*reset the "
                     r"GPU .*Nothing was stopped: the server runs as before" % (GPU, GPU), flat), \
        "\n".join(line for line in out.splitlines() if "fatal" in line or "health" in line)[-3000:]
    assert main_pid() == served


def test_a_fatal_xid_logged_before_the_last_verified_start_no_longer_refuses_a_restart(served):
    """A GPU reset after the Xid: the restart counts from the manifest's started_epoch, not from boot (the lane's
    controller runs at TZ=EST5: an epoch read as local time would put the cut-off 5 hours late or early)."""
    started = float(manifest()["times"]["started_epoch"])
    log_xid(79, "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.", ago=time.time() - started + 30)
    rc, out = finish(playbook(RESTART), limit=300)
    assert rc == 0, out[-3000:]
    after = manifest()
    assert after["main_pid"] != int(served) and after["gate"]["health"]["findings"] == [], after["gate"]["health"]
    assert float(after["times"]["started_epoch"]) > started


@pytest.mark.parametrize("fields, check, words", [
    ({"remapped_rows.pending": "Yes"}, "row_remap", "remapped rows pending"),
    ({"remapped_rows.failure": "Yes"}, "row_remap", "remapped rows failure"),
    ({"ecc.errors.uncorrected.volatile.total": "2"}, "ecc", "2 volatile uncorrectable ECC error(s)"),
    ({"ecc.errors.uncorrected.volatile.total": "[N/A]"}, "ecc", "is unknown"),
    ({"absent": True}, "missing", "the GPU behind /dev/nvidia%d" % GPU),
])
def test_each_refusal_class_is_refused_by_the_preflight_and_nothing_is_stopped(served, fields, check, words):
    set_health(**fields)
    res = health_gate()
    assert res.get("failed"), res
    assert "GPU health: not starting" in res["msg"] and words in res["msg"], res["msg"]
    where = "host: missing" if check == "missing" else "GPU %d (bus " % GPU
    assert where in res["msg"] and re.search(r"\b%s(:| is unknown)" % check, res["msg"]), res["msg"]
    assert main_pid() == served


def test_audit_reports_a_link_that_dropped_since_the_verified_start(served):
    """audit.yml (check mode) compares the health the manifest recorded at the verified start with a read now."""
    set_health(**{"pcie.link.width.current": "8"})
    rc, out = finish(playbook("playbooks/audit.yml"), limit=300)
    flat = " ".join(out.split())
    assert rc != 0, out[-3000:]
    assert re.search(r"GPU health: GPU %d \(bus [0-9a-f:.]+\): pcie_link: the PCIe link dropped from Gen 5 x16 at the "
                     r"verified start to Gen 5 x8" % GPU, flat), flat[-3000:]
    assert main_pid() == served
