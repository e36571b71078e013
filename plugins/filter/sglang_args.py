# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter plugin: one dict of SGLang launch settings -> the argv list SGLang's argparse expects.

Documentation: sglang_argv.yml next to this file (one file may hold several filters).
"""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def _scalar(key, value):
    """One value as argparse will receive it."""
    if isinstance(value, bool):
        # A bool inside a list or dict has no flag form; refuse rather than guess "True".
        raise AnsibleFilterError(f"sglang_argv: {key}: booleans are only valid as a whole value")
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if isinstance(value, str):
        text = value
    else:
        raise AnsibleFilterError(
            f"sglang_argv: {key}: unsupported value type {type(value).__name__}"
        )
    if "\n" in text or "\r" in text or "\0" in text:
        raise AnsibleFilterError(f"sglang_argv: {key}: value contains a newline or NUL byte")
    return text


def sglang_argv(settings):
    if not isinstance(settings, dict):
        raise AnsibleFilterError(
            f"sglang_argv: expected a dict of SGLang settings, got {type(settings).__name__}"
        )
    argv = []
    for key, value in settings.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise AnsibleFilterError(
                f"sglang_argv: {key!r} is not a SGLang setting name "
                "(use the snake_case field name, e.g. tp_size, not --tp-size)"
            )
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            if not value:
                continue
            items = [_scalar(key, item) for item in value]
            for item in items:
                if item.startswith("-") and not _NUMBER.match(item):
                    raise AnsibleFilterError(
                        f"sglang_argv: {key}: list item {item!r} starts with '-' and would be read as a flag"
                    )
            argv.append(flag)
            argv.extend(items)
        else:
            text = _scalar(key, value)
            if text.startswith("-") and not _NUMBER.match(text):
                argv.append(f"{flag}={text}")
            else:
                argv.extend([flag, text])
    return argv


class FilterModule:
    def filters(self):
        return {"sglang_argv": sglang_argv}
