#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: install_files
short_description: Install several small text files sent from the controller in one call, only those that differ
version_added: "0.2.0"
description:
  - Writes each file whose content, mode, owner or group differs from what is given, atomically (a temporary file
    in the same directory, renamed over the old one), and creates missing parent directories (mode 0755).
  - One module call for all the files, where M(ansible.builtin.copy) makes several round trips per file; through a
    container connection (C(pct exec) over SSH) that is about 1.5 s per file. Its writing is shared with
    M(gpuserve.sglang.sglang_helper), which installs the container helper from its own payload.
  - For small text files read on the controller (for example with C(lookup('ansible.builtin.file', PATH,
    rstrip=false))); the content travels in the module arguments.
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  files:
    description: The files to install.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute destination path.
        type: path
        required: true
      content:
        description: The file's whole content (UTF-8 text), written as given.
        type: str
        required: true
      mode:
        description: Octal mode as a string, for example V("0644").
        type: str
        default: "0644"
  owner:
    description: Owner of every file (and of the directories it creates).
    type: str
    default: root
  group:
    description: Group of every file (and of the directories it creates).
    type: str
    default: root
attributes:
  check_mode:
    support: full
    details: Reports which files would change and writes nothing.
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Install a script and the library it imports in one call
  gpuserve.sglang.install_files:
    files:
      - path: /usr/local/sbin/tool
        content: "{{ lookup('ansible.builtin.file', 'tool.py', rstrip=false) }}"
        mode: "0755"
      - path: /usr/local/lib/tool/helpers.py
        content: "{{ lookup('ansible.builtin.file', 'helpers.py', rstrip=false) }}"
"""

RETURN = r"""
changed_files:
  description: The paths written (or that would be written, in check mode), in the order given.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/sbin/tool]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpuserve.sglang.plugins.module_utils._install_files import install


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", required=True, options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", required=True),
                mode=dict(type="str", default="0644"),
            )),
            owner=dict(type="str", default="root"),
            group=dict(type="str", default="root"),
        ),
        supports_check_mode=True,
    )
    try:
        changed = install(module, module.params["files"], module.params["owner"], module.params["group"])
    except OSError as exc:
        module.fail_json(msg="install_files: %s" % to_native(exc))
    module.exit_json(changed=bool(changed), changed_files=changed)


if __name__ == "__main__":
    main()
