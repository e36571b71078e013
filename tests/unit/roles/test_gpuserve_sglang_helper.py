"""The in-container helper gpuserve-sglang (roles/sglang_server/files/usr/local/sbin), env-proof subcommand.

Its source is gpuserve_sglang.py (installed without the extension), loaded with SourceFileLoader. The unit's
control group is a temporary directory of cgroup.procs files (walked by the helper's own _pids); /proc/PID/{environ,cmdline} are temporary
files served through its _read seam; systemctl is replaced by a fixed control group path.
"""
import importlib.machinery
import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HELPER = os.path.join(ROOT, "roles", "sglang_server", "files", "usr", "local", "sbin", "gpuserve_sglang.py")
GROUP = "/system.slice/sglang.service"
NCCL = {"NCCL_PROTO": "LL", "NCCL_NVLS_ENABLE": "0"}
SERVER = ["/opt/sglang/venv/bin/python3", "-m", "sglang.launch_server", "--tp", "2"]


def load_helper():
    # named by its place in the collection, the name scripts/mutation's mutmut keys its mutants by
    loader = importlib.machinery.SourceFileLoader(
        "ansible_collections.gpuserve.sglang.roles.sglang_server.files.usr.local.sbin.gpuserve_sglang", HELPER)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


helper = load_helper()


@pytest.fixture
def unit(tmp_path, monkeypatch):
    """unit(procs, listed=()): procs = {pid: (environ dict, argv list)}, put in the unit's control group (the
    main PID in the group itself, the others in a sub-group); `listed` PIDs are in cgroup.procs without a
    /proc entry (exited between listing and reading)."""
    cgroup, proc = tmp_path / "cgroup", tmp_path / "proc"

    def make(procs, listed=()):
        pids = list(procs) + list(listed)
        (cgroup / "payload").mkdir(parents=True)
        (cgroup / "cgroup.procs").write_text("%d\n" % pids[0])
        (cgroup / "payload" / "cgroup.procs").write_text("".join("%d\n" % pid for pid in pids[1:]))
        for pid, (environ, argv) in procs.items():
            (proc / str(pid)).mkdir(parents=True)
            (proc / str(pid) / "environ").write_bytes(
                b"".join(b"%s=%s\0" % (k.encode(), v.encode()) for k, v in environ.items()))
            (proc / str(pid) / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in argv))

    def read(pid, name):
        with open(proc / str(pid) / name, "rb") as handle:
            return handle.read()

    monkeypatch.setattr(helper, "_control_group", lambda name: GROUP if name == "sglang.service" else "")
    monkeypatch.setattr(helper, "_cgroup_dir", lambda group: str(cgroup) if group == GROUP else None)
    monkeypatch.setattr(helper, "_read", read)
    return make


def env_proof(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "env-proof", "--unit", "sglang.service"] + list(args))
    rc = helper.main()
    return rc, json.loads(capsys.readouterr().out)


def base_env(**extra):
    return dict({"PATH": "/usr/bin:/bin", "HOME": "/root"}, **extra)


def test_env_proof_passes_when_every_process_carries_every_value(unit, monkeypatch, capsys):
    unit({
        100: (base_env(**NCCL), SERVER),
        101: (base_env(**NCCL), ["sglang::scheduler_TP0"]),
        102: (base_env(**NCCL), ["sglang::scheduler_TP1"]),
        103: (base_env(**NCCL), ["sglang::detokenizer"]),
    }, listed=[104])
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL), "--min-schedulers", "2")
    assert rc == 0 and out["ok"] and out["error"] is None
    assert [p["pid"] for p in out["processes"]] == [100, 101, 102, 103]  # 104 exited: skipped, not a failure
    assert all(p["ok"] and p["mismatched"] == {} for p in out["processes"])
    assert out["processes"][0]["cmd"] == " ".join(SERVER)
    assert out["schedulers"] == 2 and out["control_group"] == GROUP and out["expected"] == NCCL


@pytest.mark.parametrize("bad_pid", [100, 102])
@pytest.mark.parametrize("bad_env, got", [
    (base_env(NCCL_NVLS_ENABLE="0"), None),                       # NCCL_PROTO absent
    (base_env(NCCL_PROTO="Simple", NCCL_NVLS_ENABLE="0"), "Simple"),  # NCCL_PROTO present, wrong value
])
def test_env_proof_fails_when_only_some_processes_carry_the_variables(unit, monkeypatch, capsys,
                                                                      bad_pid, bad_env, got):
    procs = {
        100: (base_env(**NCCL), SERVER),
        101: (base_env(**NCCL), ["sglang::scheduler_TP0"]),
        102: (base_env(**NCCL), ["sglang::scheduler_TP1"]),
    }
    procs[bad_pid] = (bad_env, procs[bad_pid][1])
    unit(procs)
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL))
    assert rc == 1 and out["ok"] is False
    assert out["error"] == "1 of 3 processes lack the expected environment: PIDs [%d]" % bad_pid
    verdicts = {p["pid"]: (p["ok"], p["mismatched"]) for p in out["processes"]}
    assert verdicts == {pid: (True, {}) for pid in procs if pid != bad_pid} | {
        bad_pid: (False, {"NCCL_PROTO": {"want": "LL", "got": got}})}


def test_env_proof_expects_the_env_file_and_reports_its_drift(unit, monkeypatch, capsys, tmp_path):
    env_file = tmp_path / "nccl.env"
    env_file.write_text('# managed\nNCCL_PROTO="LL"\nexport NCCL_NVLS_ENABLE=\'0\'\n\nNCCL_DEBUG=WARN\n')
    unit({100: (base_env(NCCL_DEBUG="WARN", **NCCL), SERVER)})
    rc, out = env_proof(monkeypatch, capsys, "--env-file", str(env_file))
    assert rc == 0 and out["expected"] == dict(NCCL, NCCL_DEBUG="WARN")
    # the file is read, but disagrees with the desired values: a proof against the file alone would pass
    rc, out = env_proof(monkeypatch, capsys, "--env-file", str(env_file), "--expected-json", '{"NCCL_PROTO": "Simple"}')
    assert rc == 1 and out["env_file_drift"] == {"NCCL_PROTO": {"want": "Simple", "file": "LL"}}
    assert out["error"].startswith("the environment file differs from the desired values")


def test_env_proof_counts_scheduler_workers(unit, monkeypatch, capsys):
    unit({100: (base_env(**NCCL), SERVER), 101: (base_env(**NCCL), ["sglang::scheduler_TP0"])})
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL), "--min-schedulers", "2")
    assert rc == 1 and out["schedulers"] == 1
    assert out["error"] == "1 scheduler workers (sglang::scheduler*) in %s, expected at least 2" % GROUP


def test_env_proof_refuses_nothing_to_prove_and_a_stopped_unit(unit, monkeypatch, capsys):
    unit({100: (base_env(**NCCL), SERVER)})
    rc, out = env_proof(monkeypatch, capsys)
    assert rc == 1 and "nothing to prove" in out["error"]
    monkeypatch.setattr(helper, "_control_group", lambda name: "")
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL))
    assert rc == 1 and out["error"] == "sglang.service has no control group (is it running?)"


def test_env_proof_names_the_setproctitle_cause_for_retitled_workers(unit, monkeypatch, capsys):
    # As on the real H200 (2026-12-03): the scheduler's and detokenizer's /proc/PID/environ had lost the NCCL set
    # (setproctitle writes over it without SPT_NOENV); the main process and the resource tracker kept it.
    unit({
        100: (base_env(**NCCL), SERVER),
        101: ({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, ["sglang::scheduler"]),
        102: ({}, ["sglang::detokenizer"]),
        103: (base_env(**NCCL), ["python3", "-c", "from multiprocessing.resource_tracker import main;main(28)"]),
    })
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL), "--min-schedulers", "1")
    assert rc == 1 and out["error"] == "2 of 4 processes lack the expected environment: PIDs [101, 102]"
    assert out["hint"].startswith("PIDs [101, 102] are SGLang workers titled with setproctitle")
    assert "SPT_NOENV" in out["hint"]


def test_env_proof_gives_no_setproctitle_hint_when_the_workers_had_spt_noenv(unit, monkeypatch, capsys):
    unit({
        100: (base_env(SPT_NOENV="1", **NCCL), SERVER),
        101: (base_env(SPT_NOENV="1", NCCL_NVLS_ENABLE="0"), ["sglang::scheduler"]),  # really lacks NCCL_PROTO
    })
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL))
    assert rc == 1 and out["hint"] is None
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps({"NCCL_NVLS_ENABLE": "0"}))
    assert rc == 0 and out["hint"] is None
