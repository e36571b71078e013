"""Every host file the lab references comes from a package the lab installs (lab/host-packages.txt), one they
depend on, or Debian's required set. A fresh machine without lxc-templates failed `lab/lab up` at
`lxc.include = /usr/share/lxc/config/debian.common.conf` while CI, on a machine that had it, passed.
No root, no lab: the scripts' text against package data recorded on Debian 12 (data/refresh-debian12.sh)."""
import os

import pytest

import hostdeps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "debian12.tsv")
SCRIPTS = ("lab/lab", "lab/files/pct")

# Paths that no package provides, each for a reason: the lab's own files and state, kernel file systems, and
# paths it only checks for absence (a real PVE or NVIDIA installation it refuses to shadow).
NOT_PACKAGED = {
    "/usr/sbin/pct": "the lab's pct, installed by lab/lab up",
    "/usr/local/bin/nvidia-smi": "the SIMULATED nvidia-smi, installed by lab/lab up",
    "/usr/local/bin/nvidia-modprobe": "the SIMULATED nvidia-modprobe (the nvidia-smi stand-in), installed by lab/lab up",
    "/usr/local/bin/gpuserve-lab-dmesg": "the SIMULATED kernel log (Xid lines), installed by lab/lab up",
    "/usr/bin/nvidia-smi": "the stand-in's path inside the CT rootfs / a real one the lab refuses to shadow",
    "/usr/sbin/policy-rc.d": "written by lab/lab for the duration of apt-get install",
    "/var/lib/gpuserve-lab": "the lab's state directory",
    "/var/lib/gpuserve-lab/pve/lxc/VMID.conf": "the lab's state directory (a comment's example path)",
    "/var/cache/gpuserve-lab": "the lab's cache directory",
    "/run/gpuserve-lab": "the lab's runtime directory",
    "/run/sshd": "sshd's privilege-separation directory, created by lab/lab",
    "/dev/urandom": "the kernel's random device (the lab gateway key), not a package file",
    "/var/lib/lxc/VMID/rootfs": "a comment's example path under lxc's /var/lib/lxc",
    "/etc/pve": "checked for absence: a real Proxmox VE host",
    "/etc/pve/lxc": "pve-container's config directory, named in a comment",
    "/proc/driver/nvidia": "checked for absence: a real NVIDIA driver",
    "/proc/mounts": "procfs",
    "/dev/null": "devtmpfs",
    "/dev/nvidia": "SIMULATED device names (/dev/nvidiaN inside the CT)",
    "/dev/nvidia0": "checked for absence: a real GPU device node",
    "/opt/wheelhouse": "inside the CT: the bind-mounted wheelhouse",
    "/opt/wheels": "an optional local wheel directory (--find-links)",
    "/opt/gpuserve-lab/sglang.git": "inside the CT: the bind-mounted lab SGLang repository",
    "/etc/gpuserve-lab/gpusim.conf": "inside the CT: the SIMULATED GPU settings",
    "/etc/gpuserve-lab/userspace-version": "inside the CT: its SIMULATED NVIDIA userspace version (lab/lab boot)",
    "/proc/driver/nvidia/version": "a real driver's, named in a comment (the lab writes a SIMULATED copy)",
    "/usr/local/bin": "systemd's search path for a unit's bare command (lab/lab boot runs the boot unit's)",
    "/usr/local/sbin": "systemd's search path for a unit's bare command (lab/lab boot runs the boot unit's)",
    "/sys/fs/cgroup/cpuacct": "the kernel's cgroup v1 CPU accounting (the CI profile), not a package file",
    "/sys/fs/cgroup/unified": "the kernel's cgroup v2 hierarchy (the CI profile), not a package file",
}


def load_data():
    data = {"command": {}, "path": {}, "depends": {}, "required": set()}
    with open(DATA, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            kind, name, pkg = line.rstrip("\n").split("\t")
            if kind == "required":
                data["required"].add(name)
            elif kind == "depends":
                data["depends"].setdefault(name, set()).add(pkg)
            else:
                data[kind][name] = set(pkg.split(","))
    return data


def host_packages(path=os.path.join(ROOT, "lab", "host-packages.txt")):
    with open(path, encoding="utf-8") as f:
        return [line.split()[0] for line in f if line.split("#")[0].strip()]


def problems(texts, packages, data):
    """What the scripts use that a fresh Debian 12 machine would lack after installing `packages`."""
    allowed = set(packages) | data["required"]
    for p in packages:
        allowed |= data["depends"].get(p, set())
    out = []
    for name, text in texts.items():
        for cmd in sorted(hostdeps.commands(text)):
            owners = data["command"].get(cmd)
            if owners is None:
                out.append("%s runs '%s', which %s does not record: run tests/unit/lab/data/refresh-debian12.sh"
                           % (name, cmd, os.path.basename(DATA)))
            elif not owners & allowed:
                out.append("%s runs '%s' from package %s, which the lab does not install"
                           % (name, cmd, "/".join(sorted(owners))))
        for path in sorted(hostdeps.absolute_paths(text)):
            if path in NOT_PACKAGED:
                continue
            owners = data["path"].get(path)
            if owners is None:
                out.append("%s references %s: no package records it; add it to NOT_PACKAGED with a reason or "
                           "rerun data/refresh-debian12.sh" % (name, path))
            elif not owners & allowed:
                out.append("%s references %s from package %s, which the lab does not install"
                           % (name, path, "/".join(sorted(owners))))
    return out


@pytest.fixture(scope="module")
def texts():
    out = {}
    for rel in SCRIPTS:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            out[rel] = f.read()
    return out


def test_every_host_file_and_command_the_lab_uses_is_installed_by_it(texts):
    assert problems(texts, host_packages(), load_data()) == []


def test_the_lab_as_it_was_without_lxc_templates_is_caught(texts):
    # e7eeb55's lab/lab: HOST_PKGS=(lxc debootstrap openssh-server psmisc rsync) with the same lxc.include
    found = problems(texts, ["lxc", "debootstrap", "openssh-server", "psmisc", "rsync"], load_data())
    assert any("/usr/share/lxc/config/debian.common.conf from package lxc-templates" in p for p in found), found


def test_an_unrecorded_command_or_path_fails_instead_of_passing():
    text = "#!/bin/bash\nfrobnicate --now\nprintf 'lxc.include = /usr/share/frob/x.conf\\n'\n"
    found = problems({"x": text}, host_packages(), load_data())
    assert any("runs 'frobnicate'" in p for p in found) and any("/usr/share/frob/x.conf" in p for p in found)


def test_the_reader_finds_commands_and_skips_strings_comments_and_heredocs():
    text = """#!/bin/bash
die() { echo "$*" >&2; exit 1; }
f() { lxc-start -n 1 || die "run lxc-create; then"; }  # tar here is a comment
x=$(basename "$(readlink -f a)")
cat > y <<'EOF'
Subsystem sftp /usr/lib/openssh/sftp-server
notacommand here
EOF
case $1 in
  a|b) f ;;
  *) exec sshd-like -f 1 ;;
esac
for ((i = 0; i < 3; i++)); do sleep 0.1; done
"""
    assert hostdeps.commands(text) == {"lxc-start", "basename", "readlink", "cat", "sshd-like", "sleep"}
    assert hostdeps.absolute_paths(text) == {"/bin/bash", "/usr/lib/openssh/sftp-server"}  # shebang, heredoc


def test_ci_purges_exactly_the_packages_a_fresh_machine_lacks():
    with open(os.path.join(ROOT, "lab", "host-packages.txt"), encoding="utf-8") as f:
        rows = [line.split() for line in f if line.split("#")[0].strip()]
    assert all(r[1] in ("yes", "no") for r in rows), rows
    for must_stay in ("python3", "git", "procps"):
        assert [r[1] for r in rows if r[0] == must_stay] == ["yes"], must_stay
