#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lifecycle_lock
short_description: Take or release the sglang_server lifecycle lock of a container (one run at a time)
version_added: "0.2.0"
description:
  - With O(state=acquired), takes the container's lifecycle lock through its helper (C(gpuserve-sglang lock acquire)),
    naming this C(ansible-playbook) run as the owner (controller host, PID, user, playbooks, play, start). When another
    run holds it, waits up to O(wait) seconds, then fails naming that run. A holder that was a run of this controller
    and is gone (its process ended, or the controller booted since) is taken over at once, and a line says so.
  - Re-entrant - when O(held) already carries a token, nothing is run and O(held) is returned.
  - With O(state=released), releases the lock when O(held) was taken with the same O(scope), else returns O(held) as
    it is, so that a nested entry point (the role's C(restart.yml) inside C(main.yml)) leaves its caller's lock alone.
  - Register the result as the variable passed to O(held) next time; its C(run), C(token) and C(scope) are the lock.
  - Runs on the controller (an action plugin) and runs the helper on the target with C(ansible.builtin.command).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  state:
    description: Whether this run must hold the lock (V(acquired)) or give it back (V(released)).
    type: str
    choices: [acquired, released]
    default: acquired
  scope:
    description: The entry point that takes the lock; only a release of the same scope gives it back.
    type: str
    required: true
  held:
    description: The lock this run holds, as this action returned it last (C(run), C(token), C(scope)); V({}) when none.
    type: dict
    default: {}
  helper:
    description: Path of the container helper C(gpuserve-sglang) on the target.
    type: path
    required: true
  path:
    description: Path of the lock file on the target.
    type: path
    required: true
  ttl:
    description: Lease of the lock in seconds; its holder process ends by itself after it. Required with O(state=acquired).
    type: int
  wait:
    description: Seconds to wait for a lock another run holds; V(0) fails at once.
    type: float
    default: 0
  steal:
    description: Token of a lock whose run is known to be dead; only the holder of exactly that token is ended.
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    details: Takes and releases nothing in check mode; returns O(held) as it is.
"""

EXAMPLES = r"""
- name: One run at a time changes this server
  gpuserve.sglang.lifecycle_lock:
    scope: main
    held: "{{ __sglang_server_lock | default({}) }}"
    helper: /usr/local/sbin/gpuserve-sglang
    path: /run/gpuserve/sglang-lifecycle.lock
    ttl: 3600
  register: __sglang_server_lock

- name: Release it
  gpuserve.sglang.lifecycle_lock:
    state: released
    scope: main
    held: "{{ __sglang_server_lock }}"
    helper: /usr/local/sbin/gpuserve-sglang
    path: /run/gpuserve/sglang-lifecycle.lock
  register: __sglang_server_lock
"""

RETURN = r"""
run:
  description: This run as the lock names it (C(host), C(boot_id), C(pid), C(start_ticks), C(started), C(user),
    C(playbooks), C(play)).
  returned: when a lock is held or was held
  type: dict
token:
  description: The helper's token of this hold; empty once released.
  returned: when a lock is held or was held
  type: str
  sample: 3f9a0c1d2e4b5a69
scope:
  description: The entry point that took the lock; empty once released.
  returned: when a lock is held or was held
  type: str
  sample: main
cleared:
  description: The owner of a lock left by a run that is gone, which this acquire cleared; null when none.
  returned: with O(state=acquired)
  type: dict
released:
  description: Whether this call released the lock.
  returned: with O(state=released)
  type: bool
"""
