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
    container connection (C(pct exec) over SSH) that is about 1.5 s per file. C(sglang_server) installs its helper
    and the collection code the helper runs with it on every run.
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

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _set_attrs(module, path, mode, owner, group, changed):
    """Mode, owner and group where they differ; whether anything did (check mode: would)."""
    changed = module.set_mode_if_different(path, mode, changed)
    changed = module.set_owner_if_different(path, owner, changed)
    return module.set_group_if_different(path, group, changed)


def _make_parents(module, directory, owner, group):
    """Creates the missing directories above a file (0755, owner, group), outermost first."""
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    for path in reversed(missing):
        os.mkdir(path, 0o755)
        _set_attrs(module, path, "0755", owner, group, False)


def install(module, files, owner, group):
    """Writes what differs; returns the paths that changed (or would, in check mode)."""
    for item in files:  # every item checked before the first is written
        path, mode = item["path"], item["mode"]
        if not os.path.isabs(path):
            module.fail_json(msg="install_files: path must be absolute, got %r" % path)
        try:
            int(mode, 8)
        except ValueError:
            module.fail_json(msg="install_files: mode of %s must be an octal string such as '0644', got %r"
                             % (path, mode))
    changed = []
    for item in files:
        path, mode = item["path"], item["mode"]
        want = to_bytes(item["content"], errors="surrogate_or_strict")
        if _read(path) != want:
            changed.append(path)
            if module.check_mode:
                continue
            directory = os.path.dirname(path)
            _make_parents(module, directory, owner, group)
            fd, tmp = tempfile.mkstemp(prefix=".install_files.", dir=directory)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(want)
                    handle.flush()
                    os.fsync(handle.fileno())
                module.atomic_move(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            _set_attrs(module, path, mode, owner, group, True)
        elif _set_attrs(module, path, mode, owner, group, False):  # in check mode: reports, changes nothing
            changed.append(path)
    return changed


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
