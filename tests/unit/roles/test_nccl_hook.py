"""The nccl_tuning hook as shipped: rendered from the role's templates, run by a real venv under env -i, proven
in a 'spawn' child by the role's own proof script (including the shadowing check)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "realgpu"))
import render_nccl_hook  # noqa: E402

PROOF = os.path.join(ROOT, "roles", "nccl_tuning", "files", "nccl_env_proof.py")


def test_render_defaults_and_overrides():
    out = render_nccl_hook.render({"NCCL_DEBUG": "INFO", "WEIRD": 'a"b $c'}, unset=["NCCL_ALGO"])
    expected = json.loads(out["expected.json"])
    assert expected["NCCL_DEBUG"] == "INFO" and "NCCL_ALGO" not in expected
    assert expected["NCCL_NVLS_ENABLE"] == "0"
    assert 'WEIRD="a\\"b \\$c"' in out["nccl.env"].splitlines()
    assert "export WEIRD='a\"b $c'" in out["gpuserve-nccl.sh"].splitlines()
    assert [line for line in out["gpuserve_nccl_env.pth"].splitlines() if not line.startswith("#")] == \
        ["import gpuserve_nccl_env"]
    namespace = {}
    exec(compile(out["gpuserve_nccl_env.py"], "gpuserve_nccl_env.py", "exec"), namespace)  # noqa: S102
    assert namespace["ENV"] == expected
    environ = {"NCCL_PROTO": "Simple"}
    namespace["apply"](environ)
    assert environ["NCCL_PROTO"] == "Simple"  # setdefault: an explicit value wins
    assert environ["NCCL_DEBUG"] == "INFO"


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("hookvenv")
    path = str(base / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    purelib = subprocess.run([os.path.join(path, "bin", "python"), "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    out = render_nccl_hook.render()
    for name in ("gpuserve_nccl_env.py", "gpuserve_nccl_env.pth"):
        with open(os.path.join(purelib, name), "w") as fh:
            fh.write(out[name])
    return path, json.loads(out["expected.json"]), base


def _proof(python, script, expect):
    return subprocess.run(["/usr/bin/env", "-i", python, script, "--expect", json.dumps(expect)],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.foreign_python
def test_proof_passes_under_env_i(venv):
    path, expected = venv[:2]
    res = _proof(os.path.join(path, "bin", "python"), PROOF, expected)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["ok"] and result["child"]["env"] == expected and result["child"]["hook_imported_at_start"]
    assert result["child"]["pid"] != result["parent"]["pid"]


@pytest.mark.foreign_python
def test_proof_lists_missing_variables(venv):
    path, expected = venv[:2]
    res = _proof(os.path.join(path, "bin", "python"), PROOF, dict(expected, NCCL_SOMETHING_ELSE="1"))
    assert res.returncode == 1
    assert json.loads(res.stdout)["missing"] == ["NCCL_SOMETHING_ELSE"]
    assert "NCCL_SOMETHING_ELSE" in res.stderr


@pytest.mark.foreign_python
def test_proof_checks_values_not_only_presence(venv):
    path, expected = venv[:2]
    assert expected["NCCL_NVLS_ENABLE"] == "0"  # what the hook sets; the proof is told to expect another value
    res = _proof(os.path.join(path, "bin", "python"), PROOF, dict(expected, NCCL_NVLS_ENABLE="1"))
    assert res.returncode == 1
    result = json.loads(res.stdout)
    assert result["ok"] is False and result["child"]["env"]["NCCL_NVLS_ENABLE"] == "0"
    assert result["missing"] == ["NCCL_NVLS_ENABLE='0' (expected '1')"]
    assert "NCCL_NVLS_ENABLE='0' (expected '1')" in res.stderr


@pytest.mark.foreign_python
def test_proof_detects_shadowing(venv):
    path, expected, base = venv
    script_dir = base / "shadowed"
    script_dir.mkdir(exist_ok=True)
    script = str(script_dir / "nccl_env_proof.py")
    shutil.copy(PROOF, script)
    # sys.path[0] is the script's directory: a stray module of the hook's name there would win any later import
    (script_dir / "gpuserve_nccl_env.py").write_text("ENV = {}\n")
    res = _proof(os.path.join(path, "bin", "python"), script, expected)
    assert res.returncode == 1
    assert "shadowed by earlier sys.path entries" in res.stderr
