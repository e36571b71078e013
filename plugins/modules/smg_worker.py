#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: smg_worker
short_description: Register an SGLang server with SGLang's gateway (SMG), or drain and remove it
version_added: "0.2.0"
description:
  - Manages one worker of SMG (Shepherd Model Gateway, PyPI C(smg), formerly C(sglang-router)) through its worker REST
    API, found by its URL (the gateway gives a worker a new id on every registration).
  - V(state=present) registers the worker (C(POST /workers)), or brings its labels, priority and health settings to
    the wanted values (C(PATCH), labels merged as the gateway merges them); a re-run with nothing to change changes
    nothing. With O(wait), it then waits until the gateway reports the worker C(ready) and healthy.
  - V(state=absent) takes the worker out of routing with C(DELETE) (the gateway marks it C(draining) and sends it no
    new request), waits until the gateway has no request in flight to it (its C(load) is 0) and, with
    O(worker_loads), until the worker itself runs none, bounded by O(drain_timeout); then, with O(wait), until the
    gateway has dropped it. The gateway itself only waits a fixed C(drain_settle_secs) before it drops a worker,
    whatever is still in flight, so stop a server only after this returns.
  - Register a server only once it answers C(/health) with 200; a worker the gateway cannot probe stays pending, and
    the gateway retries it only every C(--worker-startup-check-interval) seconds (30 by default).
  - Checked against smg 1.13.0.
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  gateway_url:
    description: The gateway's base URL, for example V(http://10.66.0.1:30080).
    type: str
    required: true
  url:
    description: The worker's URL as the gateway reaches it, for example V(http://10.66.0.101:30000).
    type: str
    required: true
  state:
    description: Whether the worker is registered.
    type: str
    choices: [present, absent]
    default: present
  labels:
    description: Labels the worker must carry (values are strings at the gateway); other labels are left alone.
    type: dict
    default: {}
  priority:
    description: The worker's priority at the gateway; left alone when unset.
    type: int
  health:
    description: Per-worker health settings; those unset are left alone.
    type: dict
    suboptions:
      timeout_secs:
        description: Seconds one health probe may take.
        type: int
      check_interval_secs:
        description: Seconds between health probes.
        type: int
      success_threshold:
        description: Successful probes in a row that make the worker healthy.
        type: int
      failure_threshold:
        description: Failed probes in a row that make the worker unhealthy.
        type: int
      disable_health_check:
        description: Turn the gateway's health probes of this worker off.
        type: bool
      drain_settle_secs:
        description: Seconds the gateway keeps a removed worker C(draining) before it drops it.
        type: int
  api_key:
    description:
      - An admin control-plane key of the gateway (C(--control-plane-api-keys ID:NAME:admin:KEY)), sent as a bearer
        token. Leave unset for a gateway without control-plane keys.
      - Never logged or returned.
    type: str
  worker_api_key:
    description: The key the gateway sends on its probes of this worker (the worker's C(--api-key)). Never logged.
    type: str
  wait:
    description:
      - V(state=present) waits until the worker is C(ready) and healthy; V(state=absent) until the gateway has dropped
        it.
    type: bool
    default: true
  wait_timeout:
    description: Seconds O(wait) may take.
    type: float
    default: 120
  drain_timeout:
    description:
      - V(state=absent) only. Seconds to wait for the gateway's in-flight requests to the worker to reach 0 after it
        stopped routing to it; the task fails when some are still running then. V(0) does not wait.
    type: float
    default: 300
  keep_healthy:
    description:
      - V(state=absent) only. Refuse to take the worker out (fail, change nothing) when fewer than this many other
        workers of the gateway are C(ready) and healthy, so that a rollout never leaves the gateway with nothing to
        route to. V(0) does not check. Counted before the removal; a worker already C(draining) is not checked.
    type: int
    default: 0
  worker_loads:
    description:
      - V(state=absent) only. Also wait until the worker itself runs no request (its C(GET /v1/loads), SGLang >= 0.5.23,
        summed over C(num_running_reqs) and C(num_waiting_reqs); nothing listening counts as none). This covers
        requests still streaming after the gateway dropped the worker and requests sent past the gateway.
      - V(false) relies on the gateway's count alone, which ends when the gateway drops the worker.
    type: bool
    default: true
  poll_interval:
    description: Seconds between two looks at the gateway while waiting.
    type: float
    default: 0.5
  timeout:
    description: Seconds one HTTP request to the gateway may take.
    type: float
    default: 10
  validate_certs:
    description: Check the gateway's TLS certificate (for an https O(gateway_url)).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Reads the gateway and reports what it would change; sends nothing that changes it.
notes:
  - The HTTP requests are made from the host the task runs on; delegate it to a host that reaches the gateway.
"""

EXAMPLES = r"""
- name: Register the replica once its /health answers
  gpuserve.sglang.smg_worker:
    gateway_url: http://10.66.0.1:30080
    url: http://10.66.0.101:30000
    labels:
      replica: ct101
    health:
      drain_settle_secs: 600
    api_key: "{{ smg_admin_key }}"
  delegate_to: localhost

- name: Drain the replica before its server stops (no new requests, wait for in-flight ones)
  gpuserve.sglang.smg_worker:
    gateway_url: http://10.66.0.1:30080
    url: http://10.66.0.101:30000
    state: absent
    drain_timeout: 600
    api_key: "{{ smg_admin_key }}"
  delegate_to: localhost
"""

RETURN = r"""
action:
  description: What was done (or, in check mode, would be) - V(added), V(updated), V(removed) or V(none).
  returned: always
  type: str
worker:
  description: The gateway's view of the worker (id, url, model_id, status, is_healthy, load, priority, labels, health).
  returned: when the worker was registered before or after the task
  type: dict
patch_keys:
  description: The settings an update changed (labels, priority, health).
  returned: when action is updated
  type: list
  elements: str
ready_after_s:
  description: Seconds until the gateway reported the worker ready.
  returned: state=present with wait, not in check mode
  type: float
drained_after_s:
  description: Seconds until the gateway had no request in flight to the worker.
  returned: state=absent with drain_timeout above 0, when the worker was registered
  type: float
"""

from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gpuserve.sglang.plugins.module_utils._smg import Gateway, SmgError, Waiter, run

HEALTH = dict(timeout_secs=dict(type='int'), check_interval_secs=dict(type='int'),
              success_threshold=dict(type='int'), failure_threshold=dict(type='int'),
              disable_health_check=dict(type='bool'), drain_settle_secs=dict(type='int'))

ARGS = dict(
    gateway_url=dict(type='str', required=True),
    url=dict(type='str', required=True),
    state=dict(type='str', choices=['present', 'absent'], default='present'),
    labels=dict(type='dict', default={}),
    priority=dict(type='int'),
    health=dict(type='dict', options=HEALTH),
    api_key=dict(type='str', no_log=True),
    worker_api_key=dict(type='str', no_log=True),
    wait=dict(type='bool', default=True),
    wait_timeout=dict(type='float', default=120.0),
    drain_timeout=dict(type='float', default=300.0),
    keep_healthy=dict(type='int', default=0),
    worker_loads=dict(type='bool', default=True),
    poll_interval=dict(type='float', default=0.5),
    timeout=dict(type='float', default=10.0),
    validate_certs=dict(type='bool', default=True),
)


def sender(validate_certs):
    def send(method, url, headers, body, timeout):
        try:
            res = open_url(url, data=body, headers=headers, method=method, timeout=timeout,
                           validate_certs=validate_certs, follow_redirects='none')
            return res.getcode(), res.read().decode('utf-8', 'replace')
        except HTTPError as exc:
            text = exc.read() if exc.fp is not None else b''
            return exc.code, text.decode('utf-8', 'replace')
    return send


def main():
    module = AnsibleModule(argument_spec=ARGS, supports_check_mode=True)
    p = module.params
    for name in ('wait_timeout', 'drain_timeout', 'poll_interval', 'timeout'):
        if p[name] < 0 or (name in ('poll_interval', 'timeout') and p[name] == 0):
            module.fail_json(msg='{0} must be above 0 (drain_timeout and wait_timeout may be 0), got {1}'.format(
                name, p[name]))
    if p['keep_healthy'] < 0:
        module.fail_json(msg='keep_healthy is a count of other healthy workers, 0 or more, got {0}'.format(
            p['keep_healthy']))
    if not p['gateway_url'].startswith(('http://', 'https://')) or not p['url'].startswith(('http://', 'https://')):
        module.fail_json(msg='gateway_url and url are http:// or https:// URLs, got {0!r} and {1!r}'.format(
            p['gateway_url'], p['url']))
    gw = Gateway(p['gateway_url'], sender(p['validate_certs']), api_key=p['api_key'], timeout=p['timeout'])
    try:
        result = run(gw, p, module.check_mode, Waiter(p['poll_interval']))
    except SmgError as exc:
        module.fail_json(msg=exc.message, worker=exc.worker)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
