"""nccl_tuning_info through its entry point: real commands under coreutils timeout, nothing changed, check mode
reads as outside it; a proof read needs its script, expectation and env file."""
import json

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import nccl_tuning_info


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        nccl_tuning_info.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_a_proof_runs_the_script_under_env_i(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "from the caller")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text('#!/bin/sh\necho "$@ NCCL_PROTO=${NCCL_PROTO-unset}"\n')
    (venv / "bin" / "python").chmod(0o755)
    code, out = run_module(capsys, read="proof", venv=str(venv), hook_module="hook", proof_script="/p.py",
                           expect={"NCCL_PROTO": "LL"}, env_file="/etc/gpuserve/nccl.env", _ansible_check_mode=True)
    assert code == 0 and out["changed"] is False and "systemd_env" not in out
    assert out["spawn"] == {"rc": 0, "stdout": '/p.py --expect {"NCCL_PROTO": "LL"} --module hook NCCL_PROTO=unset\n',
                            "stderr": ""}
    assert out["login"]["rc"] == 0 and "NCCL_PROTO=from the caller" not in out["login"]["stdout"]


def test_a_proof_without_its_inputs_is_refused(tmp_path, capsys):
    code, out = run_module(capsys, read="proof", venv=str(tmp_path), hook_module="hook")
    assert code == 1 and "proof_script" in out["msg"]


def test_a_state_read_of_nothing_there(tmp_path, capsys):
    code, out = run_module(capsys, read="state", venv=str(tmp_path / "none"), hook_module="hook",
                           files=[str(tmp_path / "f")])
    assert code == 0 and out["changed"] is False and out["python_exists"] is False
    assert out["files"] == {str(tmp_path / "f"): {"exists": False}}
