"""A SIMULATED reboot of the PVE host (`lab/lab boot`, docs/lab.md): the container stops, the device nodes go, the
boot unit roles/proxmox_container installed makes them again, then the lab's pve-guests starts the onboot container
and systemd in it starts sglang.service through its gate. Clean, the server comes back with no hand step and the
audit accepts it as the verified one; without the boot unit the container does not start and the audit names the
missing nodes; with another host driver the gate keeps the server down and the audit names both versions.

Lane main, on CT 101 as scripts/deploy left it. Lab-pve also holds lane fleet's gateway (CT 100): the boot acts on
CT 101 only (`--vms`, PVE's stopall/startall option). Each test leaves the host and the server as a clean boot does.
"""
import json
import os
import subprocess

import pytest

import lanes
from labutil import (LAB, LAB_MARKS, NODE, VMID, ct_status, finish, node_env, pct, playbook, wait_for, wait_ready,
                     why)

pytestmark = LAB_MARKS
GPU_FILES = os.path.join(lanes.node_dir(NODE), "gpus")
GPUSIM_CONF = os.path.join(lanes.node_dir(NODE), "gpusim.conf")
ROOTFS = "/var/lib/lxc/%s/rootfs" % VMID
PIN = ROOTFS + "/etc/gpuserve-lab/userspace-version"  # the container's userspace, pinned by `boot --driver`
NEW_DRIVER = "590.48.01"


def boot(*extra):
    res = subprocess.run([LAB, "boot", "--vms", VMID] + list(extra), capture_output=True, text=True, check=False,
                         env=node_env(), timeout=600)
    return res.returncode, res.stderr


def host_driver():
    """The node's loaded module, from its SIMULATED /proc/driver/nvidia/version (lab/lab writes it)."""
    with open(os.path.join(lanes.node_dir(NODE), "driver", "version"), encoding="utf-8") as handle:
        return handle.readline().split("x86_64")[1].split()[0]


def unit():
    out = pct("systemctl", "show", "sglang.service", "--property=ActiveState,MainPID,Result,InvocationID").stdout
    return dict(line.split("=", 1) for line in out.split())


def audit():
    rc, out = finish(playbook("playbooks/audit.yml"), limit=300)
    found = [text for text in out.splitlines() if text.startswith("GPUSERVE_AUDIT ")]
    return rc, out, json.loads(found[0].split(" ", 1)[1]) if len(found) == 1 else None


@pytest.fixture(scope="module")
def deployed(lab_up):
    """CT 101 as a deploy left it: a verified manifest and the server's unit enabled, so a boot starts it (the server
    itself may be stopped: test_lab_lab's idle_gpus stops it)."""
    enabled = pct("systemctl", "is-enabled", "sglang.service", check=False).stdout.strip()
    if enabled != "enabled" or pct("test", "-s", "/var/lib/gpuserve/sglang-manifest.json", check=False).returncode:
        pytest.fail("CT %s has no deployed server (sglang.service %s): run scripts/deploy first" % (VMID, enabled),
                    pytrace=False)


@pytest.fixture
def restore(deployed):
    """After the test: the host's driver and gpusim.conf as they were, no pinned userspace, and the host booted
    clean, so the server runs as a clean boot leaves it."""
    driver = host_driver()
    with open(GPUSIM_CONF, encoding="utf-8") as handle:
        conf = handle.read()
    yield
    rc, err = boot("--driver", driver)
    if os.path.exists(PIN):
        os.remove(PIN)
    for path in (GPUSIM_CONF, ROOTFS + "/etc/gpuserve-lab/gpusim.conf"):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(conf)
    assert rc == 0, err
    wait_ready()


def test_a_reboot_brings_the_server_back_verified_with_no_hand_step(deployed):
    before = unit()["InvocationID"]
    rc, err = boot()
    assert rc == 0, err
    # the boot unit ran before the guests: the device nodes are back, then the container started
    assert err.index("boot unit gpuserve-nvidia-nodes.service: done") < err.index("CT %s started" % VMID), err
    assert os.path.exists(os.path.join(GPU_FILES, "nvidia-uvm")), sorted(os.listdir(GPU_FILES))
    wait_ready()
    assert unit()["InvocationID"] not in ("", before)  # a new start (its PID may be the same in a new namespace)
    rc, out, line = audit()
    assert rc == 0 and line is not None, why(out)
    assert line["ok"] is True and line["drift"] == [], line["drift"]
    assert line["verification"]["ok"] is True, line["verification"]["problems"]
    assert line["verification"]["unit"]["started_at_boot"] is True, line["verification"]["unit"]


def test_without_the_boot_unit_the_container_does_not_start_and_the_audit_names_the_missing_nodes(restore):
    rc, err = boot("--no-units")
    assert rc == 1, err
    assert "CT %s: dev0: device /dev/nvidia0 does not exist" % VMID in err, err
    assert ct_status() == "status: stopped"
    rc, out, line = audit()
    assert rc != 0 and line is None, why(out)
    assert "CT %s is stopped on %s" % (VMID, NODE) in out, why(out)
    missing = out.split("the device nodes CT %s passes (devN) are missing on %s: " % (VMID, NODE), 1)
    assert len(missing) == 2, why(out)
    assert all(node in missing[1].split(". ", 1)[0].split(", ") for node in ("/dev/nvidia0", "/dev/nvidia-uvm"))


def test_after_a_host_driver_update_the_server_stays_down_and_the_audit_names_both_versions(restore):
    old = host_driver()
    assert old != NEW_DRIVER
    rc, err = boot("--driver", NEW_DRIVER)
    assert rc == 0, err  # the container starts; its server must not
    assert ct_status() == "status: running"
    wait_for(lambda: unit()["ActiveState"] in ("failed", "inactive"), 120, "sglang.service to fail its gate")
    journal = pct("journalctl", "-b", "-u", "sglang.service", "--no-pager", "-o", "cat").stdout
    short = ".".join(old.split(".")[:2])  # the NVML library version nvidia-smi names after the mismatch
    assert "this container's NVIDIA userspace is %s (Driver/library version mismatch)" % short in journal, journal
    assert unit()["Result"] == "exit-code" and unit()["MainPID"] == "0"
    rc, out, line = audit()
    assert rc != 0, why(out)
    assert "container userspace %s does not match host kernel module %s" % (short, NEW_DRIVER) in out, why(out)
