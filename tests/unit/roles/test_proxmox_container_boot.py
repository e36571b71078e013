"""The PVE host's boot unit as roles/proxmox_container installs it (tasks/boot.yml, its template), through
ansible-playbook on localhost into a temporary systemd folder: what it runs and in which order, that systemd-analyze
verify accepts it (and refuses it when a command is missing), and that the install shows in check mode with a diff, changes once and then nothing."""
import json
import os
import shutil
import subprocess
import sys

import pytest

# ansible-playbook runs the role in a process of its own, with this collection's filters: scripts/mutation leaves it
# out, as it does the other role runs (pytest.ini)
pytestmark = pytest.mark.foreign_python
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
UNIT = "gpuserve-nvidia-nodes.service"
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gpuserve.sglang.proxmox_container
        tasks_from: boot
"""
# What the preflight found on an 8-GPU host: the GPU nodes, and every node the container passes.
FOUND = {"__proxmox_container_gpu_nodes": ["nvidia%d" % i for i in range(8)],
         "__proxmox_container_device_paths": ["/dev/nvidia%d" % i for i in range(8)]
         + ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]}


def tools(folder):
    """Stand-ins for nvidia-modprobe and nvidia-smi at absolute paths (systemd-analyze verify wants them executable)."""
    found = {}
    for name in ("nvidia-modprobe", "nvidia-smi"):
        path = folder / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        found[name] = str(path)
    return found


def run(tmp_path, *flags, **extra):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_LOCALHOST_WARNING="false")
    bin_dir = os.path.dirname(sys.executable)
    variables = dict(FOUND, proxmox_container_pve_host="localhost", gpuserve_pve_host="localhost", proxmox_vmid=101,
                     ansible_python_interpreter=sys.executable, **extra)
    out = subprocess.run([os.path.join(bin_dir, "ansible-playbook"), "-i", "localhost,", str(play),
                          "-e", json.dumps(variables)] + list(flags),
                         capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    tasks = json.loads(out.stdout)["plays"][0]["tasks"]
    return {t["task"]["name"].split(" : ", 1)[-1]: t["hosts"]["localhost"] for t in tasks if "localhost" in t["hosts"]}


@pytest.fixture
def host(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the unit is installed owned by root")
    found = tools(tmp_path)
    return dict(dir=tmp_path / "systemd", smi=found["nvidia-smi"], modprobe=found["nvidia-modprobe"])


def test_check_mode_shows_the_unit_with_a_diff_then_it_is_installed_once_and_systemd_accepts_it(tmp_path, host):
    settings = dict(proxmox_container_systemd_dir=str(host["dir"]), proxmox_container_nvidia_smi=host["smi"],
                    proxmox_container_nvidia_modprobe=host["modprobe"])
    steps = ["Make sure the systemd folder and its boot target's wants folder exist",
             "Install the unit that makes the NVIDIA device nodes before the guests start",
             "Enable it at boot (the link `systemctl enable` makes)"]
    preview = run(tmp_path, "--check", "--diff", **settings)
    assert [name for name, r in preview.items() if r.get("changed")] == steps
    diff = preview[steps[1]]["diff"][0]
    assert "Before=pve-guests.service" in diff["after"] and diff["before"] == ""
    assert not host["dir"].exists()  # check mode wrote nothing

    assert [name for name, r in run(tmp_path, **settings).items() if r.get("changed")] == steps
    unit = (host["dir"] / UNIT).read_text()
    assert [line for line in unit.splitlines() if line and not line.startswith("#")] == [
        "[Unit]", "Description=NVIDIA device nodes for the containers' GPU passthrough (gpuserve)",
        "Before=pve-guests.service",
        "[Service]", "Type=oneshot", "RemainAfterExit=yes",
        "ExecStart=%s -u %s" % (host["modprobe"], " ".join("-c %d" % i for i in range(8))),
        "ExecStart=%s -L" % host["smi"],
        "[Install]", "WantedBy=multi-user.target"]
    assert os.readlink(host["dir"] / "multi-user.target.wants" / UNIT) == "../" + UNIT

    assert [name for name, r in run(tmp_path, "--check", "--diff", **settings).items() if r.get("changed")] == []
    assert [name for name, r in run(tmp_path, **settings).items() if r.get("changed")] == []


def systemd_analyze_verify(path):
    return subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, check=False)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is absent (Debian's systemd package): the rendered unit cannot be verified")
def test_systemd_analyze_verify_accepts_the_rendered_unit_and_refuses_a_missing_command(tmp_path, host):
    settings = dict(proxmox_container_systemd_dir=str(host["dir"]), proxmox_container_nvidia_smi=host["smi"],
                    proxmox_container_nvidia_modprobe=host["modprobe"])
    run(tmp_path, **settings)
    verify = systemd_analyze_verify(host["dir"] / UNIT)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # the check bites: the same unit naming an nvidia-modprobe that is not there
    missing = str(tmp_path / "absent" / "nvidia-modprobe")
    run(tmp_path, **dict(settings, proxmox_container_nvidia_modprobe=missing))
    verify = systemd_analyze_verify(host["dir"] / UNIT)
    assert verify.returncode != 0 and missing in verify.stdout + verify.stderr, verify.stdout + verify.stderr
