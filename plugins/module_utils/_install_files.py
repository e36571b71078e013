# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing small text files on the managed host, only those that differ, each atomically: the work of the module
sglang_helper (the container helper's package, from its own payload).

Private to this collection.
"""
from __future__ import annotations

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _set_attrs(module, path, mode, owner, group, changed):
    """Mode, owner and group where they differ; whether anything did (check mode: would)."""
    changed = module.set_mode_if_different(path, mode, changed)
    changed = module.set_owner_if_different(path, owner, changed)
    return module.set_group_if_different(path, group, changed)


def _make_parents(module, directory, owner, group):
    """Creates the missing directories above a file (0755, owner, group), outermost first."""
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    for path in reversed(missing):
        os.mkdir(path, 0o755)
        _set_attrs(module, path, "0755", owner, group, False)


def install(module, files, owner, group, name):
    """Writes what differs of files ([{path, content, mode}], mode an octal string); returns the paths that changed
    (or would, in check mode). name: the module, for its failure messages and its temporary files."""
    for item in files:  # every item checked before the first is written
        if not os.path.isabs(item["path"]):
            module.fail_json(msg="%s: path must be absolute, got %r" % (name, item["path"]))
    changed = []
    for item in files:
        path, mode = item["path"], item["mode"]
        want = to_bytes(item["content"], errors="surrogate_or_strict")
        if _read(path) != want:
            changed.append(path)
            if module.check_mode:
                continue
            directory = os.path.dirname(path)
            _make_parents(module, directory, owner, group)
            fd, tmp = tempfile.mkstemp(prefix=".%s." % name, dir=directory)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(want)
                    handle.flush()
                    os.fsync(handle.fileno())
                module.atomic_move(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            _set_attrs(module, path, mode, owner, group, True)
        elif _set_attrs(module, path, mode, owner, group, False):  # in check mode: reports, changes nothing
            changed.append(path)
    return changed
