# Copyright: gpuserve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One NCCL variable dict, three renderings: checked names and values, and quoting for systemd and Python.

The nccl_tuning role renders nccl_tuning_env into a systemd EnvironmentFile, a venv .pth hook and a profile.d
file. Every template goes through nccl_env_normalize so the three can never disagree about a value.
"""

import re

from ansible.errors import AnsibleFilterError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def nccl_env_normalize(env):
    """Validated copy of an env dict: names are shell identifiers, values strings, sorted by name.

    Ints become strings ("0"); booleans and None are refused (is `true` "1", "True" or "true"? NCCL parses
    them differently), as are newlines and NUL bytes, which no EnvironmentFile can carry.
    """
    if not isinstance(env, dict):
        raise AnsibleFilterError("expected a dict of environment variables, got %s" % type(env).__name__)
    out = {}
    for name in sorted(env):
        value = env[name]
        if not isinstance(name, str) or not _NAME.match(name):
            raise AnsibleFilterError("%r is not a valid environment variable name" % (name,))
        if isinstance(value, bool) or value is None:
            raise AnsibleFilterError(
                "%s: value %r is ambiguous; quote the string NCCL expects, e.g. \"0\" or \"1\"" % (name, value))
        if isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            raise AnsibleFilterError("%s: value must be a string or number, got %s" % (name, type(value).__name__))
        if "\n" in value or "\r" in value or "\0" in value:
            raise AnsibleFilterError("%s: value contains a newline or NUL byte" % name)
        out[name] = value
    return out


def systemd_env_quote(value):
    """A double-quoted value for a systemd EnvironmentFile (systemd.exec(5)): escapes \\ " $ and `."""
    value = str(value)
    for char in ("\\", '"', "$", "`"):
        value = value.replace(char, "\\" + char)
    return '"' + value + '"'


def _as_env(actual):
    if isinstance(actual, dict) and "stdout" in actual and not all(isinstance(v, str) for v in actual.values()):
        actual = actual.get("stdout") or ""
    if isinstance(actual, dict):
        return {str(k): str(v) for k, v in actual.items()}
    env = {}
    for line in str(actual or "").splitlines():
        if "=" in line:
            name, value = line.split("=", 1)
            env[name] = value
    return env


def nccl_env_missing(expected, actual):
    """Problems, as sentences, where `actual` (a dict, `env` output or a registered result) lacks `expected`.

    Empty list = every variable present with its expected value.
    """
    expected = nccl_env_normalize(expected)
    env = _as_env(actual)
    problems = []
    for name, value in expected.items():
        if name not in env:
            problems.append("%s missing (expected %r)" % (name, value))
        elif env[name] != value:
            problems.append("%s=%r (expected %r)" % (name, env[name], value))
    return problems


class FilterModule:
    def filters(self):
        return {
            "nccl_env_normalize": nccl_env_normalize,
            "systemd_env_quote": systemd_env_quote,
            "nccl_env_missing": nccl_env_missing,
        }
