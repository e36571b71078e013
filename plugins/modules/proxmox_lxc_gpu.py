#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: proxmox_lxc_gpu
short_description: Pass the host's NVIDIA device nodes into a Proxmox VE LXC container as devN entries
version_added: 0.1.0
description:
  - Makes the container's C(devN) entries pass every wanted GPU device node (C(/dev/nvidia0..N), C(nvidiactl),
    C(nvidia-uvm), C(nvidia-uvm-tools), and C(nvidia-modeset) and C(nvidia-caps/*) when present), with the
    given O(gid), O(uid) and O(mode).
  - Idempotent. An entry for a wanted node keeps its slot; new nodes take the lowest free slots; C(devN) entries
    for anything else are kept untouched. With O(prune), entries for C(/dev/nvidiaN) nodes that are no longer
    wanted (a GPU that left the host) are removed.
  - PVE accepts C(devN) only from C(root@pam) logged in with a password; API tokens and other users get
    C(403 configuring device passthrough is only allowed for root@pam). So the module changes the config through
    the API (proxmoxer) with C(root@pam) and a password, or runs C(pct set VMID --devN ...) on the node, and says
    which in RV(method).
  - Device paths are checked before they reach PVE (it accepts C(dev4=nvidia0)); every entry must be an absolute
    path under C(/dev).
  - The container restarts only when its device set changed, it is running, and O(restart=true); otherwise
    RV(restart_required) tells the caller that the running container does not have the new set yet.
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
attributes:
  check_mode:
    support: full
    details: Computes and reports the change and the diff; changes nothing and restarts nothing.
  diff_mode:
    support: full
    details: The container's C(devN) lines before and after, as C(pct config) prints them.
options:
  vmid:
    description: The container's id.
    type: int
    required: true
  node:
    description:
      - The PVE node the container lives on. Required for O(method=api).
    type: str
  devices:
    description:
      - Host paths of the device nodes to pass. When left out, they are discovered under O(device_root) with
        O(patterns) (run the module on the PVE host for that).
      - A path under O(device_root) maps to the same path under C(/dev) in the C(devN) entry.
    type: list
    elements: path
  device_root:
    description:
      - Where the device nodes are on the host. On C(/dev) only character devices count.
      - Another root maps its files to C(/dev/<relative path>); the gpuserve lab keeps its SIMULATED GPUs as
        regular files under C(/var/lib/gpuserve-lab/gpus).
    type: path
    default: /dev
  patterns:
    description: Glob patterns, relative to O(device_root), of the nodes to discover.
    type: list
    elements: str
    default: ['nvidia[0-9]*', 'nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools', 'nvidia-modeset', 'nvidia-caps/*']
  expect_gpus:
    description: Fail unless exactly this many C(nvidiaN) nodes are wanted (a GPU fallen off the bus is found here).
    type: int
  gid:
    description: Group of the device node inside the container (C(gid=) of the entry).
    type: int
  uid:
    description: Owner of the device node inside the container (C(uid=) of the entry).
    type: int
  mode:
    description: Access mode of the device node inside the container, octal, for example V(0666).
    type: str
  prune:
    description: Remove C(devN) entries for C(/dev/nvidiaN) nodes that are not wanted any more.
    type: bool
    default: false
  method:
    description:
      - V(api) changes the config through the PVE API (needs C(root@pam) and O(api_password) for C(devN)).
      - V(pct) runs O(pct_path) on the node (run the module on the PVE host); it needs no API credentials.
      - V(auto) picks V(api) when O(api_user=root@pam) and O(api_password) are given, else V(pct).
    type: str
    choices: [auto, api, pct]
    default: auto
  pct_path:
    description: The node's C(pct).
    type: path
    default: /usr/sbin/pct
  restart:
    description:
      - Reboot the container when its device set changed and it is running.
      - Also when the config already holds the wanted entries but the running container does not (PVE keeps a
        changed devN of a running container pending until it restarts, for example a change applied after a run
        gave up waiting for the API, or a run killed before its restart); RV(pending) lists them.
    type: bool
    default: false
  lock_retries:
    description:
      - How many more times to try a change PVE refused because the container is locked (backup, snapshot,
        another task holding its config). Then the module fails with PVE's message.
    type: int
    default: 5
  lock_retry_delay:
    description: Seconds between those tries.
    type: float
    default: 2.0
  task_timeout:
    description:
      - Seconds to wait for the reboot task. A task that ends in error fails at once with its exit status.
    type: int
    default: 120
  api_host:
    description: PVE API host. Falls back to E(PROXMOX_HOST).
    type: str
  api_port:
    description: PVE API port. Falls back to E(PROXMOX_PORT).
    type: int
  api_user:
    description: PVE user, for example V(root@pam). Falls back to E(PROXMOX_USER).
    type: str
  api_password:
    description: Password of O(api_user). Falls back to E(PROXMOX_PASSWORD). Never logged.
    type: str
  api_token_id:
    description:
      - API token name (with O(api_user)) or full token id C(user@realm!name). Falls back to E(PROXMOX_TOKEN_ID).
      - PVE refuses C(devN) from tokens; with a token only, O(method=auto) uses C(pct).
    type: str
  api_token_secret:
    description: API token secret. Falls back to E(PROXMOX_TOKEN_SECRET). Never logged.
    type: str
  ca_path:
    description: CA certificate to verify the API's TLS certificate with. Falls back to E(PROXMOX_CA_PATH).
    type: path
  validate_certs:
    description: Verify the API's TLS certificate. Falls back to E(PROXMOX_VALIDATE_CERTS).
    type: bool
    default: true
  api_timeout:
    description: Seconds per API request. Falls back to E(PROXMOX_API_TIMEOUT).
    type: int
    default: 30
notes:
  - Requires proxmoxer on the host that runs the module for O(method=api).
  - The gpuserve lab's PVE API is fakepve (SIMULATED); the lab's C(pct) hands C(config) and C(set) to it.
seealso:
  - module: community.proxmox.proxmox
  - name: pct(1), devN options
    description: PVE's description of C(devN) device passthrough.
    link: https://pve.proxmox.com/pve-docs/pct.1.html
"""

EXAMPLES = r"""
- name: Pass every GPU of the host into CT 101, through pct on the node
  gpuserve.sglang.proxmox_lxc_gpu:
    vmid: 101
    method: pct
    expect_gpus: 8
    mode: "0666"
  delegate_to: "{{ gpuserve_pve_host }}"

- name: The same through the API as root@pam, restarting the container if the set changed
  gpuserve.sglang.proxmox_lxc_gpu:
    vmid: 101
    node: pve1
    devices: "{{ __proxmox_container_device_paths }}"
    api_host: pve1.example.org
    api_user: root@pam
    api_password: "{{ vault_proxmox_root_password }}"
    restart: true

- name: In the lab, where the SIMULATED GPUs are files under /var/lib/gpuserve-lab/gpus
  gpuserve.sglang.proxmox_lxc_gpu:
    vmid: 101
    device_root: /var/lib/gpuserve-lab/gpus
    method: pct
"""

RETURN = r"""
method:
  description: How the config was read and changed.
  returned: always
  type: str
  sample: pct
devices:
  description: The wanted C(devN) paths, in order.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidia0, /dev/nvidia1, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]
entries:
  description: The container's C(devN) entries after the change (or as they would be, in check mode).
  returned: when the config was read
  type: dict
  sample: {dev0: "/dev/nvidia0,mode=0666", dev1: "/dev/nvidiactl,mode=0666"}
set:
  description: The entries written (or that would be).
  returned: when the config was read
  type: dict
delete:
  description: The entries removed (or that would be).
  returned: when the config was read
  type: list
  elements: str
restart_required:
  description: The device set changed, or is pending, while the container runs, and it was not restarted.
  returned: always
  type: bool
pending:
  description: The devN keys whose wanted entries are in the config but not in the running container.
  returned: when the config holds the wanted entries and the running container does not
  type: list
  elements: str
  sample: [dev0, dev1]
restarted:
  description: The container was rebooted to take the new device set.
  returned: always
  type: bool
attempts:
  description: Tries the change took (more than one when the container was locked).
  returned: when changed outside check mode
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._pve_lxc_gpu import argument_spec, run


def main():
    run(AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True))


if __name__ == '__main__':
    main()
