"""gpuserve-sglang gate and driver (plugins/module_utils/_helper_gate.py): the unit's ExecStartPre, the collection's
own gate (_gate.run_gate) run in the container, and the driver version read with its own query.

The helper runs in-process; nvidia-smi is a small script on disk that answers from a scenario file, one answer per
gate query, and logs the argv, LC_ALL and its stdin of every call (tests/support/sglang_helper.py). The helper's own
runner (coreutils timeout, subprocess) is real, so what the unit runs is what is tested.
"""
import importlib
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_cli, _helper_gate, _helper_run
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    UUIDS, gpus, install, run_json, stand_in_smi)


@pytest.fixture
def smi(tmp_path):
    """smi(answers, apps='') writes the scenario and returns the stand-in's path; smi.log() reads the calls."""
    return stand_in_smi(tmp_path)


def gate(monkeypatch, capsys, *argv):
    return run_json(monkeypatch, capsys, "gate", *argv)


def test_passes_at_once_when_every_gpu_reads_zero(smi, monkeypatch, capsys):
    fake = smi([{"out": gpus()}])
    rc, out, err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake)
    assert rc == 0
    assert out["passed"] is True and out["polls"] == 1
    assert [g["index"] for g in out["gpus"]] == list(range(8))
    assert err == "gpuserve-sglang gate: 8 GPU(s) at or under 0 MiB after 1 poll(s) in %.2f s\n" % out["elapsed_s"]
    # the documented gate query, in the C locale, never reading the unit's stdin
    assert smi.log() == [{"argv": ["--query-gpu=index,uuid,memory.used,memory.total", "--format=csv,noheader,nounits"],
                          "lc_all": "C", "stdin": "/dev/null"}]


def test_waits_for_held_memory_then_passes(smi, monkeypatch, capsys):
    fake = smi([{"out": gpus({3: 81929})}, {"out": gpus({3: 4096})}, {"out": gpus()}])
    rc, out, _err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake,
                         "--poll-interval", "0.01", "--timeout", "30")
    assert rc == 0
    assert out["polls"] == 3
    assert out["clear_at_s"]["0"] < out["clear_at_s"]["3"]  # GPU 3 cleared two polls later


def test_refuses_to_start_while_memory_is_held_and_says_what_to_do(smi, monkeypatch, capsys):
    fake = smi([{"out": gpus({3: 81929})}], apps="%s, 4242, 81920\n" % UUIDS[3])
    rc, out, err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake,
                        "--poll-interval", "0.05", "--timeout", "1.5")  # two reads even when one is slow
    assert rc == 1
    assert out["passed"] is False and out["polls"] >= 2
    assert "GPU 3 still holds 81929 MiB (limit 0): pid 4242 (container unknown)" in out["error"]
    assert out["holders"] == [{"gpu": 3, "pid": 4242, "used_mib": 81920, "container": None, "state": None}]
    assert err == ("gpuserve-sglang gate: not starting, %s. PIDs are as this container sees them. To free the GPUs "
                   "and restart with proof, run the gpuserve lifecycle (playbooks/restart_server.yml); to see who "
                   "holds them, `fuser -v /dev/nvidia*` here and `nvidia-smi` on the PVE host.\n" % out["error"])
    assert out["error"].startswith("gate timed out after ")
    assert smi.log()[-1]["argv"] == ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]


def test_default_timeout_and_poll_interval():
    parser_defaults = {}

    def capture(_module, params, **kwargs):
        parser_defaults.update(params, runner=kwargs["runner"])
        return {"gpus": [], "polls": 1, "elapsed_s": 0.0, "passed": True}

    mod = importlib.import_module("ansible_collections.gpuserve.sglang.plugins.module_utils._gate")
    saved, sys.argv = sys.argv, ["gpuserve-sglang", "gate", "--expected-count", "2"]
    original = mod.run_gate
    mod.run_gate = capture
    try:
        with open(os.devnull, "w") as sink:
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = sink
            try:
                assert _helper_cli.main() == 0
            finally:
                sys.stdout, sys.stderr = stdout, stderr
    finally:
        mod.run_gate, sys.argv = original, saved
    assert parser_defaults["timeout"] == 120
    assert parser_defaults["poll_interval"] == 0.2
    assert parser_defaults["max_used_mib"] == 0
    assert parser_defaults["expected_count"] == 2
    assert parser_defaults["nvidia_smi"] == "nvidia-smi"
    assert parser_defaults["nvidia_smi_timeout"] == 10.0
    assert parser_defaults["backend"] == "nvidia-smi" and parser_defaults["gpus"] == []
    assert parser_defaults["name_holders"] is True
    runner = parser_defaults["runner"]
    assert runner.local is False and runner.target == "local"


@pytest.mark.parametrize("limit, rc", [("16", 0), ("15", 1)])
def test_max_used_mib_is_the_limit(smi, monkeypatch, capsys, limit, rc):
    fake = smi([{"out": gpus({5: 16})}])
    got, out, _err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake,
                          "--max-used-mib", limit, "--timeout", "0")
    assert got == rc
    assert out["max_used_mib"] == int(limit)


def test_fails_closed_on_another_gpu_count(smi, monkeypatch, capsys):
    fake = smi([{"out": gpus(count=7)}])
    rc, out, err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake)
    assert rc == 1
    assert "nvidia-smi lists 7 GPU(s), 8 expected" in out["error"]
    assert len(smi.log()) == 1  # a read error fails at once, no waiting


def test_fails_closed_on_a_driver_error_with_rc_and_output(smi, monkeypatch, capsys):
    fake = smi([{"out": "Failed to initialize NVML: Driver/library version mismatch\n", "rc": 18}])
    rc, out, _err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake)
    assert rc == 1
    assert out["rc"] == 18 and "reboot the host or install the matching userspace" in out["error"]
    assert out["cmd"].startswith("timeout --kill-after=1 10s ")


MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.159\n"


def loaded_driver(tmp_path):
    """The loaded kernel module's version file (/proc/driver/nvidia/version), as the gate reads it."""
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01  Release Build  (dvs)\n")
    return str(proc)


def test_a_driver_changed_under_the_userspace_names_both_versions_and_the_playbook(smi, monkeypatch, capsys, tmp_path):
    fake = smi([{"out": MISMATCH, "rc": 18}])
    rc, out, err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake,
                        "--driver-version-file", loaded_driver(tmp_path))
    assert rc == 1
    assert out["driver_mismatch"] == {"host": "590.48.01", "userspace": "580.159"}
    assert out["passed"] is False and out["rc"] == 18
    assert err == ("gpuserve-sglang gate: not starting: the PVE host's NVIDIA driver is 590.48.01 and this container's "
                   "NVIDIA userspace is 580.159 (Driver/library version mismatch), and a server on a mismatched "
                   "userspace fails at its first CUDA call. Install the host's version here and restart with proof: "
                   "run playbooks/deploy_eagle3.yml for this container (its nvidia_userspace role installs the "
                   "userspace, then the lifecycle starts the server).\n")
    assert len(smi.log()) == 1  # no wait, no holder query


def test_a_mismatch_without_the_drivers_version_file_says_which_file_it_could_not_read(
        smi, monkeypatch, capsys, tmp_path):
    fake = smi([{"out": MISMATCH, "rc": 18}])
    rc, out, err = gate(monkeypatch, capsys, "--nvidia-smi", fake, "--driver-version-file", str(tmp_path / "none"))
    assert rc == 1
    assert out["driver_mismatch"] == {"host": None, "userspace": "580.159"}
    assert "driver is unknown (%s unread) and this container's NVIDIA userspace is 580.159" % (tmp_path / "none") in err


def test_a_mismatch_said_on_stderr_without_the_library_version_says_unknown(smi, monkeypatch, capsys, tmp_path):
    fake = smi([{"err": "Failed to initialize NVML: Driver/library version mismatch\n", "rc": 18}])
    rc, out, err = gate(monkeypatch, capsys, "--nvidia-smi", fake, "--driver-version-file", loaded_driver(tmp_path))
    assert rc == 1
    assert out["driver_mismatch"] == {"host": "590.48.01", "userspace": None}
    assert "driver is 590.48.01 and this container's NVIDIA userspace is unknown (Driver/library" in err


def test_gate_usage_names_the_subcommand(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "gate", "--bogus"])
    with pytest.raises(SystemExit) as exc:
        _helper_cli.main()
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("usage: gpuserve-sglang gate ")


def test_another_driver_error_keeps_the_lifecycles_advice(smi, monkeypatch, capsys, tmp_path):
    fake = smi([{"out": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "rc": 9}])
    rc, out, err = gate(monkeypatch, capsys, "--nvidia-smi", fake, "--driver-version-file", loaded_driver(tmp_path))
    assert rc == 1
    assert "driver_mismatch" not in out
    assert err.startswith("gpuserve-sglang gate: not starting, nvidia-smi failed (rc 9): nvidia-smi cannot reach")
    assert "playbooks/restart_server.yml" in err


def test_a_hung_nvidia_smi_is_cut_by_its_timeout(smi, monkeypatch, capsys):
    fake = smi([{"out": gpus(), "sleep": 30}])
    rc, out, _err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake,
                         "--nvidia-smi-timeout", "0.5")
    assert rc == 1
    assert out["rc"] == 124 and "did not answer within its timeout" in out["error"]


def test_a_missing_nvidia_smi_fails_closed(monkeypatch, capsys, tmp_path):
    rc, out, _err = gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", str(tmp_path / "none"))
    assert rc == 1
    assert out["rc"] == 127 and out["passed"] is False


def test_gate_passes_every_option_through(monkeypatch, capsys):
    seen = {}
    mod = importlib.import_module("ansible_collections.gpuserve.sglang.plugins.module_utils._gate")

    def capture(module, params, **kwargs):
        seen.update(params, module=module)
        return {"gpus": [], "polls": 1, "elapsed_s": 0.0, "passed": True}

    monkeypatch.setattr(mod, "run_gate", capture)
    path = list(sys.path)
    rc, _out, _err = gate(monkeypatch, capsys, "--expected-count", "4", "--max-used-mib", "7", "--timeout", "9",
                          "--poll-interval", "0.3", "--nvidia-smi", "/opt/smi", "--nvidia-smi-timeout", "3")
    assert rc == 0
    assert {k: seen[k] for k in ("expected_count", "max_used_mib", "timeout", "poll_interval", "nvidia_smi",
                                 "nvidia_smi_timeout", "module")} == {
        "expected_count": 4, "max_used_mib": 7, "timeout": 9.0, "poll_interval": 0.3, "nvidia_smi": "/opt/smi",
        "nvidia_smi_timeout": 3.0, "module": None}
    assert sys.path == path  # the package is imported by its names: nothing is put on the path


def test_gate_without_an_expected_count_checks_no_count(monkeypatch, capsys):
    seen = {}
    mod = importlib.import_module("ansible_collections.gpuserve.sglang.plugins.module_utils._gate")
    monkeypatch.setattr(mod, "run_gate", lambda module, params, **kwargs: seen.update(params) or {
        "gpus": [], "polls": 1, "elapsed_s": 0.0, "passed": True})
    assert gate(monkeypatch, capsys)[0] == 0
    assert "expected_count" in seen and seen["expected_count"] is None


def test_the_gate_leaves_the_path_alone(smi, monkeypatch, capsys):
    path = list(sys.path)
    fake = smi([{"out": gpus()}])
    assert gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake)[0] == 0
    assert gate(monkeypatch, capsys, "--expected-count", "8", "--nvidia-smi", fake)[0] == 0
    assert sys.path == path


def test_the_gate_and_the_driver_read_with_the_collections_own_code():
    """The module_utils files gpu_memory_gate and gpu_release run, imported by their names (no copy)."""
    assert _helper_gate._gate is importlib.import_module("ansible_collections.gpuserve.sglang.plugins.module_utils._gate")
    assert _helper_gate._nvidia_smi is importlib.import_module(
        "ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi")


@pytest.mark.foreign_python
def test_the_installed_package_is_the_whole_gate_without_ansible(tmp_path, smi):
    """What the container has: the package (_helper_cli.PACKAGE) under its lib folder and the launcher, a Python
    without ansible."""
    helper = install(tmp_path / "installed")
    assert "_gate.py" in _helper_cli.PACKAGE
    fake = smi([{"out": gpus({1: 100})}, {"out": gpus()}])
    # -I: no site-packages (no ansible), no PYTHONPATH, no current directory
    out = subprocess.run([sys.executable, "-I", "-S", helper, "gate", "--expected-count", "8", "--nvidia-smi", fake,
                          "--poll-interval", "0.01"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["polls"] == 2


def test_driver_reads_the_one_version_with_the_collections_query(smi):
    fake = smi([{"out": "580.159.04\n" * 8}])
    assert _helper_gate.driver_version(fake) == {"driver_version": "580.159.04"}
    assert smi.log() == [{"argv": ["--query-gpu=driver_version", "--format=csv,noheader"],
                          "lc_all": "C", "stdin": "/dev/null"}]


# The stand-in is a Python program: under CI's load (ansible-test units at nice 19 beside the lab's lanes) its start
# alone took more than 0.5 s, so only the hung case has a short timeout.
@pytest.mark.parametrize("answer, timeout, says", [
    ({"out": "580.159.04\n570.86.15\n"}, 30, "expected one version for every GPU"),
    ({"out": "No devices were found\n"}, 30, "expected one version for every GPU"),
    ({"out": "Failed to initialize NVML: Driver/library version mismatch\n", "rc": 18}, 30,
     "nvidia-smi driver_version query failed (rc 18): the loaded kernel module and the NVIDIA userspace differ"),
    ({"out": "", "rc": 0, "sleep": 30}, 0.5, "did not answer within its timeout"),
])
def test_driver_says_why_when_the_read_cannot_be_trusted(smi, answer, timeout, says):
    got = _helper_gate.driver_version(smi([answer]), timeout)
    assert set(got) == {"error"} and says in got["error"]


def test_driver_defaults_the_collections_query_and_its_timeout(monkeypatch):
    calls = {}

    def run(self, argv, timeout):
        calls["run"] = (argv, timeout)
        return _helper_run.Result(argv, 0, "580.159.04\n", "")

    monkeypatch.setattr(_helper_run.LocalRunner, "run", run)
    assert _helper_gate.driver_version() == {"driver_version": "580.159.04"}
    assert calls == {"run": (["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], 10)}
