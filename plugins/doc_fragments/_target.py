# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the exec runner (module_utils/_runner.py TARGET_ARGS). Private to this collection."""
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r'''
options:
  target:
    description:
      - Where the module runs its commands.
      - V(local) runs them on the host the module runs on.
      - V(pct) runs them inside Proxmox VE container O(vmid) through C(pct exec VMID --).
      - V(lxc) runs them inside LXC container O(container_name) through C(lxc-attach -n NAME --).
    type: str
    choices: [local, pct, lxc]
    default: local
  vmid:
    description:
      - The Proxmox VE container id. Required when O(target=pct).
    type: int
  container_name:
    description:
      - The LXC container name. Required when O(target=lxc).
    type: str
requirements:
  - coreutils C(timeout) on the host the module runs on.
  - C(pct) (Proxmox VE) when O(target=pct), C(lxc-attach) when O(target=lxc).
'''
