# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of gpuserve.sglang.lifecycle_lock (its docs: plugins/modules/lifecycle_lock.py): the sglang_server
role's lifecycle lock, taken or released through the container helper (`gpuserve-sglang lock`), deciding on the
controller who this run is and whether the run that holds the lock is gone (plugins/module_utils/_lifecycle_lock.py,
_controller_run.py)."""
from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpuserve.sglang.plugins.module_utils import _controller_run, _lifecycle_lock

KEYS = ('run', 'token', 'scope')


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('state', 'scope', 'held', 'helper', 'path', 'ttl', 'wait', 'steal'))

    def _command(self, task_vars):
        def run(argv):
            out = self._execute_module(module_name='ansible.builtin.command', module_args={'argv': argv},
                                       task_vars=task_vars)
            return out.get('rc', 1), to_text(out.get('stdout', '')), to_text(out.get('stderr') or out.get('msg', ''))
        return run

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        state, scope = args.get('state', 'acquired'), args.get('scope')
        if state not in ('acquired', 'released') or not scope:
            raise AnsibleActionFail('state must be acquired or released, and scope names the entry point that takes it')
        held = {key: value for key, value in (args.get('held') or {}).items() if key in KEYS}
        result.update(changed=False)
        if self._task.check_mode:  # check mode takes no lock and releases none
            result.update(held, msg='check mode: the lock is not taken or released')
            return result
        run = self._command(task_vars)
        try:
            if state == 'acquired':
                owner = dict(_controller_run.identity(), play=task_vars.get('ansible_play_name'))
                lock, cleared = _lifecycle_lock.acquire(
                    run, lambda other: _controller_run.state(other) == 'dead', held, scope, owner, args['helper'],
                    args['path'], args['ttl'], args.get('wait', 0), args.get('steal') or '')
                if cleared:
                    Display().display(_lifecycle_lock.cleared_message(cleared))
                result.update(lock, cleared=cleared)
            else:
                lock, released = _lifecycle_lock.release(run, held, scope, args['helper'], args['path'])
                result.update(lock, released=released)
        except _lifecycle_lock.LockError as exc:
            raise AnsibleActionFail(to_text(exc))
        except KeyError as exc:
            raise AnsibleActionFail('%s is required' % exc)
        return result
