#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: result_line
short_description: Print a run's machine-readable result as one line, PREFIX and JSON, and write it to a file
version_added: "0.2.0"
description:
  - Prints C(PREFIX <json>) as exactly one line on the controller's standard output (compact JSON, keys sorted),
    however the stdout callback formats task results (C(callback_result_format=yaml) folds a long C(debug) message
    over many lines). A script reads it with C(grep '^PREFIX ' | cut -d' ' -f2-).
  - With O(path), also writes the same value as JSON to that file on the controller (a temporary file, then a
    rename, so that a reader never sees half of it).
  - Runs on the controller only (an action plugin); the task's result does not repeat the line.
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  prefix:
    description: The line's first word, upper-case letters, digits and C(_), e.g. V(GPUSERVE_DEPLOY).
    type: str
    required: true
  result:
    description: The value printed after the prefix as JSON, and written to O(path).
    type: raw
    required: true
  path:
    description: A file on the controller to write O(result) to as JSON; its directory is created. Not written when
      unset.
    type: path
attributes:
  check_mode:
    support: full
    details: Prints and writes in check mode too (the result of a preview); nothing changes on a managed host.
"""

EXAMPLES = r"""
- name: The deployment's verified facts, one JSON line
  gpuserve.sglang.result_line:
    prefix: GPUSERVE_DEPLOY
    result: "{{ {'ct101': sglang_server_verification} }}"
    path: "{{ playbook_dir }}/../artifacts/deploy.json"
"""

RETURN = r"""
path:
  description: The file written, when O(path) was given.
  returned: when O(path) is set
  type: str
  sample: /srv/gpuserve/artifacts/deploy.json
"""
