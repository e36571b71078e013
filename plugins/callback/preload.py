# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r'''
name: preload
type: aggregate
short_description: Loads this collection's pct_remote connection, and paramiko, once in the controller
version_added: "0.2.0"
author: gpuserve engineers (@gpuserve)
description:
  - Prints nothing. When the run starts, it loads the connection plugin C(gpuserve.sglang.pct_remote), and with it
    paramiko, in the controller's main process. Ansible forks one worker per task; a worker inherits what the main
    process has imported, so it no longer imports paramiko itself. On a 2-core controller that import cost about
    60 ms on every task of a host reached through C(pct_remote), C(set_fact) and C(assert) included
    (docs/decisions.md).
  - A callback, not a strategy plugin, since ansible-core deprecates strategy plugins from outside
    C(ansible.builtin); a callback too is loaded in the main process before any worker forks.
  - This repository's C(ansible.cfg) enables it (C(callbacks_enabled)); elsewhere set
    C(ANSIBLE_CALLBACKS_ENABLED=gpuserve.sglang.preload). Without it every play runs the same, slower.
requirements:
  - enabled in C(callbacks_enabled)
notes:
  - When paramiko is missing, the preload is skipped; the connection then fails as it always would, naming it.
'''

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader

PRELOAD = ('gpuserve.sglang.pct_remote',)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gpuserve.sglang.preload'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super().__init__(display=display, options=options)
        for name in PRELOAD:
            try:
                connection_loader.get(name, class_only=True)
            except Exception:  # pylint: disable=broad-except
                # Only a warm-up: the task that needs the connection reports the real error.
                pass
