# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r'''
name: preload
type: aggregate
short_description: Loads this collection's connection, action and filter plugins once in the controller
version_added: "0.2.0"
author: gpuserve engineers (@gpuserve)
description:
  - Prints nothing. When the run starts, it loads in the controller's main process the connection plugin
    C(gpuserve.sglang.pct_remote) (and with it paramiko), this collection's action plugins, and its filter plugins.
  - Ansible forks one worker per task. A worker inherits what the main process has loaded, and would otherwise
    import paramiko and compile each collection plugin it uses from source, on every task; for a filter, every
    filter file of the collection (docs/decisions.md has the figures).
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
from ansible.plugins.loader import action_loader, connection_loader, filter_loader

# (loader, name): the connection (with paramiko); this collection's action plugins (and the module_utils they
# import); any one filter of it, since ansible-core finds a collection's filter by loading every filter file of the
# collection, so one lookup loads them all. A worker compiles a collection plugin from its source each time.
PRELOAD = (
    (connection_loader, 'gpuserve.sglang.pct_remote'),
    (action_loader, 'gpuserve.sglang.lifecycle_lock'),
    (action_loader, 'gpuserve.sglang.result_line'),
    (action_loader, 'gpuserve.sglang.setting_types'),
    (filter_loader, 'gpuserve.sglang.sglang_state'),
)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gpuserve.sglang.preload'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super().__init__(display=display, options=options)
        for loader, name in PRELOAD:
            try:
                # a plugin with more to warm up (the specs setting_types reads) says so with a preload()
                getattr(loader.get(name, class_only=True), 'preload', lambda: None)()
            except Exception:  # pylint: disable=broad-except
                # Only a warm-up: the task that needs the plugin reports the real error.
                pass
