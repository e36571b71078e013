"""gpuserve-sglang env-proof and worker-env (plugins/module_utils/_helper_env.py), in-process, and the readers they
share: the env file's syntax, systemctl and the cgroup roots, the cgroup walk, /proc.

The outside world is faked at the module's own seams: systemctl through the helper's runner (_helper_run), the
unit's control group through `_control_group`/`_cgroup_dir`, /proc through `_read`. The `unit` fixture serves odd /proc content from
memory; `unit_tree` lays the control group out as directories of cgroup.procs files (walked by the real _pids) with
/proc/PID/{environ,cmdline} as files.
"""
import json
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_env
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    completed, fake_commands, run_json, run_kwargs)

GROUP = "/system.slice/sglang.service"
NCCL = {"NCCL_PROTO": "LL", "NCCL_NVLS_ENABLE": "0"}
SERVER = ["/opt/sglang/venv/bin/python3", "-m", "sglang.launch_server", "--tp", "2"]


# -------------------------------------------------------------------------------------------------------- env-proof

def test_env_file_syntax(tmp_path):
    path = tmp_path / "nccl.env"
    path.write_text("\n".join([
        "# comment=1",
        "; comment=2",
        "   ",
        "garbage line",
        "  NCCL_PROTO = LL  ",
        "export   NCCL_ALGO=Ring",
        'QUOTED="a b"',
        "SINGLE='c d'",
        'EMPTY=""',
        'LONE="',
        "MIXED='x\"",
        "XMARK=XabcX",
        "PLAIN=ab",
        "EQUALS=a=b=c",
        "NCCL_PROTO=Simple",  # the last one wins
    ]) + "\n", encoding="utf-8")
    assert _helper_env._env_file(str(path)) == {
        "NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring", "QUOTED": "a b", "SINGLE": "c d", "EMPTY": "", "LONE": '"',
        "MIXED": "'x\"", "XMARK": "XabcX", "PLAIN": "ab", "EQUALS": "a=b=c",
    }


def test_control_group_asks_systemctl(monkeypatch):
    calls = []
    fake_commands(monkeypatch, calls, {"systemctl": completed(GROUP + "\n")})
    assert _helper_env._control_group("sglang.service") == GROUP
    assert calls == [(["systemctl", "show", "--property=ControlGroup", "--value", "sglang.service"], run_kwargs())]


@pytest.mark.parametrize("present, found", [
    ({"/sys/fs/cgroup/g/cgroup.procs", "/sys/fs/cgroup/unified/g/cgroup.procs"}, "/sys/fs/cgroup/g"),
    ({"/sys/fs/cgroup/unified/g/cgroup.procs", "/sys/fs/cgroup/systemd/g/cgroup.procs"}, "/sys/fs/cgroup/unified/g"),
    ({"/sys/fs/cgroup/systemd/g/cgroup.procs"}, "/sys/fs/cgroup/systemd/g"),
    (set(), None),
])
def test_cgroup_dir_tries_v2_then_the_v1_hierarchies(monkeypatch, present, found):
    asked = []
    isfile = os.path.isfile

    def fake_isfile(path):
        if not str(path).startswith("/sys/fs/cgroup"):
            return isfile(path)
        asked.append(path)
        return path in present

    monkeypatch.setattr(_helper_env.os.path, "isfile", fake_isfile)
    assert _helper_env._cgroup_dir("/g") == found
    tried = ["/sys/fs/cgroup/g/cgroup.procs", "/sys/fs/cgroup/unified/g/cgroup.procs",
             "/sys/fs/cgroup/systemd/g/cgroup.procs"]
    assert asked == tried[:len(asked)] and asked[-1] == (found + "/cgroup.procs" if found else tried[-1])


def test_pids_walks_sub_groups_and_merges(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "cgroup.procs").write_text("30\n\n4\n")
    (tmp_path / "a" / "cgroup.procs").write_text("")
    (tmp_path / "a" / "b" / "cgroup.procs").write_text("4\n200\n  \n")
    (tmp_path / "a" / "b" / "other").write_text("99\n")
    assert _helper_env._pids(str(tmp_path)) == [4, 30, 200]


def test_read_reads_proc():
    with open("/proc/%d/cmdline" % os.getpid(), "rb") as handle:
        assert _helper_env._read(os.getpid(), "cmdline") == handle.read()
    with pytest.raises(FileNotFoundError):
        _helper_env._read(os.getpid(), "no-such-entry")


@pytest.fixture
def unit(tmp_path, monkeypatch):
    """unit({pid: (environ bytes, cmdline bytes) or an exception}): the unit's control group, flat, with a fake
    /proc behind _helper_env._read."""
    def make(procs, group=GROUP):
        cgroup = tmp_path / "cgroup"
        cgroup.mkdir()
        (cgroup / "cgroup.procs").write_text("".join("%d\n" % pid for pid in procs))

        def read(pid, name):
            entry = procs[pid]
            if isinstance(entry, Exception):
                raise entry
            return entry[0] if name == "environ" else entry[1]

        monkeypatch.setattr(_helper_env, "_control_group", lambda name: group if name == "sglang.service" else "")
        monkeypatch.setattr(_helper_env, "_cgroup_dir", lambda g: str(cgroup))
        monkeypatch.setattr(_helper_env, "_read", read)
    return make


def env_proof(monkeypatch, capsys, *args):
    rc, out, _err = run_json(monkeypatch, capsys, "env-proof", "--unit", "sglang.service", *args)
    return rc, out


def test_env_proof_reads_odd_proc_content(unit, monkeypatch, capsys):
    long_cmd = b"/opt/sglang/venv/bin/python3\0-m\0sglang.launch_server\0--model-path\0" + b"m" * 300 + b"\0"
    unit({
        7: (b"NCCL_PROTO=LL\0OPTS=a=b\0junk\0\xffKEY=\xfe\0", long_cmd),
        8: (b"NCCL_PROTO=LL\0", b"sglang::scheduler_TP0\0\xff\0"),
        3: ProcessLookupError(3, "No such process"),  # exited between listing and reading: skipped, the rest read
        10: FileNotFoundError(2, "No such file or directory"),
    })
    # an undecodable variable is compared with replacement characters
    expected = {"NCCL_PROTO": "LL", "OPTS": "a=b", "\ufffdKEY": "\ufffd"}
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", json.dumps(expected), "--min-schedulers", "1")
    assert rc == 1 and out["schedulers"] == 1 and out["min_schedulers"] == 1
    full = "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path " + "m" * 300
    assert out["processes"] == [
        {"pid": 7, "cmd": full[:200], "ok": True, "mismatched": {}},
        {"pid": 8, "cmd": "sglang::scheduler_TP0 \ufffd", "ok": False,
         "mismatched": {"OPTS": {"want": "a=b", "got": None}, "\ufffdKEY": {"want": "\ufffd", "got": None}}},
    ]
    assert out["error"] == "1 of 2 processes lack the expected environment: PIDs [8]"


def test_env_proof_output_fields(unit, monkeypatch, capsys):
    unit({5: (b"A=1\0B=2\0", b"sglang::scheduler_TP0\0"), 6: (b"A=1\0B=2\0", b"sglang::scheduler_TP1\0")})
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", '{"A": 1, "B": "2"}', "--min-schedulers", "2")
    assert rc == 0
    assert out == {"ok": True, "unit": "sglang.service", "control_group": GROUP, "expected": {"A": "1", "B": "2"},
                   "env_file_drift": {}, "processes": [
                       {"pid": 5, "cmd": "sglang::scheduler_TP0", "ok": True, "mismatched": {}},
                       {"pid": 6, "cmd": "sglang::scheduler_TP1", "ok": True, "mismatched": {}}],
                   "schedulers": 2, "min_schedulers": 2, "error": None, "hint": None}
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", '{"A": "1"}', "--min-schedulers", "3")
    assert rc == 1 and out["ok"] is False
    assert out["error"] == "2 scheduler workers (sglang::scheduler*) in %s, expected at least 3" % GROUP


def test_env_proof_with_no_process_left(unit, monkeypatch, capsys):
    unit({9: ProcessLookupError(9, "No such process")})
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", '{"A": "1"}')
    assert rc == 1 and out["processes"] == [] and out["error"] == "no process in %s" % GROUP


def test_env_proof_env_file_drift_wins_and_desired_values_are_expected(unit, monkeypatch, capsys, tmp_path):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("A=1\nB=old\n")
    unit({5: (b"A=1\0B=new\0C=3\0", b"sglang\0")})
    rc, out = env_proof(monkeypatch, capsys, "--env-file", str(env_file), "--expected-json",
                        '{"B": "new", "C": "3"}')
    drift = {"B": {"want": "new", "file": "old"}, "C": {"want": "3", "file": None}}
    assert rc == 1 and out["expected"] == {"A": "1", "B": "new", "C": "3"}
    assert out["processes"][0]["ok"] is True and out["env_file_drift"] == drift
    assert out["error"] == "the environment file differs from the desired values: %s" % drift


def test_env_proof_with_an_env_file_that_agrees(unit, monkeypatch, capsys, tmp_path):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("A=1\nB=2\n")
    unit({5: (b"A=1\0B=2\0", b"sglang\0")})
    rc, out = env_proof(monkeypatch, capsys, "--env-file", str(env_file), "--expected-json", '{"B": "2"}')
    assert (rc, out["ok"], out["error"], out["env_file_drift"]) == (0, True, None, {})
    assert out["expected"] == {"A": "1", "B": "2"}


def test_env_proof_refuses_to_prove_nothing(unit, monkeypatch, capsys, tmp_path):
    unit({5: (b"A=1\0", b"sglang\0")})
    empty = tmp_path / "empty.env"
    empty.write_text("# nothing\n")
    rc, out = env_proof(monkeypatch, capsys, "--env-file", str(empty))
    assert (rc, out["ok"], out["processes"], out["control_group"]) == (1, False, [], None)
    assert out["error"] == "no expected variables (empty env file and no --expected-json): nothing to prove"


def test_env_proof_refuses_an_unreadable_env_file(unit, monkeypatch, capsys, tmp_path):
    unit({5: (b"A=1\0", b"sglang\0")})
    missing = str(tmp_path / "missing.env")
    rc, out = env_proof(monkeypatch, capsys, "--env-file", missing, "--expected-json", '{"A": "1"}')
    assert rc == 1 and out["ok"] is False and out["processes"] == [] and out["expected"] == {}
    assert out["error"] == "cannot read %s: [Errno 2] No such file or directory: %r" % (missing, missing)


def test_env_proof_without_control_group(monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(_helper_env, "_control_group", lambda name: "")
    monkeypatch.setattr(_helper_env, "_cgroup_dir", lambda group: asked.append(group) or "/sys/fs/cgroup")
    rc, out = env_proof(monkeypatch, capsys, "--expected-json", '{"A": "1"}')
    assert (rc, asked, out["ok"]) == (1, [], False)  # an empty ControlGroup is not the root of the hierarchy
    assert out["control_group"] == "" and out["error"] == "sglang.service has no control group (is it running?)"


# ------------------------------------------------------------------------------------------------------- worker-env
# The benchmark records what this reads (sglang_bench_run calls it): the story it guards is NCCL variables that
# reached the launcher but not the spawned workers.

def worker_env(monkeypatch, capsys, *args):
    return run_json(monkeypatch, capsys, "worker-env", "--unit", "sglang.service", *args)[:2]


# CUDA_HOME and OTHER share first letters with the prefixes: only whole prefixes select
TUNED = b"PATH=/usr/bin\0NCCL_PROTO=LL\0NCCL_ALGO=Ring\0TORCH_NCCL_X=1\0CUDA_HOME=/c\0OTHER=1\0junk\0"


def test_worker_env_reads_the_scheduler_workers_not_the_launcher(unit, monkeypatch, capsys):
    # SGLang's launcher sets NCCL_CUMEM_ENABLE etc. for its children: its own environ (the start environment)
    # differs from the workers' by design and is not what NCCL runs with
    child = TUNED + b"NCCL_CUMEM_ENABLE=0\0"
    unit({100: (TUNED, b"/opt/sglang/venv/bin/python\0-m\0sglang.launch_server\0"),
          101: (child, b"sglang::scheduler_TP0\0"), 102: (child, b"sglang::scheduler_TP1\0"),
          103: (child, b"sglang::detokenizer\0"), 104: ProcessLookupError(104, "No such process")})
    rc, out = worker_env(monkeypatch, capsys, "--prefix", "NCCL_", "--prefix=TORCH_NCCL")
    assert rc == 0
    assert out == {"ok": True, "unit": "sglang.service", "control_group": GROUP, "error": None,
                   "pids": [100, 101, 102, 103, 104], "worker_pids": [101, 102], "workers_titled": True,
                   "pids_with_vars": [100, 101, 102, 103], "consistent": True,
                   "env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "TORCH_NCCL_X": "1", "NCCL_CUMEM_ENABLE": "0"}}


def test_worker_env_names_the_worker_that_differs(unit, monkeypatch, capsys):
    unit({101: (TUNED, b"sglang::scheduler_TP0\0"), 102: (b"NCCL_CUMEM_ENABLE=0\0PATH=/bin\0", b"sglang::scheduler_TP1\0"),
          103: (b"PATH=/bin\0", b"sglang::scheduler_TP2\0")})
    rc, out = worker_env(monkeypatch, capsys, "--prefix", "NCCL_")
    assert rc == 0 and out["ok"] is True and out["consistent"] is False and out["env"] == {}
    assert out["per_pid"] == {"101": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, "102": {"NCCL_CUMEM_ENABLE": "0"},
                              "103": {}}
    assert out["pids_with_vars"] == [101, 102] and out["worker_pids"] == [101, 102, 103]


def test_worker_env_without_titled_workers_compares_every_process(unit, monkeypatch, capsys):
    unit({10: (TUNED, b"python\0"), 11: (TUNED, b"python\0"), 12: FileNotFoundError(2, "gone")})
    rc, out = worker_env(monkeypatch, capsys, "--prefix", "NCCL_")
    assert rc == 0 and out["workers_titled"] is False and out["consistent"] is True
    assert out["pids"] == [10, 11, 12] and out["worker_pids"] == [10, 11] and "per_pid" not in out
    assert out["env"] == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    # no prefix: nothing is recorded, and nobody carries a variable
    rc, out = worker_env(monkeypatch, capsys)
    assert rc == 0 and out["env"] == {} and out["pids_with_vars"] == [] and out["consistent"] is True


def test_worker_env_with_every_process_gone_vouches_for_nothing(unit, monkeypatch, capsys):
    unit({7: ProcessLookupError(7, "No such process")})
    rc, out = worker_env(monkeypatch, capsys, "--prefix", "NCCL_")
    assert rc == 0 and out["consistent"] is False and out["worker_pids"] == [] and out["per_pid"] == {}


def test_worker_env_fails_without_a_process(unit, monkeypatch, capsys):
    unit({})
    rc, out = worker_env(monkeypatch, capsys)
    assert (rc, out) == (1, {"ok": False, "unit": "sglang.service", "control_group": GROUP,
                             "error": "unit sglang.service has no process"})


def test_worker_env_fails_without_a_control_group(monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(_helper_env, "_control_group", lambda name: "/system.slice/sglang.service")
    monkeypatch.setattr(_helper_env, "_cgroup_dir", asked.append)
    rc, out = worker_env(monkeypatch, capsys)
    assert rc == 1 and asked == ["/system.slice/sglang.service"] and out["control_group"] == GROUP
    assert out["error"] == ("unit sglang.service has no cgroup ('/system.slice/sglang.service' under any of "
                            "/sys/fs/cgroup, /sys/fs/cgroup/unified, /sys/fs/cgroup/systemd): is the server running?")
    monkeypatch.setattr(_helper_env, "_control_group", lambda name: "")
    rc, out = worker_env(monkeypatch, capsys)
    assert rc == 1 and asked == ["/system.slice/sglang.service"] and out["error"].startswith(
        "unit sglang.service has no cgroup ('' under")


def test_worker_env_reports_a_systemctl_failure(monkeypatch, capsys):
    fake_commands(monkeypatch, [], {"systemctl": completed("", "Failed to connect to bus\n", 1)})
    rc, out = worker_env(monkeypatch, capsys)
    assert (rc, out) == (1, {"ok": False, "unit": "sglang.service", "control_group": None,
                             "error": "systemctl show sglang.service failed: Failed to connect to bus"})
    fake_commands(monkeypatch, [], {"systemctl": completed(" no unit \n", "", 4)})
    assert worker_env(monkeypatch, capsys)[1]["error"] == "systemctl show sglang.service failed: no unit"
    fake_commands(monkeypatch, [], {"systemctl": completed("", "", 1)})
    assert worker_env(monkeypatch, capsys)[1]["error"] == "systemctl show sglang.service failed: "


def test_env_proof_reports_a_systemctl_failure(monkeypatch, capsys, tmp_path):
    env = tmp_path / "nccl.env"
    env.write_text("NCCL_PROTO=LL\n")
    fake_commands(monkeypatch, [], {"systemctl": completed("", "Failed to connect to bus\n", 1)})
    rc, out, _err = run_json(monkeypatch, capsys, "env-proof", "--unit", "sglang.service", "--env-file", str(env))
    assert rc == 1 and out["ok"] is False and out["control_group"] is None
    assert out["error"] == "systemctl show sglang.service failed: Failed to connect to bus"


def test_pids_skips_a_sub_group_removed_during_the_walk(tmp_path, monkeypatch):
    (tmp_path / "cgroup.procs").write_text("5\n")
    for name, pid in (("a", 6), ("b", 7), ("c", 8)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cgroup.procs").write_text("%d\n" % pid)
    real_open, gone = open, []

    def fake_open(path, *args, **kwargs):
        # the first sub-group walked is removed before it is read; the walk goes on to the others
        if os.path.dirname(str(path)) != str(tmp_path) and not gone:
            gone.append(os.path.basename(os.path.dirname(str(path))))
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    left = {"a": 6, "b": 7, "c": 8}
    pids = _helper_env._pids(str(tmp_path))
    assert len(gone) == 1 and pids == sorted([5] + [pid for name, pid in left.items() if name != gone[0]])


# -------------------------------------------------------------------------------- env-proof over a control group of directories

@pytest.fixture
def unit_tree(tmp_path, monkeypatch):
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

    monkeypatch.setattr(_helper_env, "_control_group", lambda name: GROUP if name == "sglang.service" else "")
    monkeypatch.setattr(_helper_env, "_cgroup_dir", lambda group: str(cgroup) if group == GROUP else None)
    monkeypatch.setattr(_helper_env, "_read", read)
    return make


def proof(monkeypatch, capsys, *args):
    rc, out, _err = run_json(monkeypatch, capsys, "env-proof", "--unit", "sglang.service", *args)
    return rc, out


def base_env(**extra):
    return dict({"PATH": "/usr/bin:/bin", "HOME": "/root"}, **extra)


def test_env_proof_passes_when_every_process_carries_every_value(unit_tree, monkeypatch, capsys):
    unit_tree({
        100: (base_env(**NCCL), SERVER),
        101: (base_env(**NCCL), ["sglang::scheduler_TP0"]),
        102: (base_env(**NCCL), ["sglang::scheduler_TP1"]),
        103: (base_env(**NCCL), ["sglang::detokenizer"]),
    }, listed=[104])
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL), "--min-schedulers", "2")
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
def test_env_proof_fails_when_only_some_processes_carry_the_variables(unit_tree, monkeypatch, capsys,
                                                                      bad_pid, bad_env, got):
    procs = {
        100: (base_env(**NCCL), SERVER),
        101: (base_env(**NCCL), ["sglang::scheduler_TP0"]),
        102: (base_env(**NCCL), ["sglang::scheduler_TP1"]),
    }
    procs[bad_pid] = (bad_env, procs[bad_pid][1])
    unit_tree(procs)
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL))
    assert rc == 1 and out["ok"] is False
    assert out["error"] == "1 of 3 processes lack the expected environment: PIDs [%d]" % bad_pid
    verdicts = {p["pid"]: (p["ok"], p["mismatched"]) for p in out["processes"]}
    assert verdicts == {pid: (True, {}) for pid in procs if pid != bad_pid} | {
        bad_pid: (False, {"NCCL_PROTO": {"want": "LL", "got": got}})}


def test_env_proof_expects_the_env_file_and_reports_its_drift(unit_tree, monkeypatch, capsys, tmp_path):
    env_file = tmp_path / "nccl.env"
    env_file.write_text('# managed\nNCCL_PROTO="LL"\nexport NCCL_NVLS_ENABLE=\'0\'\n\nNCCL_DEBUG=WARN\n')
    unit_tree({100: (base_env(NCCL_DEBUG="WARN", **NCCL), SERVER)})
    rc, out = proof(monkeypatch, capsys, "--env-file", str(env_file))
    assert rc == 0 and out["expected"] == dict(NCCL, NCCL_DEBUG="WARN")
    # the file is read, but disagrees with the desired values: a proof against the file alone would pass
    rc, out = proof(monkeypatch, capsys, "--env-file", str(env_file), "--expected-json", '{"NCCL_PROTO": "Simple"}')
    assert rc == 1 and out["env_file_drift"] == {"NCCL_PROTO": {"want": "Simple", "file": "LL"}}
    assert out["error"].startswith("the environment file differs from the desired values")


def test_env_proof_counts_scheduler_workers(unit_tree, monkeypatch, capsys):
    unit_tree({100: (base_env(**NCCL), SERVER), 101: (base_env(**NCCL), ["sglang::scheduler_TP0"])})
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL), "--min-schedulers", "2")
    assert rc == 1 and out["schedulers"] == 1
    assert out["error"] == "1 scheduler workers (sglang::scheduler*) in %s, expected at least 2" % GROUP


def test_env_proof_refuses_nothing_to_prove_and_a_stopped_unit(unit_tree, monkeypatch, capsys):
    unit_tree({100: (base_env(**NCCL), SERVER)})
    rc, out = proof(monkeypatch, capsys)
    assert rc == 1 and "nothing to prove" in out["error"]
    monkeypatch.setattr(_helper_env, "_control_group", lambda name: "")
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL))
    assert rc == 1 and out["error"] == "sglang.service has no control group (is it running?)"


def test_env_proof_names_the_setproctitle_cause_for_retitled_workers(unit_tree, monkeypatch, capsys):
    # As on the real H200 (2026-12-03): the scheduler's and detokenizer's /proc/PID/environ had lost the NCCL set
    # (setproctitle writes over it without SPT_NOENV); the main process and the resource tracker kept it.
    unit_tree({
        100: (base_env(**NCCL), SERVER),
        101: ({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, ["sglang::scheduler"]),
        102: ({}, ["sglang::detokenizer"]),
        103: (base_env(**NCCL), ["python3", "-c", "from multiprocessing.resource_tracker import main;main(28)"]),
    })
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL), "--min-schedulers", "1")
    assert rc == 1 and out["error"] == "2 of 4 processes lack the expected environment: PIDs [101, 102]"
    assert out["hint"] == ("PIDs [101, 102] are SGLang workers titled with setproctitle, which overwrites "
                           "/proc/PID/environ unless SPT_NOENV is set in their environment; the role's unit sets "
                           "SPT_NOENV=1 (an older unit, or a server started outside it?)")


def test_env_proof_gives_no_setproctitle_hint_when_the_workers_had_spt_noenv(unit_tree, monkeypatch, capsys):
    unit_tree({
        100: (base_env(SPT_NOENV="1", **NCCL), SERVER),
        101: (base_env(SPT_NOENV="1", NCCL_NVLS_ENABLE="0"), ["sglang::scheduler"]),  # really lacks NCCL_PROTO
    })
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps(NCCL))
    assert rc == 1 and out["hint"] is None
    rc, out = proof(monkeypatch, capsys, "--expected-json", json.dumps({"NCCL_NVLS_ENABLE": "0"}))
    assert rc == 0 and out["hint"] is None
