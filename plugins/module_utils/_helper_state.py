# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang state and source: what the restart decision, the manifest, the audit and the benchmark read of
the deployed server in one call (the tree, the files' checksums, the manifest, the unit, the container's boot), and
the tree alone.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package. The tree is
read by the collection's one reader, _git_tree (sglang_install sends the same file ahead of its state script);
_helper_validate takes _git_source from here. With --startup, the last start's phases from the unit's journal
(_startup_log, the one reader of SGLang's startup log), and with --driver the NVIDIA driver version
(_helper_gate.driver_version), for the manifest.
"""
import argparse
import hashlib
import json
import os
import sys

from ansible_collections.gpuserve.sglang.plugins.module_utils import _git_tree, _startup_log
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_gate import driver_version
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_run import properties, run

# The journal lines read for the last start: SGLang logs a few hundred lines to "fired up" at tp 1 (2026-12-03, H200),
# more with a progress bar per TP rank; the last start is the last exec line among them.
JOURNAL_LINES = 20000

# A program run without Ansible (systemd, the role's command tasks, an operator): it prints its JSON, with no
# AnsibleModule to log through; its commands go through _helper_run.
# pylint: disable=ansible-bad-function


def _sha1(path):
    digest = hashlib.sha1()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _git_source(src):
    """{rc, error, commit, changes, dirty} of the tree at src, read by the collection's one reader (_git_tree);
    dirty is None when git failed (or could not start: rc 127)."""
    git = run(_git_tree.status_argv(src))
    return _git_tree.parse_status(git.rc, git.out, git.err)


def startup(unit):
    """The unit's last start, phase by phase (_startup_log.phases), from its journal; {error} when unreadable."""
    res = run(["journalctl", "--unit", unit, "--output", "short-iso-precise", "--no-pager", "--lines",
               str(JOURNAL_LINES)], timeout=30)
    if res.rc != 0:
        return {"error": "journalctl failed (rc %s): %s" % (res.rc, (res.err or res.out).strip()[:300])}
    return _startup_log.phases(res.out.splitlines())


def cmd_source():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang source")
    parser.add_argument("--src", required=True)
    opts = parser.parse_args(sys.argv[2:])
    result = _git_source(opts.src)
    print(json.dumps(result))
    return 0 if result["rc"] == 0 else 1


def cmd_state():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang state")
    parser.add_argument("--unit", required=True)
    parser.add_argument("--src", required=True)
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--manifest")
    parser.add_argument("--python")
    parser.add_argument("--startup", action="store_true")
    parser.add_argument("--driver", action="store_true")
    opts = parser.parse_args(sys.argv[2:])
    result = {"git": {}, "files": {}, "manifest": None, "unit": {}, "boot": {}, "python_exists": None}

    result["git"] = _git_source(opts.src)
    for path in opts.file:
        try:
            result["files"][path] = {"exists": True, "sha1": _sha1(path)}
        except FileNotFoundError:
            result["files"][path] = {"exists": False, "sha1": ""}
    if opts.manifest:
        try:
            with open(opts.manifest, encoding="utf-8") as handle:
                result["manifest"] = json.load(handle)
        except FileNotFoundError:
            pass
        except ValueError as exc:
            result["manifest"] = {"_error": f"unreadable manifest: {exc}"}
    result["unit"] = properties(opts.unit, "ActiveState", "SubState", "MainPID", "ActiveEnterTimestamp",
                                "ActiveEnterTimestampMonotonic", "UnitFileState", "LoadState")
    # when the container's boot finished (0 while it runs): a unit active since before then was started by the boot
    result["boot"] = properties(None, "FinishTimestampMonotonic")
    if opts.python:
        result["python_exists"] = os.access(opts.python, os.X_OK)
    if opts.startup:
        result["startup"] = startup(opts.unit)
    if opts.driver:
        # a driver that cannot be read (nvidia-smi failed, hung, or the GPUs disagree) fails the lifecycle's read
        result["driver"] = driver_version()
        if "error" in result["driver"]:
            result["error"] = result["driver"]["error"]
    print(json.dumps(result))
    return 1 if "error" in result else 0
