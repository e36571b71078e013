"""nvidia_userspace's reader (roles/nvidia_userspace/files/nvidia_userspace_state.py), loaded as the role sends it:
the collection's _nvidia_smi.py (every nvidia-smi argv) and the script on one stdin. Each query runs under its
timeout; a command that hangs or is missing is rc 127, never a traceback."""
import json
import os
import subprocess
import sys
import types

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
SCRIPT = os.path.join(ROOT, "roles", "nvidia_userspace", "files", "nvidia_userspace_state.py")
SMI = os.path.join(ROOT, "plugins", "module_utils", "_nvidia_smi.py")


def sent_source(alone=False):
    with open(SMI) as smi, open(SCRIPT) as script:
        return script.read() if alone else smi.read() + "\n\n" + script.read()


@pytest.fixture
def state(monkeypatch):
    mod = types.ModuleType("nvidia_userspace_state_as_sent")
    exec(compile(sent_source(), "<stdin>", "exec"), mod.__dict__)  # what `python3 -` runs in the container
    calls = []

    def run(argv, **kwargs):
        calls.append((argv, kwargs))
        if argv[1:] == ["-L"]:
            return subprocess.CompletedProcess(argv, 0, "GPU 0: NVIDIA H200 (UUID: GPU-1)\n", "")
        return subprocess.CompletedProcess(argv, 0, "580.159.04, 1\n\n", "warn\n")

    monkeypatch.setattr(mod, "subprocess", types.SimpleNamespace(run=run, TimeoutExpired=subprocess.TimeoutExpired))
    mod.calls = calls
    return mod


def main(mod, monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["nvidia_userspace_state"] + list(argv))
    assert mod.main() == 0
    return json.loads(capsys.readouterr().out)


def test_container_lists_the_libraries_and_runs_both_queries(state, monkeypatch, capsys, tmp_path):
    (tmp_path / "libnvidia-ml.so.580.159.04").write_text("")
    (tmp_path / "libnvidia-ml.so.1").symlink_to(tmp_path / "libnvidia-ml.so.580.159.04")
    (tmp_path / "libnvidia-ml.so.575.1").symlink_to(tmp_path / "libnvidia-ml.so.580.159.04")
    (tmp_path / "libcuda.so.580.159.04").write_text("")
    out = main(state, monkeypatch, capsys, "container", "--lib-dir", str(tmp_path), "--pattern", "libnvidia-ml.so.*.*")
    assert out == {"libs": [str(tmp_path / "libnvidia-ml.so.580.159.04")],
                   "smi": {"rc": 0, "stdout": "580.159.04, 1", "stderr": "warn"},
                   "list": {"rc": 0, "stdout": "GPU 0: NVIDIA H200 (UUID: GPU-1)", "stderr": ""}}
    assert state.calls == [
        (["nvidia-smi", "--query-gpu=driver_version,count", "--format=csv,noheader"],
         {"capture_output": True, "text": True, "check": False, "timeout": 120}),
        (["nvidia-smi", "-L"], {"capture_output": True, "text": True, "check": False, "timeout": 120}),
    ]


def test_container_without_the_library_directory(state, monkeypatch, capsys, tmp_path):
    out = main(state, monkeypatch, capsys, "container", "--lib-dir", str(tmp_path / "none"), "--pattern", "*")
    assert out["libs"] == [] and out["smi"]["rc"] == 0


def test_host_reads_proc_and_asks_nvidia_smi_only_without_it(state, monkeypatch, capsys):
    import builtins
    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n"

    class Handle:
        def __init__(self, text):
            self.text = text

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self):
            return self.text

    def opener(path, *args, **kwargs):
        assert path == "/proc/driver/nvidia/version" and kwargs == {"encoding": "utf-8", "errors": "replace"}
        if proc is None:
            raise FileNotFoundError(path)
        return Handle(proc)

    monkeypatch.setattr(builtins, "open", opener)
    assert main(state, monkeypatch, capsys, "host") == {"proc": proc, "smi": None}
    assert state.calls == []
    proc = None
    out = main(state, monkeypatch, capsys, "host")
    assert out == {"proc": None, "smi": {"rc": 0, "stdout": "580.159.04, 1", "stderr": "warn"}}
    assert state.calls[0][0] == ["nvidia-smi", "--query-gpu=driver_version,count", "--format=csv,noheader"]


@pytest.mark.parametrize("exc", [FileNotFoundError(2, "No such file or directory: 'nvidia-smi'"),
                                 subprocess.TimeoutExpired(["nvidia-smi", "-L"], 120)])
def test_a_missing_or_hung_nvidia_smi_is_rc_127(state, monkeypatch, exc):
    def run(argv, **kwargs):
        raise exc
    monkeypatch.setattr(state, "subprocess", types.SimpleNamespace(run=run, TimeoutExpired=subprocess.TimeoutExpired))
    assert state._run(state.list_query("nvidia-smi")) == {"rc": 127, "stdout": "", "stderr": str(exc)}


def test_the_sent_pair_runs_as_the_role_runs_it_and_the_script_alone_refuses(tmp_path):
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho \"$*\"\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (tmp_path, os.environ["PATH"]))
    argv = [sys.executable, "-I", "-", "container", "--lib-dir", str(tmp_path), "--pattern", "x"]
    out = subprocess.run(argv, input=sent_source(), capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["smi"]["stdout"] == "--query-gpu=driver_version,count --format=csv,noheader"
    assert got["list"]["stdout"] == "-L"
    alone = subprocess.run(argv, input=sent_source(alone=True), capture_output=True, text=True, env=env, check=False)
    assert alone.returncode == 1 and alone.stdout == ""
    assert alone.stderr.strip() == ("nvidia_userspace_state.py: send plugins/module_utils/_nvidia_smi.py ahead of "
                                    "it on the same stdin")
