"""install_files through its entry point: only what differs is written, atomically; check mode writes nothing."""
import json
import os
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import install_files

ME = dict(owner=str(os.getuid()), group=str(os.getgid()))


def run_module(capsys, files, **extra):
    args = dict(ME, files=files, **extra)
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        install_files.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_writes_missing_files_and_their_directories_then_changes_nothing(tmp_path, capsys):
    tool, lib = tmp_path / "sbin" / "tool", tmp_path / "lib" / "a" / "b" / "helpers.py"
    files = [dict(path=str(tool), content="#!/usr/bin/python3\nprint(1)\n", mode="0755"),
             dict(path=str(lib), content="X = 1\n")]
    code, out = run_module(capsys, files)
    assert code == 0 and out["changed"] is True and out["changed_files"] == [str(tool), str(lib)]
    assert tool.read_text() == "#!/usr/bin/python3\nprint(1)\n" and mode(tool) == 0o755
    assert lib.read_text() == "X = 1\n" and mode(lib) == 0o644 and mode(lib.parent) == 0o755
    code, out = run_module(capsys, files)
    assert code == 0 and out["changed"] is False and out["changed_files"] == []
    assert sorted(p.name for p in (tmp_path / "lib" / "a" / "b").iterdir()) == ["helpers.py"]  # no temp file left


def test_only_a_file_whose_content_or_mode_differs_is_written(tmp_path, capsys):
    same, other, loose = tmp_path / "same", tmp_path / "other", tmp_path / "loose"
    for path, text in ((same, "a\n"), (other, "old\n"), (loose, "c\n")):
        path.write_text(text)
        os.chmod(str(path), 0o644)
    os.chmod(str(loose), 0o666)
    inode = os.stat(str(same)).st_ino
    files = [dict(path=str(same), content="a\n"), dict(path=str(other), content="new\n"),
             dict(path=str(loose), content="c\n")]
    code, out = run_module(capsys, files)
    assert code == 0 and out["changed_files"] == [str(other), str(loose)]
    assert other.read_text() == "new\n" and mode(loose) == 0o644
    assert os.stat(str(same)).st_ino == inode  # untouched, not rewritten


def test_check_mode_names_what_would_change_and_writes_nothing(tmp_path, capsys):
    old = tmp_path / "old"
    old.write_text("old\n")
    os.chmod(str(old), 0o600)
    files = [dict(path=str(old), content="old\n"), dict(path=str(tmp_path / "new" / "file"), content="n\n")]
    code, out = run_module(capsys, files, _ansible_check_mode=True)
    assert code == 0 and out["changed"] is True and out["changed_files"] == [str(old), str(tmp_path / "new" / "file")]
    assert mode(old) == 0o600 and not (tmp_path / "new").exists()


def test_a_content_without_its_trailing_newline_is_a_change(tmp_path, capsys):
    path = tmp_path / "f"
    path.write_text("x\n")
    code, out = run_module(capsys, [dict(path=str(path), content="x")])
    assert out["changed_files"] == [str(path)] and path.read_text() == "x"


@pytest.mark.parametrize("item, msg", [
    (dict(path="relative/file", content=""), "install_files: path must be absolute, got 'relative/file'"),
    (dict(path="/tmp/x", content="", mode="rw-r--r--"),
     "install_files: mode of /tmp/x must be an octal string such as '0644', got 'rw-r--r--'"),
])
def test_bad_input_fails_before_anything_is_written(tmp_path, capsys, item, msg):
    first = tmp_path / "first"
    code, out = run_module(capsys, [dict(path=str(first), content="a\n"), item])
    assert code == 1 and out["failed"] is True and out["msg"] == msg
    assert not first.exists()  # the good item before the bad one was not written either


def test_an_os_error_fails_with_its_reason(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out = run_module(capsys, [dict(path=str(blocker / "under" / "x"), content="y")])
    assert code == 1 and out["msg"].startswith("install_files: ") and "Not a directory" in out["msg"]
