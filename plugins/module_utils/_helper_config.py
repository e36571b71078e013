# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang config keep|restore: the server's config pair (the args file and the unit) copied into a folder of
kept copies (the rollback target, the canary's prior config) and back, all or nothing.

A pair restored half (a new args file under an old unit) starts a server nobody verified, so both copies are
checked before either is written: a missing one writes nothing and exits 3, naming it. Each file is written
through a temporary file and a rename, so a run killed mid-copy leaves the old file or the new one, never a part.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load.
"""
import argparse
import json
import os
import sys

# A program run without Ansible (the role's command tasks, an operator): it prints its JSON, with no AnsibleModule to
# log through.
# pylint: disable=ansible-bad-function

NOTHING_KEPT = 3


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def _write(path, content):
    """path holds content, mode 0644, its folder made (0755) if need be; False when it already did."""
    try:
        if _read(path) == content:
            return False
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    tmp = "%s.gpuserve-tmp" % path
    with open(tmp, "wb") as handle:
        handle.write(content)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def copy_all(pairs):
    """Copy each (src, dest) of pairs, or none when a source is missing: {copied, unchanged} or {missing}."""
    missing = [src for src, _dest in pairs if not os.path.isfile(src)]
    if missing:
        return {"missing": missing}
    contents = [(_read(src), dest) for src, dest in pairs]
    out = {"copied": [], "unchanged": []}
    for content, dest in contents:
        out["copied" if _write(dest, content) else "unchanged"].append(dest)
    return out


def pairs(action, folder, files):
    """(src, dest) of each NAME=PATH in files: keep copies PATH to folder/NAME, restore folder/NAME to PATH."""
    out = []
    for spec in files:
        name, sep, path = spec.partition("=")
        if not (sep and name and path) or "/" in name:
            raise ValueError("--file takes NAME=PATH, NAME a file name in --dir: %r" % spec)
        kept = os.path.join(folder, name)
        out.append((path, kept) if action == "keep" else (kept, path))
    return out


def cmd_config():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang config")
    parser.add_argument("action", choices=["keep", "restore"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--file", action="append", required=True)
    opts = parser.parse_args(sys.argv[2:])
    try:
        result = copy_all(pairs(opts.action, opts.dir, opts.file))
    except (ValueError, OSError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(result))
    return NOTHING_KEPT if "missing" in result else 0
