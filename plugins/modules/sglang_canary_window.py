#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_canary_window
short_description: Read SGLang servers' /metrics together, every few seconds, over a bounded window
version_added: "0.2.0"
description:
  - Reads C(/metrics) of every O(urls) at the start, then every O(interval) seconds until O(window) seconds have
    passed (the last reading at its end), all of them at each reading. The rolling deploy's canary step runs it on
    the gateway's host, which reaches every replica (docs/fleet.md).
  - Returns each page's lines of the metrics the canary reads (SGLang 0.5.23's names), to be parsed on the
    controller by prometheus_client's text parser (filter P(gpuserve.sglang.sglang_canary_verdict#filter)); a page
    that is not 200, or a request that failed, is returned as such, never as a failure of the task.
  - It changes nothing and always returns C(changed=false).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
  - gpuserve.sglang._attributes.INFO_MODULE
options:
  urls:
    description: Base URLs of the servers, for example V(http://10.66.0.104:30000).
    type: list
    elements: str
    required: true
  window:
    description: Seconds from the first reading to the last.
    type: float
    required: true
  interval:
    description: Seconds between two readings.
    type: float
    required: true
  timeout:
    description: Seconds one request may take.
    type: float
    default: 10
notes:
  - The requests are made from the host the task runs on; delegate it to a host that reaches the servers.
"""

EXAMPLES = r"""
- name: Read both replicas for two minutes, every 10 s
  gpuserve.sglang.sglang_canary_window:
    urls: [http://10.66.0.104:30000, http://10.66.0.102:30000]
    window: 120
    interval: 10
  delegate_to: gw100
  register: window
"""

RETURN = r"""
rounds:
  description:
    - One entry per reading, C({t, pages}), C(t) the epoch of the reading; C(pages) maps each URL to C({status, text})
      (with status 200, the page's lines of the metrics the canary reads; otherwise the start of the body) or
      C({status, error}) when the request failed (C(status) null).
  returned: always
  type: list
  elements: dict
"""

import time
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gpuserve.sglang.plugins.module_utils._sglang_metrics import read_window


def fetcher(timeout):
    def fetch(url):
        try:
            res = open_url(url, method='GET', timeout=timeout, follow_redirects='none')
            return res.getcode(), res.read().decode('utf-8', 'replace')
        except HTTPError as exc:
            return exc.code, (exc.read() if exc.fp is not None else b'').decode('utf-8', 'replace')
    return fetch


def main():
    module = AnsibleModule(argument_spec=dict(urls=dict(type='list', elements='str', required=True),
                                              window=dict(type='float', required=True),
                                              interval=dict(type='float', required=True),
                                              timeout=dict(type='float', default=10.0)),
                           supports_check_mode=True)
    p = module.params
    if p['window'] <= 0 or p['interval'] <= 0 or p['timeout'] <= 0 or p['interval'] > p['window']:
        module.fail_json(msg='window, interval and timeout are seconds above 0, interval at most the window; got '
                             'window {0}, interval {1}, timeout {2}'.format(p['window'], p['interval'], p['timeout']))
    module.exit_json(changed=False, rounds=read_window(p['urls'], p['window'], p['interval'], fetcher(p['timeout']),
                                                       time.time, time.sleep))


if __name__ == '__main__':
    main()
