#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_helper
short_description: Install the container helper gpuserve-sglang
version_added: "0.2.0"
description:
  - Installs the helper that the C(sglang_server) role, its C(sglang.service) unit (C(ExecStartPre) gate,
    C(ExecStart) exec), the lifecycle, the benchmark and an operator run inside the container, with the commands
    C(gpuserve-sglang exec), C(gate), C(driver), C(lock), C(validate-args), C(env-proof), C(worker-env), C(source),
    C(wait-ready) and C(state), each printing one JSON object.
  - The helper is this collection's package of C(plugins/module_utils) files (C(_helper_cli.py) and the files it
    imports, C(_gate.py) and C(_nvidia_smi.py) among them), written as they are under O(lib) at their import name,
    C(ansible_collections/gpuserve/sglang/plugins/module_utils/), mode 0644; and a launcher of a few lines at
    O(path), mode 0755, whose interpreter is O(python), that puts O(lib) first on C(sys.path) and runs the
    package's C(main) function. Every file of the package loads with the Python standard library alone.
  - The files' contents come from this module's own payload, which carries the package because the module imports
    it; nothing is read on the controller. So the unit's gate runs the same code as M(gpuserve.sglang.gpu_memory_gate)
    and M(gpuserve.sglang.gpu_release).
  - Only a file whose content or mode differs is written, atomically (a temporary file in the same directory,
    renamed over the old one), owned by root; missing parent directories are created (0755).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  lib:
    description:
      - The folder the package is installed under, at C(ansible_collections/gpuserve/sglang/plugins/module_utils/)
        in it.
    type: path
    default: /usr/local/lib/gpuserve-sglang
  path:
    description: The launcher, the command C(gpuserve-sglang) that the unit, the role and an operator run.
    type: path
    default: /usr/local/sbin/gpuserve-sglang
  python:
    description:
      - The launcher's interpreter line. The role's tasks and the unit name C(/usr/bin/python3) in their command
        lines; C(validate-args) runs under the SGLang venv's Python, which imports SGLang.
    type: path
    default: /usr/bin/python3
attributes:
  check_mode:
    support: full
    details: Reports in RV(changed_files) which files would be written or have their mode changed, and writes
      nothing.
"""

EXAMPLES = r"""
- name: Install the container helper where the sglang_server role does
  gpuserve.sglang.sglang_helper:
  register: helper

- name: Run one of its commands
  ansible.builtin.command:
    argv: [/usr/bin/python3, /usr/local/sbin/gpuserve-sglang, lock, status]
  changed_when: false

- name: Install it elsewhere, for a look at a new version beside the one in use
  gpuserve.sglang.sglang_helper:
    lib: /root/gpuserve-sglang-next
    path: /root/gpuserve-sglang-next/gpuserve-sglang
"""

RETURN = r"""
changed_files:
  description: The files written (or that would be written, in check mode), the package's first, the launcher last.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/gpuserve-sglang/ansible_collections/gpuserve/sglang/plugins/module_utils/_helper_lock.py]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_cli import files
from ansible_collections.gpuserve.sglang.plugins.module_utils._install_files import install


def main():
    module = AnsibleModule(
        argument_spec=dict(
            lib=dict(type="path", default="/usr/local/lib/gpuserve-sglang"),
            path=dict(type="path", default="/usr/local/sbin/gpuserve-sglang"),
            python=dict(type="path", default="/usr/bin/python3"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        changed = install(module, files(p["lib"], p["path"], p["python"]), "root", "root", name="sglang_helper")
    except OSError as exc:
        module.fail_json(msg="sglang_helper: %s" % to_native(exc))
    module.exit_json(changed=bool(changed), changed_files=changed)


if __name__ == "__main__":
    main()
