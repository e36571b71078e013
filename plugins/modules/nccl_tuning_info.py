#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_tuning_info
short_description: Read where the NCCL tuning goes in a container, or prove that its variables reach a process
version_added: "0.2.0"
description:
  - With O(read=state), reads what the C(nccl_tuning) role decides from; whether the venv's Python exists and its
    site-packages (as the venv's own C(sysconfig) says), whether systemd runs (C(/run/systemd/system)), each of
    O(files) and the hook's C(.py) and C(.pth) in site-packages (sha1 as M(ansible.builtin.stat) computes it, mode,
    owner), and each of O(dirs) (whether it is a directory, mode, owner).
  - With O(read=proof), runs the three proofs, each exactly as its own command would run; O(proof_script) under
    C(env -i) with the venv's Python (a C(spawn) child must see every variable of O(expect) with its value); with
    O(systemd=true), C(systemd-run --property=EnvironmentFile=<env_file> /usr/bin/env) (how systemd reads the
    file); and C(env -i /bin/sh -l -c env) (a clean login shell). It returns each one's status and output; the role
    judges them.
  - Read-only; always returns C(changed=false).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
  - gpuserve.sglang._attributes.info_module
options:
  read:
    description: What to read, V(state) or V(proof).
    type: str
    required: true
    choices: [state, proof]
  venv:
    description: The venv whose Python runs SGLang.
    type: path
    required: true
  hook_module:
    description: The name of the startup hook module in the venv's site-packages (its C(.py) and C(.pth)).
    type: str
    required: true
  files:
    description: Files to report, with O(read=state).
    type: list
    elements: path
    default: []
  dirs:
    description: Directories to report, with O(read=state).
    type: list
    elements: path
    default: []
  proof_script:
    description: The proof script in the container, with O(read=proof).
    type: path
  expect:
    description: The variables every process must see, name to value (strings), with O(read=proof).
    type: dict
  env_file:
    description: The systemd EnvironmentFile, with O(read=proof).
    type: path
  systemd:
    description: Also prove systemd's reading of O(env_file), with O(read=proof).
    type: bool
    default: false
  command_timeout:
    description: Seconds each command may take (coreutils C(timeout)); more than V(0).
    type: float
    default: 300.0
"""

EXAMPLES = r"""
- name: Read the venv and the files the NCCL tuning goes into
  gpuserve.sglang.nccl_tuning_info:
    read: state
    venv: /opt/sglang/venv
    hook_module: gpuserve_nccl_env
    files: [/etc/gpuserve/nccl.env]
    dirs: [/etc/gpuserve]
  register: nccl_state

- name: Prove the spawn child, systemd's reading of the EnvironmentFile and a login shell
  gpuserve.sglang.nccl_tuning_info:
    read: proof
    venv: /opt/sglang/venv
    hook_module: gpuserve_nccl_env
    proof_script: /usr/local/lib/gpuserve/nccl_env_proof.py
    expect: {NCCL_PROTO: LL}
    env_file: /etc/gpuserve/nccl.env
    systemd: "{{ nccl_state.systemd }}"
  register: nccl_proof
"""

RETURN = r"""
python_exists:
  description: Whether the venv's Python is executable.
  returned: O(read=state)
  type: bool
purelib:
  description: The venv's site-packages; null when its Python is missing or cannot tell (then RV(purelib_error)).
  returned: O(read=state)
  type: str
purelib_error:
  description: The failed site-packages probe, as C(rc), C(stdout) and C(stderr).
  returned: O(read=state) when the probe failed
  type: dict
systemd:
  description: Whether systemd runs in the container.
  returned: O(read=state)
  type: bool
files:
  description: Per path, C(exists) and, when it does, C(isdir), C(mode), C(uid), C(gid) and C(sha1).
  returned: O(read=state)
  type: dict
dirs:
  description: Per path, C(exists) and, when it does, C(isdir), C(mode), C(uid) and C(gid).
  returned: O(read=state)
  type: dict
spawn:
  description: The proof script's run, as C(rc), C(stdout) (its JSON verdict) and C(stderr).
  returned: O(read=proof)
  type: dict
login:
  description: The clean login shell's C(env), as C(rc), C(stdout) and C(stderr).
  returned: O(read=proof)
  type: dict
systemd_env:
  description: How systemd reads O(env_file) (C(systemd-run ... /usr/bin/env)), as C(rc), C(stdout) and C(stderr).
  returned: O(read=proof) and O(systemd=true)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._nccl_tuning import (
    INFO_ARGS, INFO_REQUIRED_IF, read_proof, read_state)
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner


def main():
    module = AnsibleModule(argument_spec=INFO_ARGS, required_if=INFO_REQUIRED_IF, supports_check_mode=True)
    run = Runner(module, timeout=module.params['command_timeout']).run
    read = read_state if module.params['read'] == 'state' else read_proof
    module.exit_json(changed=False, **read(run, module.params))


if __name__ == '__main__':
    main()
