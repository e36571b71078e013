# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r'''
name: controller_run
short_description: This ansible-playbook run as a lock owner, or whether a recorded run still lives
version_added: 0.1.0
description:
  - Without O(check), returns this run's identity as the sglang_server lifecycle lock records it, read on the
    controller; the C(ansible-playbook) process is the outermost ancestor of this process with the same command
    line (Ansible's workers are forks of it).
  - With O(check), says whether the run it describes is still alive, as far as this controller can tell.
    V(alive) or V(dead) when it ran on this controller (same host name and boot); V(dead) also when this host
    booted since; V(unknown) when it ran on another controller or the record lacks a field (nothing here can
    tell).
options:
  check:
    description: A run identity returned earlier (by this lookup, on any controller).
    type: dict
author:
  - gpuserve engineers (@gpuserve)
'''

EXAMPLES = r'''
- name: Who is this run
  ansible.builtin.debug:
    msg: "{{ lookup('gpuserve.sglang.controller_run') }}"

- name: Is the run that holds the lock still running?
  ansible.builtin.debug:
    msg: "{{ lookup('gpuserve.sglang.controller_run', check=holder.run) }}"
'''

RETURN = r'''
_raw:
  description:
    - Without O(check), one dict with C(host), C(boot_id), C(pid), C(start_ticks) (the process start in clock
      ticks after boot, which tells a reused PID apart), C(started) (ISO 8601 UTC), C(user) and C(playbooks) (the
      playbooks on its command line, as C(ansible-playbook)'s own parser reads them; an inventory or vars file
      given with C(-i) or C(-e @FILE) is not one).
    - With O(check), one of V(alive), V(dead), V(unknown).
  type: list
  elements: raw
'''

from ansible.plugins.lookup import LookupBase

# the logic lives in module_utils, shared with the action gpuserve.sglang.lifecycle_lock
from ansible_collections.gpuserve.sglang.plugins.module_utils._controller_run import (  # noqa: F401 pylint: disable=unused-import
    boot_id, boot_time, controller_pid, identity, playbooks_of, state)


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        check = kwargs.get('check')
        if check is not None:
            return [state(check)]
        return [identity()]
