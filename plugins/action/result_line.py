# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of gpuserve.sglang.result_line (its docs: plugins/modules/result_line.py): a run's machine-readable
result as one line, `PREFIX <json>`, printed by the controller itself, so that no stdout callback folds or wraps it
(the default callback with callback_result_format = yaml folded a debug msg of 5,889 characters over 65 lines), and
as a JSON file."""
from __future__ import annotations

import json
import os
import re
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

PREFIX = re.compile(r'^[A-Z][A-Z0-9_]*$')


def line(prefix, result):
    """The one line: the prefix, a space, the result as compact JSON (ASCII, so no character a terminal or a log
    could split)."""
    return '%s %s' % (prefix, json.dumps(result, sort_keys=True, separators=(',', ':'), default=to_text))


def write(path, result):
    """The result as JSON at path, whole or not at all: a temporary file in the same directory, then a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(handle, 'w') as out:
            json.dump(result, out, sort_keys=True, indent=1, default=to_text)
            out.write('\n')
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(('prefix', 'result', 'path'))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        prefix, value, path = (self._task.args.get(key) for key in ('prefix', 'result', 'path'))
        if not isinstance(prefix, str) or not PREFIX.match(prefix):
            raise AnsibleActionFail('prefix must be upper-case letters, digits and _ (GPUSERVE_DEPLOY), not %r' % (prefix,))
        if 'result' not in self._task.args:
            raise AnsibleActionFail('result is required: the value to print as JSON')
        Display().display(line(prefix, value))
        if path:
            try:
                write(to_text(path), value)
            except OSError as exc:
                raise AnsibleActionFail('cannot write %s on the controller: %s' % (path, exc))
            result['path'] = to_text(path)
        result['changed'] = False
        return result
