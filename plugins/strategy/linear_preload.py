# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r'''
name: linear_preload
short_description: The linear strategy, with this collection's pct_remote connection loaded before workers fork
version_added: "0.2.0"
author: gpuserve engineers (@gpuserve)
description:
  - Runs tasks exactly as P(ansible.builtin.linear#strategy) does (plays, order, failures, handlers are unchanged).
  - Before the first task, loads the connection plugin C(gpuserve.sglang.pct_remote), and with it paramiko, in the
    controller's main process. Ansible forks one worker per task; a worker inherits what the main process has
    imported, so it no longer imports paramiko itself. On a 2-core controller that import cost about 60 ms on
    every task of a host reached through C(pct_remote), C(set_fact) and C(assert) included (docs/decisions.md).
  - "Set it per play (C(strategy: gpuserve.sglang.linear_preload)) or as C(ANSIBLE_STRATEGY)."
notes:
  - When paramiko is missing, the preload is skipped; the connection then fails as it always would, naming it.
'''

from ansible.plugins.loader import connection_loader
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

PRELOAD = ('gpuserve.sglang.pct_remote',)


class StrategyModule(LinearStrategyModule):
    def __init__(self, tqm):
        super().__init__(tqm)
        for name in PRELOAD:
            try:
                connection_loader.get(name, class_only=True)
            except Exception:  # pylint: disable=broad-except
                # Only a warm-up: the task that needs the connection reports the real error.
                pass
