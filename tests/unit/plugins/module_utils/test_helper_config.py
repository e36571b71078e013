"""gpuserve-sglang config keep|restore (plugins/module_utils/_helper_config.py): the config pair copied all or nothing,
on real files under tmp_path."""
import os
import stat
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_cli, _helper_config
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import run_json


@pytest.fixture(name="pair")
def pair_fixture(tmp_path):
    """The deployed args file and unit, and the --file arguments naming them."""
    args, unit = tmp_path / "etc" / "sglang.args", tmp_path / "systemd" / "sglang.service"
    for path, text in ((args, '{"argv": ["--tp-size", "8"]}\n'), (unit, "[Service]\nExecStart=/x\n")):
        path.parent.mkdir()
        path.write_text(text)
    return args, unit, ["--file", "sglang.args=%s" % args, "--file", "sglang.service=%s" % unit]


def config(monkeypatch, capsys, action, folder, files):
    rc, out, _err = run_json(monkeypatch, capsys, "config", action, "--dir", str(folder), *files)
    return rc, out


def test_keep_copies_the_pair_into_a_new_folder(monkeypatch, capsys, tmp_path, pair):
    args, unit, files = pair
    kept = tmp_path / "var" / "last-good"
    rc, out = config(monkeypatch, capsys, "keep", kept, files)
    assert (rc, out) == (0, {"copied": [str(kept / "sglang.args"), str(kept / "sglang.service")], "unchanged": []})
    assert (kept / "sglang.args").read_bytes() == args.read_bytes()
    assert (kept / "sglang.service").read_bytes() == unit.read_bytes()
    assert stat.S_IMODE(os.stat(kept / "sglang.args").st_mode) == 0o644
    assert sorted(os.listdir(kept)) == ["sglang.args", "sglang.service"]  # no temporary file left


def test_keep_again_rewrites_only_what_differs(monkeypatch, capsys, tmp_path, pair):
    args, _unit, files = pair
    kept = tmp_path / "kept"
    config(monkeypatch, capsys, "keep", kept, files)
    args.write_text('{"argv": ["--tp-size", "4"]}\n')
    rc, out = config(monkeypatch, capsys, "keep", kept, files)
    assert (rc, out) == (0, {"copied": [str(kept / "sglang.args")], "unchanged": [str(kept / "sglang.service")]})
    assert (kept / "sglang.args").read_bytes() == args.read_bytes()


def test_restore_puts_both_kept_files_back(monkeypatch, capsys, tmp_path, pair):
    args, unit, files = pair
    kept = tmp_path / "kept"
    config(monkeypatch, capsys, "keep", kept, files)
    args.write_text("new args\n")
    unit.write_text("new unit\n")
    rc, out = config(monkeypatch, capsys, "restore", kept, files)
    assert (rc, out) == (0, {"copied": [str(args), str(unit)], "unchanged": []})
    assert (args.read_text(), unit.read_text()) == ('{"argv": ["--tp-size", "8"]}\n', "[Service]\nExecStart=/x\n")


def test_restore_with_one_kept_file_missing_writes_nothing(monkeypatch, capsys, tmp_path, pair):
    """A new args file under an old unit would start a server nobody verified."""
    args, unit, files = pair
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "sglang.args").write_text("old args\n")
    rc, out = config(monkeypatch, capsys, "restore", kept, files)
    assert (rc, out) == (_helper_config.NOTHING_KEPT, {"missing": [str(kept / "sglang.service")]})
    assert (args.read_text(), unit.read_text()) == ('{"argv": ["--tp-size", "8"]}\n', "[Service]\nExecStart=/x\n")


def test_keep_from_a_first_deployment_names_what_is_missing(monkeypatch, capsys, tmp_path):
    kept = tmp_path / "kept"
    rc, out = config(monkeypatch, capsys, "keep", kept, ["--file", "sglang.args=%s" % (tmp_path / "none")])
    assert (rc, out) == (3, {"missing": [str(tmp_path / "none")]})
    assert not kept.exists()


@pytest.mark.parametrize("spec", ["sglang.args", "=/etc/x", "sglang.args=", "../x=/etc/x"])
def test_a_file_argument_not_name_equals_path_is_refused(monkeypatch, capsys, tmp_path, spec):
    rc, out = config(monkeypatch, capsys, "keep", tmp_path, ["--file", spec])
    assert rc == 1 and out == {"error": "--file takes NAME=PATH, NAME a file name in --dir: %r" % spec}


def test_a_path_may_hold_an_equals_sign(tmp_path):
    assert _helper_config.pairs("keep", "/kept", ["sglang.args=/etc/a=b"]) == [("/etc/a=b", "/kept/sglang.args")]


def test_the_kept_folder_is_made_0755_whatever_the_umask(monkeypatch, capsys, tmp_path, pair):
    old = os.umask(0)
    try:
        config(monkeypatch, capsys, "keep", tmp_path / "kept", pair[2])
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "kept").st_mode) == 0o755


@pytest.mark.parametrize("argv", [
    ["keep", "--file", "a=/b"],           # no --dir
    ["keep", "--dir", "/kept"],           # no --file
    ["copy", "--dir", "/kept", "--file", "a=/b"],
])
def test_usage_names_the_command(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "config"] + argv)
    with pytest.raises(SystemExit) as exc:
        _helper_cli.main()
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("usage: gpuserve-sglang config ")
