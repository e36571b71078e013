"""gpuserve-sglang state and source (plugins/module_utils/_helper_state.py), in-process: git and systemctl are
replaced on the module (its `subprocess`), or git runs on a real tree; then source by the installed helper, under a
Python without ansible."""
import hashlib
import json
import os
import subprocess
import sys
import types

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _git_tree, _helper_state
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    ROOT, completed, fake_commands, install, run_json, run_kwargs)
from ansible_collections.gpuserve.sglang.tests.support.git_tree import commit_tree

SHOW = ("ActiveState=active\nSubState=running\nMainPID=4242\nActiveEnterTimestamp=Mon 2026-11-30 10:00:00 UTC\n"
        "ActiveEnterTimestampMonotonic=9000000\nUnitFileState=enabled\nLoadState=loaded\nExecStart={ path=/usr/local/sbin/gpuserve-sglang ; argv[]=a=b }\n"
        "no equals sign\n")
UNIT = {"ActiveState": "active", "SubState": "running", "MainPID": "4242",
        "ActiveEnterTimestamp": "Mon 2026-11-30 10:00:00 UTC", "ActiveEnterTimestampMonotonic": "9000000",
        "UnitFileState": "enabled", "LoadState": "loaded",
        "ExecStart": "{ path=/usr/local/sbin/gpuserve-sglang ; argv[]=a=b }"}
SHOW_ARGV = ["systemctl", "show", "sglang.service",
             "--property=ActiveState,SubState,MainPID,ActiveEnterTimestamp,ActiveEnterTimestampMonotonic,UnitFileState,"
             "LoadState"]
BOOT_ARGV = ["systemctl", "show", "--property=FinishTimestampMonotonic"]


def systemctl(argv, **_kwargs):
    """The unit's properties, or the service manager's when no unit is named."""
    return completed("FinishTimestampMonotonic=12000000\n" if argv == BOOT_ARGV else SHOW)


def test_state_collects_git_files_manifest_unit_and_python(monkeypatch, capsys, tmp_path):
    porcelain = ("# branch.oid 0123456789abcdef0123456789abcdef01234567\n# branch.head main\n"
                 "1 .M N... 100644 100644 100644 aaaa bbbb python/sglang/srt/server_args.py\n"
                 "? python/sglang/new.py\n")
    calls = []
    fake_commands(monkeypatch, calls, {
        "git": completed(porcelain, "  " + "0123456789" * 60 + "  \n"), "systemctl": systemctl})
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * (1 << 20) + 5))  # more than one 1 MiB block
    small = tmp_path / "args.json"
    small.write_text('{"argv": []}')
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"commit": "0123", "args_sha1": "abc"}')
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    rc, out, err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", "/opt/sglang/src",
                            "--file", str(big), "--file", str(small), "--file", str(tmp_path / "gone"),
                            "--manifest", str(manifest), "--python", str(python))
    assert (rc, err) == (0, "")
    assert out == {
        "git": {"rc": 0, "error": "0123456789" * 50, "commit": "0123456789abcdef0123456789abcdef01234567",
                "changes": [" M python/sglang/srt/server_args.py", "?? python/sglang/new.py"], "dirty": True},
        "files": {str(big): {"exists": True, "sha1": hashlib.sha1(big.read_bytes()).hexdigest()},
                  str(small): {"exists": True, "sha1": hashlib.sha1(b'{"argv": []}').hexdigest()},
                  str(tmp_path / "gone"): {"exists": False, "sha1": ""}},
        "manifest": {"commit": "0123", "args_sha1": "abc"},
        "unit": UNIT,
        # the container's boot: when it finished, to tell a server the boot started from one started by hand
        "boot": {"FinishTimestampMonotonic": "12000000"},
        "python_exists": True,
    }
    assert calls == [
        (["git", "-c", "safe.directory=*", "-C", "/opt/sglang/src", "status", "--porcelain=v2", "--branch",
          "--untracked-files=all"], run_kwargs()),
        (SHOW_ARGV, run_kwargs()),
        (BOOT_ARGV, run_kwargs()),
    ]


def test_state_without_a_repository_manifest_or_python(monkeypatch, capsys, tmp_path):
    fake_commands(monkeypatch, [], {
        "git": completed("", "fatal: not a git repository (or any of the parent directories): .git\n", 128),
        "systemctl": completed("")})
    rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path),
                             "--manifest", str(tmp_path / "none.json"))
    assert rc == 0
    assert out == {"git": {"rc": 128, "error": "fatal: not a git repository (or any of the parent directories): .git",
                           "commit": None, "changes": [], "dirty": None},
                   "files": {}, "manifest": None, "unit": {}, "boot": {}, "python_exists": None}


def test_state_reports_an_unreadable_manifest_and_a_python_that_cannot_run(monkeypatch, capsys, tmp_path):
    fake_commands(monkeypatch, [], {
        "git": completed("# branch.oid (initial)\n# branch.head main\n"), "systemctl": systemctl})
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{not json")
    python = tmp_path / "python3"
    python.write_text("")
    python.chmod(0o644)
    rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path),
                             "--manifest", str(manifest), "--python", str(python))
    # a repository with no commit yet: no commit to name
    assert rc == 0 and out["git"] == {"rc": 0, "error": "", "commit": None, "changes": [], "dirty": False}
    assert out["manifest"] == {"_error": "unreadable manifest: Expecting property name enclosed in double quotes: "
                                         "line 1 column 2 (char 1)"}
    assert out["python_exists"] is False and out["unit"] == UNIT


def test_state_reads_where_the_last_start_went_from_the_units_journal(monkeypatch, capsys):
    with open(os.path.join(ROOT, "tests", "fixtures", "sglang-0.5.23-h200-helper", "startup_journal.txt"),
              encoding="utf-8") as handle:
        journal = handle.read()
    calls = []
    fake_commands(monkeypatch, calls, {"git": completed("# branch.oid (initial)\n# branch.head main\n"),
                                       "systemctl": completed(SHOW), "timeout": completed(journal)})
    rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", "/x", "--startup")
    assert rc == 0 and out["startup"]["total_s"] == 39.8 and out["startup"]["phases"][0]["phase"] == "imports"
    assert calls[-1][0] == ["timeout", "--kill-after=1", "30s", "journalctl", "--unit", "sglang.service", "--output",
                            "short-iso-precise", "--no-pager", "--lines", "20000"]


def test_state_says_when_the_journal_cannot_be_read(monkeypatch, capsys):
    fake_commands(monkeypatch, [], {"git": completed("# branch.oid (initial)\n# branch.head main\n"),
                                    "systemctl": completed(SHOW),
                                    "timeout": completed("", "No journal files were found.\n", 1)})
    rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", "/x", "--startup")
    assert rc == 0 and out["startup"] == {"error": "journalctl failed (rc 1): No journal files were found."}


def test_state_keeps_300_characters_of_the_journals_error(monkeypatch, capsys):
    fake_commands(monkeypatch, [], {"git": completed("# branch.oid (initial)\n# branch.head main\n"),
                                    "systemctl": completed(SHOW), "timeout": completed("", "x" * 400, 1)})
    _rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", "/x", "--startup")
    assert out["startup"] == {"error": "journalctl failed (rc 1): " + "x" * 300}


@pytest.mark.parametrize("said, rc", [
    ({"driver_version": "580.159.04"}, 0),
    # a hung or mismatched driver fails the lifecycle's read, its reason at the top for the rollback's message
    ({"error": "nvidia-smi driver_version query did not answer within its timeout"}, 1),
])
def test_state_reads_the_driver_version_and_fails_when_it_cannot(monkeypatch, capsys, said, rc):
    fake_commands(monkeypatch, [], {"git": completed("# branch.oid (initial)\n# branch.head main\n"),
                                    "systemctl": completed(SHOW)})
    monkeypatch.setattr(_helper_state, "driver_version", lambda: said)
    got_rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", "/x", "--driver")
    assert (got_rc, out["driver"], out.get("error")) == (rc, said, said.get("error"))


def test_state_reads_a_real_git_tree(monkeypatch, capsys, tmp_path):
    git, head = commit_tree(tmp_path, {"a.py": "a = 1\n"})
    (tmp_path / "a.py").write_text("a = 2\n")
    (tmp_path / "new.py").write_text("")
    real_run = subprocess.run
    fake_commands(monkeypatch, [], {
        "git": real_run, "systemctl": completed("")})
    rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path))
    assert rc == 0 and out["git"]["commit"] == head and out["git"]["rc"] == 0 and out["git"]["error"] == ""
    changes = out["git"]["changes"]
    assert changes == [" M a.py", "?? new.py"] and out["git"]["dirty"] is True
    # the benchmark's reader is the same function: `source` prints what `state` carries under "git"
    rc, source, _err = run_json(monkeypatch, capsys, "source", "--src", str(tmp_path))
    assert rc == 0 and source == out["git"]
    (tmp_path / "new.py").unlink()
    subprocess.run(git + ["checkout", "-q", "a.py"], check=True)
    rc, source, _err = run_json(monkeypatch, capsys, "source", "--src", str(tmp_path))
    assert (rc, source["commit"], source["changes"], source["dirty"]) == (0, head, [], False)


def test_source_reports_a_git_failure_and_exits_1(monkeypatch, capsys, tmp_path):
    calls = []
    fake_commands(monkeypatch, calls, {
        "git": completed("", "fatal: not a git repository\n", 128)})
    rc, out, _err = run_json(monkeypatch, capsys, "source", "--src", "/opt/sglang/src")
    assert rc == 1
    assert out == {"rc": 128, "error": "fatal: not a git repository", "commit": None, "changes": [], "dirty": None}
    assert calls == [(["git", "-c", "safe.directory=*", "-C", "/opt/sglang/src", "status", "--porcelain=v2",
                       "--branch", "--untracked-files=all"], run_kwargs())]


def test_source_counts_only_non_header_lines_as_changes(monkeypatch, capsys):
    # a header line with a space in its value and an untracked file named like a header are told apart
    porcelain = "# branch.oid abc def\n# branch.head main\n? # odd name\n"
    fake_commands(monkeypatch, [], {"git": completed(porcelain)})
    rc, out, _err = run_json(monkeypatch, capsys, "source", "--src", "/s")
    assert rc == 0 and out["commit"] == "abc def" and out["changes"] == ['?? "# odd name"'] and out["dirty"] is True


@pytest.mark.parametrize("action", ["source", "state"])
def test_the_tree_is_read_by_the_collections_reader(monkeypatch, capsys, action):
    """`source` and `state` run the command of _git_tree (the package's file, imported by its name) and parse its
    answer with it."""
    assert _helper_state._git_tree is _git_tree
    seen = []
    monkeypatch.setattr(_helper_state, "_git_tree", types.SimpleNamespace(
        status_argv=lambda src: seen.append(("argv", src)) or _git_tree.status_argv(src),
        parse_status=lambda *args: seen.append(("parse",) + args) or _git_tree.parse_status(*args)))
    calls = []
    fake_commands(monkeypatch, calls, {
        "git": completed("# branch.oid abc\n1 .M N... 1 2 3 a b x.py\n"), "systemctl": completed("")})
    argv = [action, "--src", "/s"] + (["--unit", "u.service"] if action == "state" else [])
    rc, out, _err = run_json(monkeypatch, capsys, *argv)
    tree = out if action == "source" else out["git"]
    assert rc == 0 and tree == {"rc": 0, "error": "", "commit": "abc", "changes": [" M x.py"], "dirty": True}
    assert seen == [("argv", "/s"), ("parse", 0, "# branch.oid abc\n1 .M N... 1 2 3 a b x.py\n", "")]
    assert calls[0][0] == ["git", "-c", "safe.directory=*", "-C", "/s", "status", "--porcelain=v2", "--branch",
                           "--untracked-files=all"]


@pytest.mark.foreign_python
def test_the_installed_helper_reads_the_tree_without_ansible(tmp_path):
    """What the container has: the package under its lib folder and the launcher, a Python without ansible."""
    helper = install(tmp_path / "installed")
    src = tmp_path / "src"
    _git, head = commit_tree(src, {"a.py": ""})
    (src / "b.py").write_text("")
    out = subprocess.run([sys.executable, "-I", "-S", helper, "source", "--src", str(src)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"rc": 0, "error": "", "commit": head, "changes": ["?? b.py"], "dirty": True}
