#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_install_info
short_description: Read an SGLang install in a container (tree, venv, packages), and check that SGLang imports
version_added: "0.2.0"
description:
  - With O(read=state), reads everything the C(sglang_install) role decides from, in one call; whether each of
    O(system_packages) is installed (C(dpkg-query)); the tree at O(src) (its HEAD and changes, from one
    C(git status --porcelain=v2), reported as C(git status --porcelain) lines), O(pin) resolved to a commit and
    the URL of C(origin); the venv at O(venv) (its Python, C(pyvenv.cfg), the C(sglang) distribution with its
    C(direct_url.json), and whether every one of O(packages) and all it requires is installed at a version its
    requirement and O(constraints) allow); and each of O(files) (sha1 as M(ansible.builtin.stat) computes it, mode,
    owner, and its text below 64 KiB).
  - With O(read=facts), reads what the role publishes after an install, the tree and the installed SGLang version;
    with O(smoke=true), also imports C(sglang.srt.server_args) in the venv, so a missing dependency shows now and
    not at the server's start.
  - With O(smoke_record), a passed import is recorded with a fingerprint of its inputs (the commit, C(pyvenv.cfg),
    the venv's Python and every distribution's name and version); while the fingerprint holds the import is not
    repeated and C(cached_since) in RV(smoke) says since when it holds. A tree with changes has no fingerprint, so it
    imports every time; a failed import removes the record. The record is a cache of a check, so writing it is not
    reported as a change.
  - Every command's status and output are returned, never raised; the role decides. Always returns
    C(changed=false).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  read:
    description: What to read, V(state) (before the install) or V(facts) (after it).
    type: str
    required: true
    choices: [state, facts]
  src:
    description: The SGLang git tree.
    type: path
    required: true
  venv:
    description: The venv SGLang is installed into.
    type: path
    required: true
  pin:
    description: The commit (or, where the role allows it, a ref name) to resolve, with O(read=state).
    type: str
  files:
    description: Files to report, with O(read=state).
    type: list
    elements: path
    default: []
  system_packages:
    description: Debian packages whose installed state to report, with O(read=state).
    type: list
    elements: str
    default: []
  packages:
    description: Requirements whose closure must be installed in the venv, with O(read=state).
    type: list
    elements: str
    default: []
  constraints:
    description: Requirement pins the installed versions must also satisfy, with O(read=state).
    type: list
    elements: str
    default: []
  smoke:
    description: Import C(sglang.srt.server_args) in the venv, with O(read=facts).
    type: bool
    default: false
  smoke_record:
    description: Where the passed import check is recorded (see above); unset, the import runs every time.
    type: path
  command_timeout:
    description: Seconds each command may take (coreutils C(timeout)); more than V(0).
    type: float
    default: 600.0
attributes:
  check_mode:
    support: full
    details: Reads as outside check mode, and runs the import check unless O(smoke_record) holds a valid record; it
      neither writes nor removes the record.
"""

EXAMPLES = r"""
- name: Read the system packages, tree, venv and install record
  gpuserve.sglang.sglang_install_info:
    read: state
    src: /opt/sglang/src
    venv: /opt/sglang/venv
    pin: 0123456789abcdef0123456789abcdef01234567
    system_packages: [git, python3-venv]
    files: [/opt/sglang/constraints.txt]
  register: install_state

- name: Read the installed commit and version, and check that SGLang imports
  gpuserve.sglang.sglang_install_info:
    read: facts
    src: /opt/sglang/src
    venv: /opt/sglang/venv
    smoke: true
    smoke_record: /var/lib/gpuserve/sglang_install_smoke.json
  register: install_facts
"""

RETURN = r"""
dpkg:
  description: Per package of O(system_packages), whether it is installed.
  returned: O(read=state)
  type: dict
  sample: {git: true, python3-venv: true}
git:
  description: C(exists) (the tree has C(.git)); when it does, C(tree) (as RV(tree)), C(want) (C(git rev-parse) of
    O(pin), as C(rc), C(stdout), C(stderr)) and C(remote_url) (C(git remote get-url origin), likewise).
  returned: O(read=state)
  type: dict
venv:
  description: C(python_exists), C(pyvenv_cfg) (as an entry of RV(files)) and, when the Python runs, C(dist)
    (C(version), C(direct_url)) and C(intact) (C(ok), C(problems), C(checked)), or C(error) when its probe failed.
  returned: O(read=state)
  type: dict
files:
  description: Per path of O(files), C(exists) and, when it does, C(sha1), C(mode), C(uid), C(gid) and C(text).
  returned: O(read=state)
  type: dict
tree:
  description: The tree's C(rc), C(error), C(commit) (null before the first commit or when git failed), C(changes)
    (C(git status --porcelain) lines) and C(dirty).
  returned: O(read=facts)
  type: dict
version:
  description: The installed SGLang version, as C(rc), C(stdout) and C(stderr).
  returned: O(read=facts)
  type: dict
smoke:
  description: The import check, as C(rc), C(stdout) and C(stderr); C(cached_since) (UTC, ISO 8601) when a valid
    record stood for it.
  returned: O(read=facts) and O(smoke=true)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner
from ansible_collections.gpuserve.sglang.plugins.module_utils._sglang_install import (
    INFO_ARGS, INFO_REQUIRED_IF, read_facts, read_state)


def main():
    module = AnsibleModule(argument_spec=INFO_ARGS, required_if=INFO_REQUIRED_IF, supports_check_mode=True)
    run = Runner(module, timeout=module.params['command_timeout']).run
    if module.params['read'] == 'state':
        module.exit_json(changed=False, **read_state(run, module.params))
    module.exit_json(changed=False, **read_facts(run, module.params, write=not module.check_mode))


if __name__ == '__main__':
    main()
