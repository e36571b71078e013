# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a PVE host's boot must do for its containers' GPUs, and what the audit finds there (the proxmox_container
role): the nvidia-modprobe arguments of the unit that creates the NVIDIA device nodes before pve-guests.service
starts the guests, what an update changes of the container's boot settings, and a container's state on its host
(running, the device nodes its devN pass, that unit).

At boot the driver creates no /dev/nvidia-uvm until something loads nvidia-uvm, and a container whose devN names a
node that does not exist does not start (games-on-whales/wolf PR #361).
"""

import os
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_devices

BOOT_UNIT = 'gpuserve-nvidia-nodes.service'
GPU_NODE = re.compile(r'^nvidia(\d+)$')


def nvidia_modprobe_args(nodes):
    """The arguments of `nvidia-modprobe` that create again the NVIDIA device nodes the host has now (their
    basenames): `-c N` per GPU /dev/nvidiaN (with /dev/nvidiactl), `-u` for nvidia-uvm and nvidia-uvm-tools, `-m`
    for nvidia-modeset. Derived from the host alone, so every container of a host renders the same unit."""
    names = set(os.path.basename(str(n)) for n in nodes or [])
    minors = sorted(int(m.group(1)) for m in (GPU_NODE.match(n) for n in names) if m)
    if not minors:
        raise AnsibleFilterError('no GPU device node (nvidiaN) among %s: the unit would create none' % sorted(names))
    args = []
    if names & {'nvidia-uvm', 'nvidia-uvm-tools'}:
        args.append('-u')
    if 'nvidia-modeset' in names:
        args.append('-m')
    for minor in minors:
        args += ['-c', str(minor)]
    return args


def _config(text):
    """`pct config` output as {key: value}."""
    return dict(line.split(': ', 1) for line in (text or '').splitlines() if ': ' in line)


def host_path(path, device_root):
    """Where the node a devN names (/dev/...) is on the host: under device_root (the lab keeps its SIMULATED nodes
    outside /dev)."""
    root = os.path.normpath(device_root)
    return path if root == '/dev' else root + path[len('/dev'):]


def pve_boot_audit(pct, found, device_root, unit_enabled, vmid, host):
    """{running, status, devices, missing, unit_enabled, problems} of a container on its PVE host.

    pct: the registered results of `pct status VMID` and `pct config VMID`, in that order; found: the paths that exist
    under device_root; unit_enabled: whether the boot unit is linked into multi-user.target.wants. Each problem says
    what to do."""
    status_res, config_res = pct
    status = (status_res.get('stdout') or '').strip()
    if status_res.get('rc') != 0:
        status = 'unknown (pct status: rc %s, %s)' % (status_res.get('rc'),
                                                      (status_res.get('stderr') or status).strip()[:200])
    else:
        status = status.replace('status: ', '', 1)
    entries = _pve_devices.current_entries(_config(config_res.get('stdout')))
    devices = [entries[i][0] for i in sorted(entries)]
    present = set(os.path.normpath(p) for p in found or [])
    missing = [d for d in devices if os.path.normpath(host_path(d, device_root)) not in present]
    problems = []
    if status != 'running':
        problems.append('CT %s is %s on %s' % (vmid, status, host))
    if missing:
        problems.append(
            'the device nodes CT %s passes (devN) are missing on %s: %s. A container whose devN names a missing node '
            'does not start: create them with `systemctl start %s` there (the boot unit; playbooks/deploy_eagle3.yml '
            'installs it), then start the container (`pct start %s`)'
            % (vmid, host, ', '.join(missing), BOOT_UNIT, vmid))
    if not unit_enabled:
        problems.append(
            'the boot unit %s is not enabled on %s: after its next reboot the device nodes will be missing when PVE '
            'starts the guests; run playbooks/deploy_eagle3.yml (tag proxmox_container_boot)' % (BOOT_UNIT, host))
    return {'running': status == 'running', 'status': status, 'devices': devices, 'missing': missing,
            'unit_enabled': bool(unit_enabled), 'problems': problems}


def pve_boot_changes(config, onboot, order):
    """What the role's create or update changes of the container's boot settings, as 'key: before -> after' (check
    mode's preview: community.proxmox has none). config: the container's config from the API ({} before it exists);
    order: PVE's startup order, 0 to leave it. A startup that already holds order=N among its values is kept, as
    community.proxmox compares it."""
    config = config or {}
    changes = []
    onboot_now, onboot_wanted = str(config.get('onboot', 0)), str(int(bool(onboot)))
    if onboot_now != onboot_wanted:
        changes.append('onboot: %s -> %s' % (onboot_now, onboot_wanted))
    if int(order) > 0:
        startup_now, startup_wanted = str(config.get('startup', '')), 'order=%d' % int(order)
        if startup_wanted not in startup_now.split(','):
            changes.append("startup: '%s' -> '%s'" % (startup_now, startup_wanted))
    return changes


class FilterModule:
    def filters(self):
        return {
            'nvidia_modprobe_args': nvidia_modprobe_args,
            'pve_boot_changes': pve_boot_changes,
            'pve_boot_audit': pve_boot_audit,
        }
