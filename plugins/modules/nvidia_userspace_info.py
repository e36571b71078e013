#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_userspace_info
short_description: Read the NVIDIA driver a PVE host runs, or the userspace a container has, in one call
version_added: "0.2.0"
description:
  - With O(scope=host), on the PVE host, reads the loaded kernel module's version from C(/proc/driver/nvidia/version);
    only when that cannot be read, runs C(nvidia-smi --query-gpu=driver_version,count --format=csv,noheader).
  - With O(scope=container), in the container, lists the userspace libraries O(lib_dir)/O(lib_pattern) (regular
    files only, so the C(.run) installer's versioned library and not its links) and runs that query and C(nvidia-smi -L).
  - A command that is missing or does not answer within O(nvidia_smi_timeout) returns its status (127, or 124 and
    137 from coreutils C(timeout)), never a failure of the module; the C(nvidia_userspace) role compares host and
    container (filter P(gpuserve.sglang.nvidia_userspace_plan#filter)) and says what to do.
  - Read-only; always returns C(changed=false).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
  - gpuserve.sglang._attributes.info_module
options:
  scope:
    description: What to read, V(host) (the PVE host's kernel module) or V(container) (the container's userspace).
    type: str
    required: true
    choices: [host, container]
  lib_dir:
    description: Where the userspace libraries are, with O(scope=container).
    type: path
    default: /usr/lib/x86_64-linux-gnu
  lib_pattern:
    description: Shell pattern of the versioned library names in O(lib_dir), with O(scope=container).
    type: str
    default: libnvidia-ml.so.*.*
  nvidia_smi:
    description: nvidia-smi executable.
    type: str
    default: nvidia-smi
  nvidia_smi_timeout:
    description: Seconds one C(nvidia-smi) call may take (coreutils C(timeout)); more than V(0).
    type: float
    default: 120.0
"""

EXAMPLES = r"""
- name: Read the loaded kernel module's version on the PVE host
  gpuserve.sglang.nvidia_userspace_info:
    scope: host
  delegate_to: "{{ gpuserve_pve_host }}"
  register: host_driver

- name: Read the userspace libraries and nvidia-smi in the container
  gpuserve.sglang.nvidia_userspace_info:
    scope: container
  register: container_driver
"""

RETURN = r"""
proc:
  description: The text of C(/proc/driver/nvidia/version); null when it could not be read.
  returned: O(scope=host)
  type: str
smi:
  description: The driver version and count query, as C(rc), C(stdout) and C(stderr) (trailing newlines dropped).
    With O(scope=host), null when RV(proc) was read.
  returned: always
  type: dict
  sample: {rc: 0, stdout: "580.159.04, 8", stderr: ""}
libs:
  description: The versioned userspace libraries found, sorted.
  returned: O(scope=container)
  type: list
  elements: str
  sample: [/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04]
list:
  description: C(nvidia-smi -L), as C(rc), C(stdout) and C(stderr).
  returned: O(scope=container)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_userspace import INFO_ARGS, read
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner


def main():
    module = AnsibleModule(argument_spec=INFO_ARGS, supports_check_mode=True)
    runner = Runner(module, timeout=module.params['nvidia_smi_timeout'])
    module.exit_json(changed=False, **read(module.params, runner.run))


if __name__ == '__main__':
    main()
