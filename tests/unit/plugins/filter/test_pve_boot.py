"""What a PVE host's boot must do for its containers' GPUs, and what the audit finds there
(plugins/filter/pve_boot.py): the boot unit's nvidia-modprobe arguments, an update's boot settings in check mode, and
a container on its host."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter import pve_boot as pb

LAB_ROOT = "/var/lib/gpuserve-lab/gpus"
CONFIG = ("arch: amd64\ndev0: /dev/nvidia0,mode=0666\ndev1: /dev/nvidia1,mode=0666\ndev2: /dev/nvidiactl,mode=0666\n"
          "dev3: /dev/nvidia-uvm,mode=0666\ndev4: /dev/nvidia-uvm-tools,mode=0666\nhostname: ct101\nonboot: 1\n"
          "digest: 0123abcd\n")
NODES = ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]


def pct(status="status: running", config=CONFIG, rc=0, stderr=""):
    return [{"rc": rc, "stdout": status, "stderr": stderr}, {"rc": 0, "stdout": config, "stderr": ""}]


def audit(found, unit_enabled=True, root="/dev", **kw):
    return pb.pve_boot_audit(pct(**kw), found, root, unit_enabled, 101, "pve1")


# nvidia_modprobe_args: from the nodes the host has now

def test_each_gpu_minor_and_the_unified_memory_nodes():
    assert pb.nvidia_modprobe_args(NODES) == ["-u", "-c", "0", "-c", "1"]


def test_modeset_only_where_the_host_has_it_and_minors_in_number_order():
    assert pb.nvidia_modprobe_args(["/dev/nvidia10", "/dev/nvidia2", "/dev/nvidia-modeset", "/dev/nvidiactl"]) == [
        "-m", "-c", "2", "-c", "10"]


def test_a_host_without_a_gpu_node_is_refused():
    with pytest.raises(AnsibleFilterError, match=r"no GPU device node \(nvidiaN\) among \['nvidia-uvm', 'nvidiactl'\]"):
        pb.nvidia_modprobe_args(["nvidiactl", "nvidia-uvm"])


# pve_boot_changes: check mode's preview of onboot and the startup order

def test_a_new_container_gets_onboot_and_its_order():
    assert pb.pve_boot_changes({}, True, 2) == ["onboot: 0 -> 1", "startup: '' -> 'order=2'"]


def test_settings_already_there_change_nothing():
    assert pb.pve_boot_changes({"onboot": 1, "startup": "order=2,up=30"}, True, 2) == []
    assert pb.pve_boot_changes({"onboot": 0}, False, 0) == []


def test_order_zero_leaves_the_startup_and_onboot_off_is_set_too():
    assert pb.pve_boot_changes({"onboot": 1, "startup": "order=5"}, False, 0) == ["onboot: 1 -> 0"]
    assert pb.pve_boot_changes({"onboot": 1, "startup": "order=5"}, True, 3) == ["startup: 'order=5' -> 'order=3'"]
    assert pb.pve_boot_changes(None, True, 0) == ["onboot: 0 -> 1"]


# pve_boot_audit: the container on its host

def test_a_running_container_whose_nodes_exist_with_the_unit_enabled_is_clean():
    got = audit(["/dev/" + n for n in NODES])
    assert got == {"running": True, "status": "running", "unit_enabled": True, "missing": [], "problems": [],
                   "devices": ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
                               "/dev/nvidia-uvm-tools"]}


def test_a_stopped_container_whose_nodes_are_missing_names_them_and_what_to_do():
    # the lab keeps its SIMULATED nodes under another root: the devN path maps there
    got = audit([LAB_ROOT + "/nvidia0", LAB_ROOT + "/nvidia1", LAB_ROOT + "/nvidiactl/"], root=LAB_ROOT + "/",
                status="status: stopped")
    assert got["running"] is False and got["status"] == "stopped"
    assert got["missing"] == ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    assert got["problems"] == [
        "CT 101 is stopped on pve1",
        "the device nodes CT 101 passes (devN) are missing on pve1: /dev/nvidia-uvm, /dev/nvidia-uvm-tools. A "
        "container whose devN names a missing node does not start: create them with `systemctl start "
        "gpuserve-nvidia-nodes.service` there (the boot unit; playbooks/deploy_eagle3.yml installs it), then start "
        "the container (`pct start 101`)"]


def test_a_boot_unit_that_is_not_enabled_is_a_problem_for_the_next_reboot():
    got = audit(["/dev/" + n for n in NODES], unit_enabled=False)
    assert got["running"] is True and got["unit_enabled"] is False
    assert got["problems"] == [
        "the boot unit gpuserve-nvidia-nodes.service is not enabled on pve1: after its next reboot the device nodes "
        "will be missing when PVE starts the guests; run playbooks/deploy_eagle3.yml (tag proxmox_container_boot)"]


def test_pct_that_fails_is_an_unknown_status_not_a_running_container():
    got = audit(["/dev/" + n for n in NODES], status="", rc=255,
                stderr="Configuration file 'nodes/pve1/lxc/101.conf' does not exist\n")
    assert got["running"] is False
    assert got["problems"][0] == ("CT 101 is unknown (pct status: rc 255, Configuration file "
                                  "'nodes/pve1/lxc/101.conf' does not exist) on pve1")
