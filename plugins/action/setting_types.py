# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of gpuserve.sglang.setting_types (its docs: plugins/modules/setting_types.py): every setting that one of
this collection's roles declares in its meta/argument_specs.yml, checked for its type before any role's own
argument check, in the user's words (plugins/module_utils/_setting_types.py)."""
from __future__ import annotations

import glob
import os

import yaml

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuserve.sglang.plugins.module_utils._setting_types import problems

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles')
_SPECS = {}
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)  # libyaml's, where PyYAML has it: 6 times faster here


def specs(roles=ROLES):
    """{option: spec} over every entry point of every role of the collection (an option has one type everywhere:
    tests/unit/roles/test_argument_specs.py), the spec of the role it is named after where several declare it,
    read once per process."""
    if roles not in _SPECS:
        found, owned = {}, {}
        for path in sorted(glob.glob(os.path.join(roles, '*', 'meta', 'argument_specs.yml'))):
            role = os.path.basename(os.path.dirname(os.path.dirname(path)))
            with open(path, encoding='utf-8') as handle:
                entries = (yaml.load(handle, Loader=_LOADER) or {}).get('argument_specs') or {}
            for entry in entries.values():
                for name, spec in ((entry or {}).get('options') or {}).items():
                    # the owner's description (sglang_server_* from sglang_server), else the first role's
                    mine = name.startswith(role + '_')
                    if name not in found or (mine and not owned.get(name)):
                        found[name], owned[name] = spec, mine
        _SPECS[roles] = found
    return _SPECS[roles]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset()

    @staticmethod
    def preload():
        """The specs read in the controller's main process (callback gpuserve.sglang.preload), so that no worker
        reads them again."""
        specs()

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        declared = specs()
        values = {}
        for name, spec in declared.items():
            if name not in task_vars or task_vars[name] == spec.get('default'):
                continue  # unset, or the role's own default as its defaults/main.yml writes it
            try:
                values[name] = self._templar.template(task_vars[name])
            except Exception:  # pylint: disable=broad-except
                # a value that does not template yet (a variable of a later play): the role's own check sees it
                continue

        def default_of(name):
            try:
                return self._templar.template(declared[name].get('default'))
            except Exception:  # pylint: disable=broad-except
                return None

        found = problems(declared, values, default_of)
        if found:
            raise AnsibleActionFail('Settings of the wrong type (nothing was changed): %s' % ' '.join(found))
        result.update(changed=False, checked=sorted(values))
        return result
