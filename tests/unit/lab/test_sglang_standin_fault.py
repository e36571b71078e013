"""The lab's SIMULATED startup fault of the SGLang stand-in (lab/files/sglang_standin.py, docs/lab.md): the switch
the lab tests set in a container for a failure that comes only after the lifecycle's stop (a server that exits at
start), one start only, so the rollback's start serves. No lab needed."""
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")
SPEC = importlib.util.spec_from_file_location("sglang_standin", STANDIN)
standin = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(standin)


def test_the_switch_is_the_lab_file_unless_the_environment_names_another(monkeypatch):
    assert standin.FAULT_FILE == "/etc/gpuserve-lab/standin-fault"
    monkeypatch.setenv("GPUSIM_STANDIN_FAULT", "/nonexistent/standin-fault")
    assert standin.startup_fault() is None  # no file: a start like any other


def test_a_set_switch_fails_one_start_and_is_gone_after_it(monkeypatch, tmp_path):
    fault = tmp_path / "standin-fault"
    fault.write_text("  weights checksum mismatch\n")
    monkeypatch.setenv("GPUSIM_STANDIN_FAULT", str(fault))
    assert standin.startup_fault() == ("SIMULATED startup failure (the lab's fault switch %s, removed: this start "
                                       "only): weights checksum mismatch" % fault)
    assert not fault.exists() and standin.startup_fault() is None  # the next start (the rollback's) serves


def test_an_empty_switch_fails_with_the_switch_named(monkeypatch, tmp_path):
    fault = tmp_path / "standin-fault"
    fault.touch()
    monkeypatch.setenv("GPUSIM_STANDIN_FAULT", str(fault))
    assert standin.startup_fault() == ("SIMULATED startup failure (the lab's fault switch %s, removed: this start "
                                       "only)" % fault)


def test_a_switch_that_cannot_be_removed_says_the_next_start_fails_too(monkeypatch, tmp_path):
    fault = tmp_path / "standin-fault"
    fault.touch()
    monkeypatch.setenv("GPUSIM_STANDIN_FAULT", str(fault))

    def refuse(path):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(os, "unlink", refuse)
    assert "NOT removed ([Errno 13] Permission denied: '%s'): the next start fails too" % fault \
        in standin.startup_fault()


def test_the_server_exits_1_at_start_with_an_error_line_before_it_spawns_anything(tmp_path):
    fault = tmp_path / "standin-fault"
    fault.touch()
    env = dict(os.environ, GPUSIM_STANDIN_FAULT=str(fault), GPUSIM_DEV_DIR=str(tmp_path / "no-gpus"))
    out = subprocess.run([sys.executable, STANDIN, "--model-path", "/models/m", "--tp-size", "2"], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    lines = out.stdout.splitlines()
    assert out.returncode == 1, out
    assert lines[-1].endswith("] [SIMULATED sglang stand-in] ERROR: SIMULATED startup failure (the lab's fault "
                              "switch %s, removed: this start only); exiting" % fault), out.stdout
    assert "scheduler" not in out.stdout and not fault.exists()
