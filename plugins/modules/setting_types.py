#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: setting_types
short_description: Check the type of every setting of this collection's roles, in the user's words
version_added: "0.2.0"
description:
  - Checks each variable that a role of this collection declares in its C(meta/argument_specs.yml) and that the
    inventory, the play or the command line sets, against the type declared there, accepting exactly what
    ansible-core's own check of a role's arguments accepts, but a string given for a list or a mapping (a role reads
    the variable as it was set, so ansible-core's comma split would not reach it).
  - Fails with one sentence per setting - the setting, what was given, what it must be, and an example (its default
    when it has one).
  - The role C(gpuserve.sglang.setting_types) runs it before every other role of the collection (it is a dependency
    of C(gpuserve.sglang.gpuserve), which every role depends on), so ansible-core's own message ("is of type list
    and we were unable to convert to dict") is not reached.
  - Runs on the controller only (an action plugin); changes nothing.
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options: {}
attributes:
  check_mode:
    support: full
    details: Reads only, in check mode too.
"""

EXAMPLES = r"""
- name: Every setting of the collection's roles has the type its role takes
  gpuserve.sglang.setting_types:
"""

RETURN = r"""
checked:
  description: The settings whose values were checked (set outside the roles' own defaults).
  returned: success
  type: list
  elements: str
  sample: [gpuserve_port, sglang_server_args]
"""
