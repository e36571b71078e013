"""The sglang_server role's decisions (plugins/filter/sglang_decisions.py): one test per reason a server restarts, a
verify finds a problem or an audit a drift; a replica's view of its nodes; the state and failure readings; where the
server listens; which GPUs the gates read; the preflight's rules and the validation's message."""
import json

import pytest

from ansible_collections.gpuserve.sglang.plugins.filter import sglang_decisions as sd

SHA = dict(args_sha1="a1", unit_sha1="u1", env_sha1="e1")
STATE = dict(helper_ok=True, commit="c" * 40, dirty=False, changes=[], active=True, active_state="active",
             main_pid=4242, since="Fri 2026-12-04 13:09:25 UTC", **SHA)
MANIFEST = dict(main_pid=4242, files=dict(SHA), sglang=dict(commit="c" * 40, dirty=False, version="0.5.23"),
                phase="deploy", times=dict(total_s=9.5), gate=dict(polls=1), release=dict(kill_to_pass_s=0.7),
                driver="580.159.04")


def state(**kw):
    return dict(STATE, **kw)


def manifest(**kw):
    return dict(MANIFEST, **kw)


# drift: the running server against its verified start and the inventory

def test_no_drift_when_the_running_server_is_the_verified_one():
    assert sd.drift(MANIFEST, STATE) == []
    assert sd.drift(MANIFEST, STATE, {"args": False, "unit": False}) == []


def test_a_restart_forced_or_requested_comes_first():
    assert sd.drift(MANIFEST, STATE, forced=True, requested=True) == [
        "forced (sglang_server_force_restart)",
        "requested by a handler (gpuserve sglang restart: the NCCL files change)"]


def test_a_unit_that_is_not_active():
    assert sd.drift(MANIFEST, state(active=False, active_state="failed", main_pid=0)) == ["unit is failed"]


def test_files_the_inventory_renders_otherwise():
    assert sd.drift(MANIFEST, STATE, {"args": True}) == ["args file differs from the inventory"]
    assert sd.drift(MANIFEST, STATE, {"unit": True}) == ["unit file differs from the inventory"]


def test_no_manifest_is_a_server_never_verified():
    assert sd.drift({}, STATE) == ["no deployment manifest (never verified)"]
    assert sd.drift(None, state(active=False, active_state="inactive"), {"args": True}) == [
        "unit is inactive", "args file differs from the inventory", "no deployment manifest (never verified)"]


def test_a_running_process_that_is_not_the_verified_one():
    assert sd.drift(manifest(main_pid=17), STATE) == ["running server (PID 4242) is not the verified one (PID 17)"]
    assert sd.drift(manifest(main_pid=None), STATE) == [
        "running server (PID 4242) is not the verified one (PID none)"]
    assert sd.drift(manifest(main_pid=None), state(main_pid=1)) == [
        "running server (PID 1) is not the verified one (PID none)"]


def test_a_server_the_containers_boot_started_from_the_verified_files_is_the_verified_one():
    # a host or container reboot: systemd started the unit (through its gate) before the boot finished
    assert sd.drift(manifest(main_pid=17), state(started_at_boot=True)) == []
    # but not if its files or commit are not the verified start's (a run killed before it verified a new config)
    assert sd.drift(manifest(main_pid=17), state(started_at_boot=True, args_sha1="zz")) == [
        "args file changed since the verified start"]
    assert sd.drift(manifest(main_pid=17), state(started_at_boot=False)) == [
        "running server (PID 4242) is not the verified one (PID 17)"]


@pytest.mark.parametrize("unit, boot, started", [
    ({"ActiveEnterTimestampMonotonic": "9000000"}, {"FinishTimestampMonotonic": "12000000"}, True),
    ({"ActiveEnterTimestampMonotonic": "12000000"}, {"FinishTimestampMonotonic": "12000000"}, True),
    ({"ActiveEnterTimestampMonotonic": "9000000"}, {"FinishTimestampMonotonic": "0"}, True),  # still booting
    ({"ActiveEnterTimestampMonotonic": "12000001"}, {"FinishTimestampMonotonic": "12000000"}, False),  # by hand, later
    ({"ActiveEnterTimestampMonotonic": "0"}, {"FinishTimestampMonotonic": "0"}, False),  # never active
    ({"ActiveEnterTimestampMonotonic": "9000000"}, {}, False),  # the boot not read (an older helper)
    ({"ActiveEnterTimestampMonotonic": "9000000"}, None, False),
    ({}, {"FinishTimestampMonotonic": "12000000"}, False),
    ({"ActiveEnterTimestampMonotonic": ""}, {"FinishTimestampMonotonic": "12000000"}, False),
])
def test_started_at_boot_means_active_before_the_containers_boot_finished(unit, boot, started):
    assert sd.started_at_boot(unit, boot) is started


def test_a_stopped_unit_is_not_also_a_process_mismatch():
    assert sd.drift(MANIFEST, state(active=False, active_state="inactive", main_pid=0)) == ["unit is inactive"]


@pytest.mark.parametrize("key, name", [("args_sha1", "args"), ("unit_sha1", "unit"), ("env_sha1", "NCCL env")])
def test_a_file_changed_since_the_verified_start(key, name):
    assert sd.drift(MANIFEST, state(**{key: "zz"})) == ["%s file changed since the verified start" % name]


def test_a_manifest_without_file_sums_counts_every_file_as_changed():
    assert sd.drift(manifest(files=None), STATE) == [
        "args file changed since the verified start", "unit file changed since the verified start",
        "NCCL env file changed since the verified start"]


def test_a_file_missing_on_disk_and_in_the_manifest_has_not_changed():
    gone = dict(args_sha1="", unit_sha1="", env_sha1="")
    assert sd.drift(manifest(files={}), state(**gone)) == []
    assert sd.drift(manifest(sglang=dict(dirty=False)), state(commit="")) == []


def test_the_sglang_commit_changed():
    assert sd.drift(MANIFEST, state(commit="d" * 40)) == [
        "SGLang commit changed since the verified start (cccccccccccc -> dddddddddddd)"]
    assert sd.drift(manifest(sglang=None), state(dirty=None)) == [
        "SGLang commit changed since the verified start (? -> cccccccccccc)"]


def test_the_tree_dirty_flag_changed():
    assert sd.drift(MANIFEST, state(dirty=True)) == [
        "SGLang tree dirty flag changed since the verified start (False -> True)"]


# verification


# reasons: each with its one-word key, and whether this run makes the change (pending) or it is on disk already

def test_each_reason_has_a_key_and_says_whether_this_run_makes_the_change():
    keyed = sd.reasons(manifest(main_pid=17, files=dict(SHA, env_sha1="old")), state(dirty=True),
                       {"args": True, "unit": True}, forced=True, requested=True)
    assert [(r["key"], r["pending"]) for r in keyed] == [
        ("forced", True), ("env", True), ("args", True), ("unit", True), ("unverified", False), ("env", False),
        ("dirty", False)]
    sentences = sd.drift(manifest(main_pid=17, files=dict(SHA, env_sha1="old")), state(dirty=True),
                         {"args": True, "unit": True}, True, True)
    assert [r["reason"] for r in keyed] == sentences


def test_the_keys_of_a_stopped_unit_a_missing_manifest_and_a_new_commit():
    assert [r["key"] for r in sd.reasons({}, state(active=False, active_state="failed", main_pid=0))] == [
        "stopped", "unverified"]
    assert [r["key"] for r in sd.reasons(MANIFEST, state(commit="d" * 40))] == ["commit"]


# decision: what the role does with the server, and in check mode what the preview leaves out

def found(*keys, pending=True):
    return [{"key": key, "reason": "%s reason" % key, "pending": pending} for key in keys]


def test_nothing_to_do():
    assert sd.decision([])["message"] == "no restart: the running server matches its verified manifest"
    got = sd.decision([], check_mode=True)
    assert got == {"action": "none", "restart": False, "check_mode": True, "keys": [], "reasons": [],
                   "not_applied": [], "skipped": [],
                   "message": "nothing to do: the running server matches its verified manifest and the inventory"}


def test_a_restart_names_its_keys_once_then_its_reasons():
    got = sd.decision(found("args") + found("env") + found("env", pending=False))
    assert got["action"] == "restart" and got["restart"] is True and got["keys"] == ["args", "env"]
    assert got["message"] == "restart: args, env (args reason; env reason; env reason)"
    assert got["not_applied"] == [] and got["skipped"] == []


def test_check_mode_would_restart_and_leaves_out_the_lifecycle():
    got = sd.decision(found("args"), check_mode=True)
    assert got["message"] == "would restart: args (args reason)"
    assert got["not_applied"] == ["args"] and got["skipped"] == [sd.LIFECYCLE]


def test_check_mode_with_new_nccl_values_leaves_out_their_proof():
    got = sd.decision(found("env"), check_mode=True)
    assert got["not_applied"] == ["env"] and got["skipped"] == [sd.LIFECYCLE, sd.NOT_APPLIED["env"]]


def test_drift_on_disk_is_not_a_change_check_mode_leaves_unapplied():
    got = sd.decision(found("env", "stopped", pending=False), check_mode=True)
    assert got["message"].startswith("would restart: env, stopped")
    assert got["not_applied"] == [] and got["skipped"] == [sd.LIFECYCLE]


def test_check_mode_with_a_new_commit_would_rebuild():
    got = sd.decision([], check_mode=True, pending_commit="2" * 40, commit="e" * 40)
    assert got["action"] == "rebuild" and got["keys"] == ["commit"] and got["not_applied"] == ["commit"]
    assert got["message"] == ("would rebuild: commit (sglang_install would check out SGLang 222222222222 and "
                              "reinstall it (the tree is at eeeeeeeeeeee))")
    assert got["skipped"] == [sd.LIFECYCLE, sd.NOT_APPLIED["commit"]]


def test_a_pending_commit_outside_check_mode_is_none():
    assert sd.decision([], pending_commit="2" * 40)["action"] == "none"


def test_reasons_given_as_words_are_their_own_keys():
    got = sd.decision(["restart_server.yml"], check_mode=True)
    assert got["message"] == "would restart: restart_server.yml" and got["not_applied"] == ["restart_server.yml"]


FACTS = dict(host="ct101", helper="/usr/local/sbin/gpuserve-sglang", expected_commit="c" * 40,
             replica=dict(name="ct101", nnodes=1, rank=0, rank0="ct101"),
             ready=dict(rc=0, stdout=json.dumps(dict(ready=True, phase="HTTP 200"))),
             env_proof=dict(ok=True, expected=dict(NCCL_PROTO="LL"), processes=[{}, {}], schedulers=1, error=None))


def verification(st=None, **facts):
    return sd.verification(st or dict(STATE, manifest=MANIFEST), dict(FACTS, **facts))


def test_a_verified_server_reports_every_figure():
    assert verification() == {
        "host": "ct101", "ok": True, "problems": [], "decision": None, "skipped": [],
        "sglang": {"commit": "c" * 40, "dirty": False, "version": "0.5.23"},
        "unit": {"active": True, "main_pid": 4242, "since": "Fri 2026-12-04 13:09:25 UTC", "started_at_boot": False},
        "readiness": {"ready": True, "phase": "HTTP 200"},
        "replica": {"name": "ct101", "nnodes": 1, "node_rank": 0},
        "env_proof": {"ok": True, "variables": {"NCCL_PROTO": "LL"}, "processes": 2, "schedulers": 1, "error": None},
        "manifest": {"phase": "deploy", "times": {"total_s": 9.5}, "gate": {"polls": 1}, "kill_to_pass_s": 0.7,
                     "driver": "580.159.04"},
    }


def test_verification_of_nothing_deployed():
    got = sd.verification(dict(STATE, helper_ok=False, active=False, active_state="inactive", main_pid=0,
                               manifest={}), dict(FACTS, ready={}, env_proof={}, expected_commit=""))
    assert got["ok"] is False
    assert got["problems"] == [
        "/usr/local/sbin/gpuserve-sglang missing (never deployed by this role?)", "unit is inactive",
        "no deployment manifest (never verified)", "/health_generate not 200: not probed", "env proof: not run"]
    assert got["sglang"]["version"] is None and got["readiness"] == {}
    assert got["manifest"] == {"phase": None, "times": {}, "gate": {}, "kill_to_pass_s": None, "driver": None}
    assert got["env_proof"] == {"ok": False, "variables": {}, "processes": 0, "schedulers": 0, "error": None}


def test_verification_counts_drift_among_its_problems():
    assert verification(dict(STATE, args_sha1="zz", manifest=MANIFEST), rendered={"unit": True})["problems"] == [
        "unit file differs from the inventory", "args file changed since the verified start"]


def test_readiness_not_200_names_rank_0_on_another_node():
    ready = dict(rc=3, stdout=json.dumps(dict(ready=False, phase="HTTP 503")))
    assert verification(ready=ready)["problems"] == ["/health_generate not 200: HTTP 503"]
    other = dict(name="big", nnodes=2, rank=1, rank0="ct104")
    got = verification(ready=ready, replica=other)
    assert got["problems"] == ["rank 0 (ct104): /health_generate not 200: HTTP 503"]
    assert got["replica"] == {"name": "big", "nnodes": 2, "node_rank": 1}


def test_a_failed_env_proof():
    got = verification(env_proof=dict(ok=False, error="NCCL_PROTO missing in 2 of 3", processes=[{}]))
    assert got["problems"] == ["env proof: NCCL_PROTO missing in 2 of 3"]
    assert got["env_proof"] == {"ok": False, "variables": {}, "processes": 1, "schedulers": 0,
                                "error": "NCCL_PROTO missing in 2 of 3"}


def test_the_env_proof_of_a_stopped_unit_is_not_read():
    got = verification(dict(STATE, active=False, active_state="inactive", main_pid=0, manifest=MANIFEST))
    assert got["problems"] == ["unit is inactive", "env proof: not run"]
    assert got["env_proof"]["processes"] == 0


def test_a_tree_that_is_not_the_pin():
    assert verification(expected_commit="e" * 40)["problems"] == [
        "tree commit %s is not the pinned %s" % ("c" * 40, "e" * 40)]


def test_check_mode_leaves_out_the_pin_of_a_commit_it_did_not_check_out_and_says_so():
    decided = sd.decision([], check_mode=True, pending_commit="e" * 40, commit="c" * 40)
    got = verification(expected_commit="e" * 40, decision=decided)
    assert got["ok"] is True and got["problems"] == []
    assert got["decision"] == decided["message"] and got["skipped"] == decided["skipped"]


def test_check_mode_still_fails_on_what_its_change_does_not_explain():
    decided = sd.decision(found("args"), check_mode=True)
    got = verification(dict(STATE, active=False, active_state="inactive", main_pid=0, manifest=MANIFEST),
                       expected_commit="e" * 40, decision=decided)
    assert got["problems"] == ["unit is inactive", "env proof: not run",
                               "tree commit %s is not the pinned %s" % ("c" * 40, "e" * 40)]


def test_a_dirty_tree_names_its_changes():
    st = dict(STATE, dirty=True, changes=[" M python/x.py", "?? y"], manifest=manifest(
        sglang=dict(commit="c" * 40, dirty=True)))
    assert verification(st)["problems"] == ["SGLang tree is dirty:  M python/x.py, ?? y"]


# answer, state, failure

@pytest.mark.parametrize("result, want", [
    ({"stdout": ' {"a": 1}\n'}, {"a": 1}), ({"stdout": '{"a": {"b": 2}}'}, {"a": {"b": 2}}),
    ({"stdout": "[1]"}, {}), ({"stdout": "{not json}"}, {}), ({"stdout": "{} x"}, {}), ({"stdout": '{"a": 1'}, {}),
    ({"stdout": None}, {}), ({}, {}), (None, {}), ({"stdout": '{"a"}'}, {}),
])
def test_a_helper_answer_is_its_json_object_or_nothing(result, want):
    assert sd.answer(result) == want


def test_answer_of_a_json_value_that_is_not_an_object():
    assert sd.answer({"stdout": "{}"}) == {}
    assert sd.answer({"stdout": '{"x": [1]}'}) == {"x": [1]}


PATHS = {"args": "/etc/gpuserve/sglang.args", "unit": "/etc/systemd/system/sglang.service",
         "env": "/etc/gpuserve/nccl.env"}
READ = {"git": {"rc": 0, "commit": "c" * 40, "dirty": True, "changes": ["x%d" % i for i in range(25)], "error": ""},
        "files": {PATHS["args"]: {"exists": True, "sha1": "a1"}, PATHS["unit"]: {"exists": True, "sha1": "u1"},
                  PATHS["env"]: {"exists": True, "sha1": "e1"}},
        "manifest": MANIFEST, "python_exists": True,
        "unit": {"ActiveState": "active", "MainPID": "4242", "ActiveEnterTimestamp": "then",
                 "ActiveEnterTimestampMonotonic": "9000000", "UnitFileState": "enabled"},
        "boot": {"FinishTimestampMonotonic": "12000000"}}


def test_the_state_call_read():
    assert sd.state({"rc": 0, "stdout": json.dumps(READ)}, PATHS) == {
        "started_at_boot": True, "helper_ok": True, "commit": "c" * 40, "dirty": True, "changes": ["x%d" % i for i in range(20)],
        "git_error": "", "active": True, "active_state": "active", "enabled": True, "main_pid": 4242, "since": "then",
        "args_sha1": "a1", "unit_sha1": "u1", "env_sha1": "e1", "env_file_exists": True, "python_exists": True,
        "manifest": MANIFEST, "startup": {}, "driver": None}


def test_the_state_call_passes_where_the_start_went_and_the_driver():
    startup = {"phases": [{"phase": "imports", "s": 13.8, "from": "exec"}], "total_s": 13.8}
    read = dict(READ, startup=startup, driver={"driver_version": "580.159.04"})
    got = sd.state({"rc": 0, "stdout": json.dumps(read)}, PATHS)
    assert (got["startup"], got["driver"]) == (startup, "580.159.04")


def test_a_helper_not_installed_yet_reads_as_nothing_deployed():
    assert sd.state({"rc": 2, "stdout": json.dumps(READ)}, PATHS, {"commit": "p" * 40, "dirty": False}) == {
        "started_at_boot": False, "helper_ok": False, "commit": "p" * 40, "dirty": False, "changes": [], "git_error": "", "active": False,
        "active_state": "unknown", "enabled": False, "main_pid": 0, "since": "", "args_sha1": "", "unit_sha1": "",
        "env_sha1": "", "env_file_exists": False, "python_exists": False, "manifest": {}, "startup": {},
        "driver": None}
    assert sd.state({"rc": 2}, PATHS)["commit"] == "unknown"


def test_a_tree_git_could_not_read_falls_back_to_the_install():
    read = dict(READ, git={"rc": 128, "error": "not a git repository"}, unit={"ActiveState": "inactive"})
    got = sd.state({"rc": 0, "stdout": json.dumps(read)}, PATHS, {"commit": "p" * 40, "dirty": None})
    assert (got["commit"], got["dirty"], got["git_error"]) == ("p" * 40, None, "not a git repository")
    assert got["enabled"] is False
    assert (got["active"], got["active_state"], got["main_pid"]) == (False, "inactive", 0)
    read = dict(READ, git={}, files={PATHS["env"]: {"exists": False, "sha1": ""}}, manifest=None)
    got = sd.state({"rc": 0, "stdout": json.dumps(read)}, PATHS)
    assert (got["commit"], got["dirty"], got["env_file_exists"], got["args_sha1"], got["manifest"]) == (
        "unknown", None, False, "", {})


def test_a_failure_keeps_the_steps_message_and_what_the_helper_said():
    said = json.dumps({"error": "unit stopped", "phase": "HTTP 503"})
    assert sd.failure({"msg": "non-zero return code.", "stdout": said}, "Lifecycle | wait") == {
        "task": "Lifecycle | wait", "msg": "non-zero return code: unit stopped"}
    assert sd.failure({"msg": "rc 3", "stdout": json.dumps({"phase": "HTTP 503"})}, "t")["msg"] == "rc 3: HTTP 503"
    assert sd.failure({"msg": "plain.", "stdout": "not json"}, "t")["msg"] == "plain."
    assert sd.failure({"stderr": "boom", "stdout": json.dumps({"error": ""})}, None) == {"task": "?", "msg": "boom"}
    assert sd.failure({"msg": 3}, "t")["msg"] == "3"
    assert sd.failure(None, "t") == {"task": "t", "msg": ""}


def test_a_failure_says_whether_the_server_was_stopped_when_asked():
    assert sd.failure({"msg": "m"}, "t", True) == {"task": "t", "msg": "m", "stopped": True}
    assert sd.failure({"msg": "m"}, "t", "") == {"task": "t", "msg": "m", "stopped": False}
    assert "stopped" not in sd.failure({"msg": "m"}, "t")


def test_a_long_failure_is_cut():
    assert sd.failure({"msg": "x" * 2000}, "t")["msg"] == "x" * 2000
    assert sd.failure({"msg": "x" * 2001}, "t")["msg"] == "x" * 2000 + "..."


# listen

@pytest.mark.parametrize("argv, want", [
    ([], {"host": "127.0.0.1", "port": 30000, "probe_host": "127.0.0.1"}),
    (None, {"host": "127.0.0.1", "port": 30000, "probe_host": "127.0.0.1"}),
    (["--host", "0.0.0.0", "--port", "31000"], {"host": "0.0.0.0", "port": 31000, "probe_host": "127.0.0.1"}),
    (["--port", 31000, "--host", "::"], {"host": "::", "port": 31000, "probe_host": "127.0.0.1"}),
    (["--host", "", "--tp-size", "8"], {"host": "", "port": 30000, "probe_host": "127.0.0.1"}),
    (["--host", "10.66.0.101"], {"host": "10.66.0.101", "port": 30000, "probe_host": "10.66.0.101"}),
    (["--tp-size", "8", "--host"], {"host": "127.0.0.1", "port": 30000, "probe_host": "127.0.0.1"}),
])
def test_where_the_server_listens(argv, want):
    assert sd.listen(argv) == want


# a multi-node replica

REPLICA = dict(name="big", nnodes=3, multinode=True, rank=0, rank0="a0",
               nodes=[dict(host="a0"), dict(host="a1"), dict(host="a2")])


def test_a_restart_of_one_node_restarts_every_node():
    mine, x, y = found("mine"), found("x"), found("y", pending=False)
    hv = {"a0": {"__sglang_server_node_reasons": mine}, "a1": {"__sglang_server_node_reasons": x + y}, "a2": {}}
    got = sd.peer_reasons(REPLICA, hv, "a0", mine)
    assert [(r["key"], r["reason"], r["pending"]) for r in got] == [
        ("mine", "mine reason", True), ("x", "a1: x reason", True), ("y", "a1: y reason", False)]
    again = sd.peer_reasons(REPLICA, dict(hv, a1={"__sglang_server_node_reasons": None}), "a2", [])
    assert [r["reason"] for r in again] == ["a0: mine reason"]


def test_the_nodes_behind_a_barrier():
    hv = {"a0": {"__sglang_server_passed": "deploy: started"}, "a1": {"__sglang_server_passed": "deploy: ready"},
          "a2": {}}
    assert sd.behind(REPLICA, hv, "a0", "deploy: started") == ["a1", "a2"]
    assert sd.behind(REPLICA, hv, "a1", "deploy: ready") == ["a0", "a2"]
    assert sd.behind(REPLICA, hv, "a2", "deploy: started") == ["a1"]  # only the others: this node fails itself


def test_a_replica_rolls_back_once_any_node_stopped():
    hv = {"a0": {"__sglang_server_failure": {"stopped": False}}, "a1": {},
          "a2": {"__sglang_server_failure": {"task": "t", "msg": "", "stopped": True}}}
    assert sd.rolls_back(REPLICA, hv) is True
    hv["a2"]["__sglang_server_failure"]["stopped"] = False
    assert sd.rolls_back(REPLICA, hv) is False


def test_the_nodes_that_would_launch_another_server():
    args = dict(tp_size=8, node_rank=0, host="10.0.0.1")
    hv = {"a0": {"__sglang_server_effective_args": args},
          "a1": {"__sglang_server_effective_args": dict(args, node_rank=1, host="10.0.0.2")},
          "a2": {"__sglang_server_effective_args": dict(args, tp_size=4)}}
    assert sd.differ(REPLICA, hv, "a0", args) == ["a2"]
    del hv["a2"]["__sglang_server_effective_args"]  # not read yet: the node's own preflight judges it
    assert sd.differ(REPLICA, hv, "a1", dict(args, node_rank=1, host="10.0.0.2")) == []


# the gates

def test_the_gate_selects_by_minor_without_a_count():
    settings = dict(minors=[0, 1], gpu_info_root="/proc/driver/nvidia/gpus", gpus=[3], expected_count=0)
    gate = sd.gate_selector(settings)
    assert gate == {"minors": [0, 1], "gpu_info_root": "/proc/driver/nvidia/gpus", "gpus": [], "expected_count": None}
    assert sd.gate_count(gate) == 2


def test_the_gate_selects_by_index_or_every_gpu_with_a_count():
    gate = sd.gate_selector(dict(minors=None, gpu_info_root="/r", gpus=[2, 3], expected_count="8"))
    assert gate == {"minors": [], "gpu_info_root": "/r", "gpus": [2, 3], "expected_count": 8}
    assert sd.gate_count(gate) == 2
    gate = sd.gate_selector(dict(minors=[], gpu_info_root="/r", gpus=None, expected_count=8))
    assert gate["gpus"] == [] and sd.gate_count(gate) == 8


def test_a_gate_of_every_gpu_without_a_count_expects_none():
    gate = sd.gate_selector(dict(minors=[], gpu_info_root="/r", gpus=[], expected_count=None))
    assert gate["expected_count"] is None and sd.gate_count(gate) is None
    assert sd.gate_selector(dict(minors=[], gpu_info_root="/r", gpus=[], expected_count=1))["expected_count"] == 1


# validation

def validated(said, **context):
    return sd.validation({"stdout": json.dumps(said)}, dict(dict(vmid=101, record="/var/cache/r.json"), **context))


def test_a_host_the_container_cannot_bind_is_refused_first():
    said = dict(ok=False, error="ignored", listen=dict(ok=False, host="192.0.2.1", error="cannot bind 192.0.2.1"))
    msg = ("sglang_server_args.host is '192.0.2.1', and the server cannot listen there: cannot bind 192.0.2.1 (a TCP "
           "socket on port 0, in container 101). SGLang accepts the address and then hangs at start rather than fail. "
           "Set host in sglang_server_args to an address of this container (`ip -brief address` there), 0.0.0.0 for "
           "every IPv4 address, or leave it out (SGLang's default 127.0.0.1; behind a gateway, the address the gateway "
           "reaches).")
    assert validated(said) == {"ok": False, "msg": msg + " Nothing was written or stopped: the server runs as before."}
    assert validated(said, rollback=True) == {"ok": False, "msg": msg}


def test_a_draft_that_does_not_fit_its_algorithm_is_refused_before_sglangs_verdict():
    # SGLang 0.5.23 accepts EAGLE with an EAGLE-3 head and serves it at accept length 1.00
    said = dict(ok=True, sglang_version="0.5.23", listen=dict(ok=True),
                draft=dict(ok=False, error="speculative_algorithm EAGLE cannot use the draft LlamaForCausalLMEagle3"))
    assert validated(said) == {"ok": False, "msg": (
        "speculative_algorithm EAGLE cannot use the draft LlamaForCausalLMEagle3 (sglang_server_args). Nothing was "
        "written or stopped: the server runs as before.")}
    assert validated(said, rollback=True)["msg"].endswith("(sglang_server_args).")
    assert validated(dict(said, draft=dict(ok=True)))["ok"] is True


def test_arguments_sglang_rejects():
    said = dict(ok=False, sglang_version="0.5.23", error="speculative_algorithm is 'EAGLE9'", listen=dict(ok=True))
    assert validated(said) == {"ok": False, "msg": (
        "SGLang 0.5.23 rejected the launch arguments (sglang_server_args over sglang_server_base_args; a field's name "
        "there is SGLang's, as in this message): speculative_algorithm is 'EAGLE9'. Nothing was written or stopped: "
        "the server runs as before.")}
    said = dict(ok=False, error="model_path /m has no config.json")
    assert validated(said, rollback=True)["msg"] == (
        "SGLang ? rejected the launch arguments (sglang_server_args over sglang_server_base_args; a field's name "
        "there is SGLang's, as in this message): model_path /m has no config.json (the model check: "
        "sglang_server_check_model).")
    assert validated(dict(ok=False, error="the model_path x"), rollback=True)["msg"].endswith(": the model_path x.")
    assert validated(dict(ok=False), rollback=True)["msg"].endswith("as in this message): .")
    assert sd.validation({"stdout": ""}, {"vmid": 1, "rollback": True})["ok"] is False


def test_accepted_arguments_say_what_was_checked():
    said = dict(ok=True, sglang_version="0.5.23", checks=["parser", "names"], listen=dict(ok=True, host="0.0.0.0"),
                warnings=["w1", "w2"], record="recorded", cached_since="2026-12-04T13:09:16")
    assert validated(said) == {"ok": True, "msg": (
        "SGLang 0.5.23 accepts the arguments: arguments unchanged since 2026-12-04T13:09:16, when every check passed "
        "(the record /var/cache/r.json), so SGLang was not imported (checked: parser, names); it can listen on 0.0.0.0 "
        "here (warnings: w1; w2); recorded")}
    assert validated(dict(ok=True, sglang_version="0.5.23", checks=[], warnings=[])) == {
        "ok": True, "msg": "SGLang 0.5.23 accepts the arguments (checked: )"}


# the preflight's rules

ARGS = dict(model_path="/m", speculative_draft_model_path="/d", speculative_algorithm="EAGLE3", port=30000,
            tp_size=8, speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, host="0.0.0.0")
ONE = dict(name="ct101", nnodes=1, multinode=False, rank=0, rank0="ct101", nodes=[dict(host="ct101")])
INVENTORY = dict(host="ct101", args=dict(model_path="/m"), port=30000, gpu_count=8, replica=ONE,
                 entrypoint=["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"], pve_host="lab-pve",
                 vmid=101, hosts=["lab-pve", "ct101", "gw"], gateway_worker_url="", gateway_host="gw",
                 gateway_keep_healthy=1, hostvars={})


def problems(effective=None, **inventory):
    return sd.launch_problems(dict(ARGS, **(effective or {})), dict(INVENTORY, **inventory))


def test_good_launch_settings_have_no_problem():
    assert problems() == []
    assert problems(dict(speculative_algorithm=None, speculative_draft_model_path=None, speculative_num_steps=None,
                         speculative_eagle_topk=None, speculative_num_draft_tokens=None)) == []


def test_the_multinode_flags_come_from_the_inventory():
    assert problems(args={"nnodes": 2, "nccl_init_addr": "x", "model_path": "/m"}) == [
        "sglang_server_args sets nnodes, nccl_init_addr: leave them out. The role derives --nnodes, --node-rank and "
        "--dist-init-addr from the inventory (sglang_server_replica, sglang_server_nnodes, sglang_server_node_rank, "
        "rank 0's sglang_server_node_address and sglang_server_dist_init_port), the same way on every node."]
    assert problems(args=None) == []


def test_the_port_is_gpuserve_port():
    msg = ("The launch settings say port %s but gpuserve_port is 30000: set the port once, as gpuserve_port in the "
           "inventory, and leave port out of sglang_server_args.")
    assert problems(dict(port=31000)) == [msg % 31000]
    assert problems(dict(port="30000")) == []
    args = dict(ARGS)
    del args["port"]
    assert sd.launch_problems(args, INVENTORY) == [msg % "(none)"]


def test_the_three_speculative_settings_go_together():
    assert problems(dict(speculative_eagle_topk=None, speculative_num_draft_tokens=None)) == [
        "speculative_num_steps, speculative_eagle_topk and speculative_num_draft_tokens go together: set all three or "
        "none (null) in sglang_server_args; only speculative_num_steps set."]
    assert problems(dict(speculative_num_draft_tokens=None))[0].endswith(
        "only speculative_num_steps, speculative_eagle_topk set.")


def test_a_chain_drafts_one_token_more_than_its_steps():
    assert problems(dict(speculative_num_draft_tokens=3)) == [
        "speculative_eagle_topk is 1 (a chain), so speculative_num_draft_tokens must be speculative_num_steps + 1 = 4; "
        "it is 3."]
    assert problems(dict(speculative_eagle_topk=2, speculative_num_draft_tokens=8)) == []
    # what is not a number counts as 0, as Jinja's int filter reads it
    chain = dict(speculative_num_steps="x", speculative_num_draft_tokens=1)
    assert [p for p in problems(chain) if "a chain" in p] == []


def test_eagle_needs_a_draft_model():
    msg = ("speculative_algorithm is %s: set speculative_draft_model_path in sglang_server_args (the EAGLE-3 draft "
           "head's directory).")
    assert problems(dict(speculative_draft_model_path="")) == [msg % "EAGLE3"]
    assert problems(dict(speculative_algorithm="eagle", speculative_draft_model_path=None)) == [msg % "eagle"]
    assert problems(dict(speculative_algorithm="NGRAM", speculative_draft_model_path=None)) == []


def test_the_model_path_is_set():
    msg = ["Set model_path in sglang_server_args (the directory holding the model weights)."]
    assert problems(dict(model_path="")) == msg
    assert problems(dict(model_path=7)) == msg
    assert problems(dict(model_path="m")) == []


def test_tensor_parallelism_covers_the_gpus():
    assert problems(dict(tp_size=4)) == [
        "tp_size 4 x pp_size 1 does not use the 8 GPUs this container expects (sglang_server_gpu_count): change one "
        "of them."]
    assert problems(dict(tp_size=4, pp_size=2)) == []
    args = dict(ARGS)
    del args["tp_size"]
    assert sd.launch_problems(args, dict(INVENTORY, gpu_count=1)) == []
    two = dict(ONE, nnodes=2, multinode=True, nodes=[dict(host="ct101")])  # its other node not read yet
    assert problems(dict(tp_size=8), replica=two) == [
        "tp_size 8 x pp_size 1 does not use the 8 GPUs this container expects (sglang_server_gpu_count) on each of "
        "the 2 nodes of its replica, 16 in all: change one of them."]


def test_the_entrypoint_is_plain_words():
    assert problems(entrypoint=["/usr/bin/python3", "-m", "x y", "$HOME"]) == [
        "sglang_server_entrypoint items may hold only letters, digits and _./:=@+,- (systemd would split or expand "
        "anything else): ['x y', '$HOME']."]
    assert problems(entrypoint=["a-Z_0./:=@+,"]) == []


def test_the_pve_host_and_vmid_are_known():
    msg = ["Set gpuserve_pve_host (the inventory name of the PVE host) and proxmox_vmid for ct101: GPU release and "
           "the memory gate run on the host, scoped to this container."]
    assert problems(pve_host=None) == msg
    assert problems(pve_host="elsewhere") == msg
    assert problems(vmid=None) == msg


def test_only_rank_0_of_a_replica_registers_with_the_gateway():
    rank1 = dict(REPLICA, nnodes=1, multinode=False, rank=1, rank0="a0", name="big")
    assert problems(gateway_worker_url="http://10.0.0.2:30000", replica=rank1, host="a1") == [
        "a1 is node rank 1 of replica big: it serves no API (SGLang runs the HTTP server on rank 0 only; the other "
        "nodes answer a dummy /health), so the gateway cannot route to it. Set sglang_server_gateway_worker_url on "
        "rank 0 (a0) only."]


GATEWAY = ("sglang_server_gateway_worker_url is %s: it must be http(s)://ADDRESS:30000 (gpuserve_port), the address "
           "at which the gateway reaches this server; the gateway's inventory host (sglang_server_gateway_host, "
           "default: the first of group sglang_gateway) must be known (it is '%s'); the server must listen there, not "
           "only on loopback (set host in sglang_server_args to that address or 0.0.0.0; it is %s); "
           "sglang_server_gateway_keep_healthy is 0 or more.")


@pytest.mark.parametrize("url, args, inventory, bad", [
    ("http://10.0.0.1:30000", {}, {}, False),
    ("https://10.0.0.1:30000/", {}, {}, False),
    ("http://127.0.0.1:30000", {"host": "127.0.0.1"}, {}, False),
    ("http://localhost:30000", {"host": None}, {}, False),
    ("http://10.0.0.1:30000", {}, {"gateway_keep_healthy": 0}, False),
    ("ftp://10.0.0.1:30000", {}, {}, True),
    ("http://10.0.0.1:31000", {}, {}, True),
    ("http://10.0.0.1", {}, {}, True),
    ("http://10.0.0.1:99999", {}, {}, True),
    ("http://10.0.0.1:30000", {}, {"gateway_host": "nowhere"}, True),
    ("http://10.0.0.1:30000", {}, {"gateway_host": ""}, True),
    ("http://10.0.0.1:30000", {"host": "127.0.0.1"}, {}, True),
    ("http://10.0.0.1:30000", {"host": "::1"}, {}, True),
    ("http://10.0.0.1:30000", {"host": "localhost"}, {}, True),
    ("http://10.0.0.1:30000", {}, {"gateway_keep_healthy": -1}, True),
    ("http://10.0.0.1:30000", {}, {"gateway_keep_healthy": "many"}, True),
])
def test_the_gateway_reaches_the_server(url, args, inventory, bad):
    got = problems(args, gateway_worker_url=url, **inventory)
    bind = args.get("host", "0.0.0.0") or "127.0.0.1"
    assert got == ([GATEWAY % (url, inventory.get("gateway_host", "gw"), bind)] if bad else [])


def test_the_nodes_of_a_replica_launch_the_same_server():
    two = dict(name="big", nnodes=2, multinode=True, rank=0, rank0="a0", nodes=[dict(host="a0"), dict(host="a1")])
    args = dict(ARGS, tp_size=16)
    hv = {"a0": {"__sglang_server_effective_args": args},
          "a1": {"__sglang_server_effective_args": dict(args, tp_size=8)}}
    assert problems(args, replica=two, host="a0", hostvars=hv) == [
        "a0 and a1 of replica big would launch different servers: every node needs the same settings "
        "(sglang_server_args, gpuserve_gpu_count, ...) except host; here: %s." % json.dumps(args, sort_keys=True)]
    hv["a1"]["__sglang_server_effective_args"] = dict(args, host="10.0.0.9")
    assert problems(args, replica=two, host="a0", hostvars=hv) == []
    three = dict(two, nnodes=3, nodes=two["nodes"] + [dict(host="a2")])
    other = {"__sglang_server_effective_args": dict(args, tp_size=4)}
    got = problems(dict(args, tp_size=24), replica=three, host="a0", hostvars={"a0": {}, "a1": other, "a2": other})
    assert got == ["a0 and a1, a2 of replica big would launch different servers: every node needs the same settings "
                   "(sglang_server_args, gpuserve_gpu_count, ...) except host; here: %s."
                   % json.dumps(dict(args, tp_size=24), sort_keys=True)]


BOUNDS = dict(listen_timeout=1800, ready_timeout=1800, lock_ttl=6000, stop_drain_timeout=30, release_grace=15,
              gate_timeout=120, unit_gate_timeout=120, nnodes=1, dist_init_port=20000, port=30000)


def test_settings_that_bound_each_other_agree():
    assert sd.bound_problems(BOUNDS) == []


def test_the_port_wait_fits_in_the_readiness_wait():
    assert sd.bound_problems(dict(BOUNDS, listen_timeout="30", ready_timeout=10)) == [
        "sglang_server_listen_timeout (30 s) is longer than sglang_server_ready_timeout (10 s), inside which the port "
        "is waited for, so it would never end the wait: lower it, or raise the ready timeout."]
    assert sd.bound_problems(dict(BOUNDS, listen_timeout=10, ready_timeout=10)) == []


def test_the_lock_outlasts_one_lifecycle():
    # the unit's stop timeout (30 + 80) + 14.5 + 120 + 120 + 1800, rounded up
    assert sd.bound_problems(dict(BOUNDS, lock_ttl=2164, release_grace=14.5)) == [
        "sglang_server_lock_ttl (2164 s) is shorter than one restart can take (2165 s: the unit's stop timeout, "
        "sglang_server_stop_drain_timeout + 80 s, + sglang_server_release_grace + sglang_server_gate_timeout + "
        "sglang_server_unit_gate_timeout + sglang_server_ready_timeout), so the lock could end while this run still "
        "restarts the server and let another run in. Raise it, or leave it unset (its default is twice that plus "
        "1200 s)."]
    assert sd.bound_problems(dict(BOUNDS, lock_ttl=2165, release_grace=14.5)) == []


def test_the_units_stop_timeout_covers_sglangs_own_shutdown_after_the_drain():
    # SGLang's watchdog poll 5 s + the drain + 15 s for the schedulers + 60 s reap (tokenizer_manager.sigterm_watchdog)
    assert sd.unit_stop_timeout(30) == 110
    assert sd.unit_stop_timeout("0") == 80
    assert sd.unit_stop_timeout(2.5) == 83


def test_a_multinode_rank_0_needs_two_ports():
    msg = ["sglang_server_dist_init_port and gpuserve_port are both 30000: rank 0 serves SGLang's API on gpuserve_port "
           "and torch.distributed's rendezvous (--dist-init-addr) on sglang_server_dist_init_port, so they must "
           "differ."]
    assert sd.bound_problems(dict(BOUNDS, nnodes=2, dist_init_port="30000")) == msg
    assert sd.bound_problems(dict(BOUNDS, nnodes=1, dist_init_port=30000)) == []


def test_the_filters():
    assert sorted(sd.FilterModule().filters()) == sorted([
        "sglang_drift", "sglang_reasons", "sglang_decision", "sglang_verification", "sglang_state", "sglang_failure", "sglang_listen", "sglang_peer_reasons",
        "sglang_replica_behind", "sglang_replica_rolls_back", "sglang_validation",
        "sglang_launch_problems", "sglang_bound_problems", "sglang_gate_selector", "sglang_gate_count",
        "sglang_unit_stop_timeout", "sglang_stop_refusals", "sglang_env_proof_said"])
    assert sd.FilterModule().filters()["sglang_drift"] is sd.drift


# sglang_stop_refusals: why the lifecycle must not stop the server (lifecycle_before_stop.yml)
def df(free):
    return {'stdout': 'Avail\n%s' % free, 'stdout_lines': ['Avail', free], 'rc': 0}


def refusals(**facts):
    return sd.FilterModule().filters()['sglang_stop_refusals'](dict({'min_free_mib': 256, 'dir': '/var/lib/gpuserve'}, **facts))


def test_stop_refusals_none_with_room_and_healthy_gpus():
    assert refusals(room=df('  300'), health={'passed': True, 'refused': [], 'msg': ''}) == []
    assert refusals(room={'skipped': True, 'changed': False}, health=None) == []  # the room check is off (0 MiB)


def test_stop_refusals_too_little_room_names_the_directory_and_the_need():
    assert refusals(room=df('255')) == [
        'not restarting: /var/lib/gpuserve has 255 MiB free, and the manifest, its history and the last verified config, '
        'written after the new server is verified, need at least 256 MiB (sglang_server_min_free_mib). Nothing was '
        'stopped: the server runs as before. Free space there, then run again.']


def test_stop_refusals_an_unreadable_df_answer_is_too_little_room():
    (found,) = refusals(room={'stdout': 'df: oops', 'stdout_lines': ['df: oops']})
    assert found.startswith('not restarting: /var/lib/gpuserve has an unknown amount of (df said: df: oops) MiB free')


def test_stop_refusals_gpus_that_cannot_serve_say_why_or_that_the_read_failed():
    assert refusals(health={'passed': False, 'msg': 'GPU health: not starting on a GPU that cannot serve: GPU 0'}) == [
        'not restarting: GPU health: not starting on a GPU that cannot serve: GPU 0. Nothing was stopped: the server '
        'runs as before. Fix the GPU (or set the check in sglang_server_gate_health to warn or ignore), then run again.']
    assert refusals(health={'passed': False, 'msg': ''})[0].startswith('not restarting: the health read failed. ')


def test_stop_refusals_both_at_once():
    assert len(refusals(room=df('1'), health={'passed': False, 'msg': 'x'})) == 2


# sglang_env_proof_said: the lifecycle's env proof assert (env_proof.yml)
def test_env_proof_said_counts_what_passed():
    proof = {'ok': True, 'schedulers': 2, 'processes': [{'ok': True}, {'ok': True}, {'ok': True}]}
    assert sd.env_proof_said(proof, 'sglang.service', 5) == {
        'ok': True, 'msg': '3 processes (2 schedulers) carry all 5 variables'}


def test_env_proof_said_names_the_unit_the_error_the_hint_and_the_first_mismatches():
    proof = {'ok': False, 'error': '1 of 2 processes lack the expected environment: PIDs [1805]', 'hint': 'Restart it.',
             'processes': [{'ok': True}, {'ok': False, 'mismatched': {'NCCL_PROTO': {'want': 'LL', 'got': None}}}]}
    assert sd.env_proof_said(proof, 'sglang.service', 5) == {'ok': False, 'msg': (
        "Environment proof failed for sglang.service: 1 of 2 processes lack the expected environment: PIDs [1805]. "
        "Restart it. Mismatches: {'NCCL_PROTO': {'want': 'LL', 'got': None}}")}


def test_env_proof_said_without_processes_or_hint():
    said = sd.env_proof_said({'ok': False, 'error': 'no process in the unit', 'processes': []}, 'sglang.service', 5)
    assert said == {'ok': False, 'msg': 'Environment proof failed for sglang.service: no process in the unit. Mismatches: {}'}
