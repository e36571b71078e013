"""sglang_install_info through its entry point: the reads run under coreutils timeout and never change anything;
check mode leaves the import check's record alone; a state read needs the pin."""
import json

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import sglang_install_info
from ansible_collections.gpuserve.sglang.tests.support.git_tree import commit_tree


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        sglang_install_info.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    _git, head = commit_tree(src, {"README": "sglang\n"})
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"  # answers the version probe and the import check (SIMULATED SGLang)
    python.write_text('#!/bin/sh\ncase "$*" in *"import sglang.srt.server_args"*) exit 0;; '
                      '*"m.version"*) echo 0.5.23; exit 0;; esac\necho "{}"\n')
    python.chmod(0o755)
    return src, venv, head


def test_facts_read_the_tree_and_version_and_check_mode_writes_no_record(tree, tmp_path, capsys):
    src, venv, head = tree
    record = tmp_path / "state" / "smoke.json"
    args = dict(read="facts", src=str(src), venv=str(venv), smoke=True, smoke_record=str(record))
    code, out = run_module(capsys, _ansible_check_mode=True, **args)
    assert code == 0 and out["changed"] is False and not record.exists()
    assert out["tree"]["commit"] == head and out["tree"]["dirty"] is False
    assert out["version"] == {"rc": 0, "stdout": "0.5.23", "stderr": ""} and out["smoke"]["rc"] == 0
    code, out = run_module(capsys, **args)
    assert code == 0 and out["changed"] is False and json.loads(record.read_text())["module"] == \
        "sglang.srt.server_args"


def test_a_state_read_resolves_the_pin(tree, capsys):
    src, venv, head = tree
    code, out = run_module(capsys, read="state", src=str(src), venv=str(venv), pin="HEAD", _ansible_check_mode=True)
    assert code == 0 and out["changed"] is False and out["git"]["want"]["stdout"] == head


def test_a_state_read_without_a_pin_is_refused(tree, capsys):
    src, venv, head = tree
    assert head
    code, out = run_module(capsys, read="state", src=str(src), venv=str(venv))
    assert code == 1 and "pin" in out["msg"]
