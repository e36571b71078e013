"""The container helper's one runner (plugins/module_utils/_helper_run.py): every command the helper runs, under
coreutils timeout when given one, in the C locale, without stdin, its output kept whatever its bytes; systemctl and
a unit's properties through it; the gate's runner."""
import os
import subprocess

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_run
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import completed, fake_commands, run_kwargs


def test_without_coreutils_timeout_the_read_fails_instead_of_raising(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    res = _helper_run.LocalRunner().run(["nvidia-smi"], 5)
    assert (res.rc, res.out, res.timed_out) == (127, "", False)
    assert "timeout" in res.err
    assert res.argv == ["timeout", "--kill-after=1", "5s", "nvidia-smi"]


def test_a_command_that_cannot_start_is_rc_127(tmp_path):
    res = _helper_run.run([str(tmp_path / "none"), "-x"])
    assert (res.rc, res.out, res.argv) == (127, "", [str(tmp_path / "none"), "-x"])
    assert str(tmp_path / "none") in res.err


def test_the_runner_runs_argv_under_timeout_in_the_c_locale_without_stdin(monkeypatch):
    calls = []

    def run(argv, **kwargs):
        calls.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, 3, "out\udcff", "err")

    monkeypatch.setattr(_helper_run.subprocess, "run", run)
    monkeypatch.setenv("GPUSERVE_TEST_MARK", "kept")
    res = _helper_run.LocalRunner().run(["/usr/bin/nvidia-smi", "-L"], 2.5)
    assert (res.rc, res.out, res.err) == (3, "out\udcff", "err")
    assert res.argv == ["timeout", "--kill-after=1", "2.5s", "/usr/bin/nvidia-smi", "-L"]
    [(argv, kwargs)] = calls
    env = kwargs.pop("env")
    assert env == dict(os.environ, LC_ALL="C") and env["GPUSERVE_TEST_MARK"] == "kept"
    assert kwargs == {"stdin": subprocess.DEVNULL, "capture_output": True, "errors": "surrogateescape",
                      "check": False}


def test_without_a_timeout_the_argv_runs_as_it_is(monkeypatch):
    calls = []
    fake_commands(monkeypatch, calls, {"git": completed("x\n", "e", 2)})
    res = _helper_run.run(("git", "status"))
    assert (res.argv, res.rc, res.out, res.err) == (["git", "status"], 2, "x\n", "e")
    assert calls == [(["git", "status"], run_kwargs())]


def test_output_that_is_not_utf8_is_kept_not_raised(tmp_path):
    script = tmp_path / "smi"
    script.write_bytes(b"#!/bin/sh\nprintf 'GPU \\377\\n'\n")
    script.chmod(0o755)
    res = _helper_run.LocalRunner().run([str(script)], 5)
    assert res.rc == 0 and res.out == "GPU \udcff\n"


def test_the_gates_runner_is_not_local():
    """/proc/PID/cgroup inside a container cannot tell where a holder lives, nor read the host's minors."""
    runner = _helper_run.LocalRunner()
    assert runner.local is False and runner.target == "local"


@pytest.mark.parametrize("rc, timed_out", [(0, False), (1, False), (124, True), (137, True), (125, False)])
def test_result_timed_out(rc, timed_out):
    res = _helper_run.Result(["timeout", "1s", "x"], rc, "", "")
    assert res.timed_out is timed_out
    assert res.cmd == "timeout 1s x"


def test_systemctl_is_its_argv_through_the_runner(monkeypatch):
    calls = []
    fake_commands(monkeypatch, calls, {"systemctl": completed("active\n", "", 0)})
    res = _helper_run.systemctl("is-active", "sglang.service")
    assert (res.rc, res.out) == (0, "active\n")
    assert calls == [(["systemctl", "is-active", "sglang.service"], run_kwargs())]


def test_properties_of_a_unit(monkeypatch):
    calls = []
    show = "ActiveState=active\nMainPID=4242\nExecStart={ path=/x ; argv[]=a=b }\nno equals sign\n"
    fake_commands(monkeypatch, calls, {"systemctl": completed(show, "", 0)})
    assert _helper_run.properties("sglang.service", "ActiveState", "MainPID", "ExecStart") == {
        "ActiveState": "active", "MainPID": "4242", "ExecStart": "{ path=/x ; argv[]=a=b }"}
    assert calls == [(["systemctl", "show", "sglang.service", "--property=ActiveState,MainPID,ExecStart"],
                      run_kwargs())]
    fake_commands(monkeypatch, [], {"systemctl": completed("", "Failed to connect to bus\n", 1)})
    assert _helper_run.properties("sglang.service", "MainPID") == {}


def test_properties_of_the_service_manager_name_no_unit(monkeypatch):
    calls = []
    fake_commands(monkeypatch, calls, {"systemctl": completed("FinishTimestampMonotonic=0\n", "", 0)})
    assert _helper_run.properties(None, "FinishTimestampMonotonic") == {"FinishTimestampMonotonic": "0"}
    assert calls == [(["systemctl", "show", "--property=FinishTimestampMonotonic"], run_kwargs())]
