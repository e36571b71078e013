"""nvidia_userspace_info through its entry point, with a stand-in nvidia-smi on PATH: each query runs under coreutils
timeout, a missing or hung nvidia-smi is a status (127, 124/137) in the result, never a failed module."""
import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import nvidia_userspace_info


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        nvidia_userspace_info.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def smi_dir(tmp_path, monkeypatch):
    """A directory on PATH for a stand-in nvidia-smi (SIMULATED: echoes its arguments)."""
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    return tmp_path


def stand_in(directory, body):
    path = directory / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def test_the_container_scope_runs_both_queries_and_changes_nothing(smi_dir, capsys):
    stand_in(smi_dir, 'echo "$*"; echo warn >&2')
    (smi_dir / "libnvidia-ml.so.580.159.04").write_text("")
    code, out = run_module(capsys, scope="container", lib_dir=str(smi_dir), _ansible_check_mode=True)
    assert code == 0 and out["changed"] is False
    assert out["libs"] == [str(smi_dir / "libnvidia-ml.so.580.159.04")]
    assert out["smi"] == {"rc": 0, "stdout": "--query-gpu=driver_version,count --format=csv,noheader",
                          "stderr": "warn"}
    assert out["list"] == {"rc": 0, "stdout": "-L", "stderr": "warn"}


def test_a_missing_nvidia_smi_is_status_127_not_a_failure(smi_dir, capsys):
    code, out = run_module(capsys, scope="container", lib_dir=str(smi_dir), nvidia_smi=str(smi_dir / "none"))
    assert code == 0 and out["smi"]["rc"] == 127 and out["list"]["rc"] == 127 and out["libs"] == []


def test_a_hung_nvidia_smi_ends_at_its_timeout(smi_dir, capsys):
    stand_in(smi_dir, "exec sleep 30")
    code, out = run_module(capsys, scope="container", lib_dir=str(smi_dir), nvidia_smi_timeout=0.2)
    assert code == 0 and out["smi"]["rc"] in (124, 137) and out["list"]["rc"] in (124, 137)


def test_a_timeout_of_zero_is_refused(smi_dir, capsys):
    code, out = run_module(capsys, scope="container", nvidia_smi_timeout=0)
    assert code == 1 and out["failed"] is True and "more than 0 seconds" in out["msg"]


def test_the_scope_is_required(capsys):
    code, out = run_module(capsys)
    assert code == 1 and "scope" in out["msg"]
