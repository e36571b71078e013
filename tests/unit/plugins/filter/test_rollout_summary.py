"""rollout_summary: when a rolling deploy stops, which replica runs which config (from the manifests)."""
import base64
import json

from ansible_collections.gpuserve.sglang.plugins.filter.rollout_summary import (FilterModule, read_manifest,
                                                                                rollout_summary, same_run)

RUN = {"host": "ctl", "boot_id": "b-1", "pid": 4242, "start_ticks": 99, "started": "2026-12-02T05:00:00Z"}
EARLIER = dict(RUN, pid=1717, start_ticks=12)


def manifest(args="a" * 40, commit="c" * 40, phase="deploy", done="2026-12-02T05:01:02.345678", run=None,
             dirty=False):
    m = {"phase": phase, "files": {"args_sha1": args}, "sglang": {"commit": commit, "dirty": dirty},
         "times": {"begin": "2026-12-02T05:00:50", "done": done}}
    if run is not None:
        m["run"] = run
    return m


def slurped(host, doc):
    return {"item": host, "content": base64.b64encode(json.dumps(doc).encode()).decode(), "encoding": "base64"}


def test_each_replica_is_said_with_what_it_serves_and_who_wrote_that():
    results = [
        slurped("ct101", manifest(args="1" * 40, run=RUN)),
        slurped("ct102", manifest(args="2" * 40, phase="rollback", run=RUN)),
        slurped("ct103", manifest(args="3" * 40, commit="d" * 40, run=EARLIER)),
    ]
    lines = rollout_summary(results, "ct102", RUN, {}, "done: the last verified\n  config is serving again")
    assert lines == [
        "ct101: updated in this run; serves args 1111111111, SGLang cccccccccccc (deploy, 2026-12-02T05:01:02)",
        "ct102: FAILED in this run; rollback: done: the last verified config is serving again; last manifest: "
        "args 2222222222, SGLang cccccccccccc (rollback, 2026-12-02T05:01:02), written by this run",
        "ct103: not reached (the rollout stopped first); args 3333333333, SGLang dddddddddddd (deploy, "
        "2026-12-02T05:01:02), written by an earlier run",
    ]


def test_a_replica_that_passed_with_nothing_to_restart_is_told_from_one_not_reached():
    results = [slurped("ct101", manifest(run=EARLIER)), slurped("ct102", manifest(run=EARLIER))]
    hostvars = {"ct101": {"__gpuserve_rollout_passed": True}, "ct102": {}}
    lines = rollout_summary(results, "ct103", RUN, hostvars)
    assert lines[0].startswith("ct101: passed in this run with nothing to restart; args aaaaaaaaaa")
    assert lines[1].startswith("ct102: not reached (the rollout stopped first); args aaaaaaaaaa")
    assert all(line.endswith("written by an earlier run") for line in lines)


def test_a_failure_before_the_stop_shows_the_old_manifest_and_no_rollback():
    lines = rollout_summary([slurped("ct101", manifest(run=EARLIER, dirty=True))], "ct101", RUN)
    assert lines == ["ct101: FAILED in this run; last manifest: args aaaaaaaaaa, SGLang cccccccccccc dirty "
                     "(deploy, 2026-12-02T05:01:02), written by an earlier run"]


def test_missing_unreadable_and_unreachable_manifests_are_named_not_guessed():
    results = [
        {"item": "ct101", "failed": True, "msg": "file not found: /var/lib/gpuserve/sglang-manifest.json"},
        {"item": "ct102", "failed": True, "msg": "permission denied"},
        {"item": "ct103", "unreachable": True, "msg": "CT 103 does not exist"},
        {"item": "ct106", "failed": True, "msg": "MODULE FAILURE\nSee stdout/stderr for the exact error",
         "module_stderr": "Configuration file 'nodes/lab-pve/lxc/106.conf'\n does not exist", "rc": 255},
        {"item": "ct104", "content": base64.b64encode(b"{half").decode()},
        {"item": "ct105", "content": base64.b64encode(b"[1]").decode()},
    ]
    lines = rollout_summary(results, "ct101", RUN)
    assert lines[0] == "ct101: FAILED in this run; last manifest: no manifest (never deployed)"
    assert lines[1] == ("ct102: not reached (the rollout stopped first); its manifest could not be read: "
                        "permission denied")
    assert lines[2].endswith("could not be read: unreachable: CT 103 does not exist")
    assert "could not be read: not JSON" in lines[4]
    assert lines[5].endswith("could not be read: not a JSON object")
    assert lines[3].endswith("could not be read: MODULE FAILURE: Configuration file 'nodes/lab-pve/lxc/106.conf' "
                             "does not exist")


def test_a_manifest_without_a_run_or_from_another_run_is_never_this_run():
    assert same_run(RUN, dict(RUN)) is True
    for other in (EARLIER, dict(RUN, boot_id="b-2"), dict(RUN, host="other"), {}, None, "x"):
        assert same_run(other, RUN) is False
    assert same_run({}, {}) is False  # two unknown runs are not the same run
    host, doc, error = read_manifest(slurped("ct101", manifest()))
    assert (host, error) == ("ct101", "") and "run" not in doc
    (line,) = rollout_summary([slurped("ct101", manifest())], "ct102", RUN)
    assert line.startswith("ct101: not reached")


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"rollout_summary": rollout_summary}


def test_the_other_node_of_a_multi_node_server_is_said_rolled_back_with_it():
    results = [slurped("ct101", manifest(args="1" * 40, phase="rollback", run=RUN)),
               slurped("ct102", manifest(args="2" * 40, phase="rollback", run=RUN))]
    lines = rollout_summary(results, "ct101", RUN, {}, "done: the last verified config is serving again")
    assert lines[1] == ("ct102: rolled back in this run; serves args 2222222222, SGLang cccccccccccc (rollback, "
                        "2026-12-02T05:01:02)")


REFUSED = {"passed": False, "msg": "GPU health: not starting on a GPU that cannot serve (at full speed): ...",
           "refused": [{"gpu": 3, "bus_id": "0000:02:09.0", "uuid": "GPU-x", "check": "xid", "action": "refuse",
                        "value": "1 Xid event(s)", "unknown": False, "message": "GPU 3 (bus 0000:02:09.0): xid: ..."},
                       {"gpu": None, "bus_id": None, "uuid": None, "check": "missing", "action": "refuse",
                        "value": "nvidia-smi lists 7 GPU(s), 8 expected", "unknown": False, "message": "host: ..."}]}


def test_a_replica_kept_from_its_restart_by_gpu_health_is_named_with_the_gpu_and_the_check():
    results = [slurped("ct101", manifest(args="1" * 40, run=RUN)), slurped("ct102", manifest(run=EARLIER))]
    lines = rollout_summary(results, "ct102", RUN, {}, "", REFUSED)
    assert lines[1] == (
        "ct102: FAILED in this run; not restarted, GPU health refused it before anything was stopped: GPU 3 (bus "
        "0000:02:09.0): xid, missing: nvidia-smi lists 7 GPU(s), 8 expected; last manifest: args aaaaaaaaaa, SGLang "
        "cccccccccccc (deploy, 2026-12-02T05:01:02), written by an earlier run")
    assert lines[0].startswith("ct101: updated in this run")  # another replica is not blamed


def test_a_health_read_that_failed_says_so_and_one_that_passed_adds_nothing():
    results = [slurped("ct102", manifest(run=EARLIER))]
    failed = {"passed": False, "refused": [], "msg": "nvidia-smi health query\n timed out"}
    (line,) = rollout_summary(results, "ct102", RUN, {}, "", failed)
    assert "not restarted, GPU health refused it before anything was stopped: the health read failed: nvidia-smi " \
           "health query timed out; last manifest" in line
    for health in ({"passed": True, "refused": [], "msg": ""}, {}, None):
        (line,) = rollout_summary(results, "ct102", RUN, {}, "", health)
        assert line.startswith("ct102: FAILED in this run; last manifest: ")
