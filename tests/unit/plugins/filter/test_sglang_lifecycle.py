"""The sglang_server lifecycle's manifest and readiness-failure message (plugins/filter/sglang_lifecycle.py): every
field of the manifest from the facts the lifecycle gathers, the times it derives, what it leaves out; each kind of
readiness failure with the words the operator reads."""
import json

import pytest
from ansible.errors import AnsibleFilterError
from jinja2 import Environment

from ansible_collections.gpuserve.sglang.plugins.filter import sglang_lifecycle as sl

STATE = dict(helper_ok=True, commit="c" * 40, dirty=False, changes=[], git_error="", active=True, active_state="active",
             enabled=True, main_pid=4242, since="Fri 2026-12-04 13:09:25 UTC", args_sha1="a1", unit_sha1="u1",
             env_sha1="e1", env_file_exists=True, python_exists=True, manifest={},
             startup=dict(phases=[dict(phase="imports", s=13.836, **{"from": "exec"})], total_s=39.8),
             driver="580.159.04")
GATE = dict(backend="nvidia-smi", passed=True, polls=1, elapsed_s=0.0573, raw="0, GPU-..., 0, 143771\n", gpus=[])
RELEASE = dict(changed=True, killed=[dict(pid=230, signal="TERM")], timings=dict(term_s=0.5), kill_to_pass_s=0.7,
               gate=GATE, failed=False)
READY = dict(ready=True, unit="active", phase="HTTP 200", status=200, waited_s=0.0)
STOP = dict(unit="sglang.service", unit_before="active", main_pid=4000, how="idle", unit_after="inactive",
            load=dict(in_flight=0, running=0, waiting=0, source="GET http://127.0.0.1:30000/v1/loads?include=core"),
            signals=[dict(at_s=0.05, signal="SIGKILL", to="control group", error=None)], stop_s=0.08, elapsed_s=0.13,
            msg="sglang.service: nothing in flight (...): SIGKILL to the control group (stopped in 0.08 s)")


def facts(**kw):
    out = dict(service="sglang.service", host="ct101", phase="deploy", run=dict(host="laptop-1", pid=42),
               reasons=["args changed"], src="/opt/sglang/src", entrypoint=["/opt/sglang/venv/bin/python", "-m", "x"],
               env=dict(NCCL_PROTO="LL"), state=STATE,
               validation=dict(ok=True, argv=["--tp-size", "8"], sglang_version="0.5.23"),
               env_proof=dict(ok=True, processes=[{}, {}, {}], schedulers=2, control_group="/system.slice/sglang.service"),
               times=dict(begin=1000.0, begin_iso="2026-12-04T13:09:16.949389", stopping=1005.0, stopped=1005.5,
                          started=1008.25, ready=1011.5),
               done=1022.2055, release=RELEASE, stop=STOP,
               ready=dict(READY, generation=dict(text="Paris is the capital of France.",
                                                 meta_info=dict(completion_tokens=8))),
               replica=dict(name="ct101", nnodes=1, nodes=[dict(host="ct101", rank=0)]), node_rank="0",
               through="ct101")
    out.update(kw)
    return out


def test_the_manifest_records_every_fact_of_the_verified_start():
    m = sl.manifest(facts())
    assert m == {
        "schema": 1, "service": "sglang.service", "host": "ct101", "main_pid": 4242,
        "active_since": "Fri 2026-12-04 13:09:25 UTC", "phase": "deploy", "run": {"host": "laptop-1", "pid": 42},
        "reasons": ["args changed"],
        "sglang": {"commit": "c" * 40, "dirty": False, "changes": [], "version": "0.5.23", "src": "/opt/sglang/src"},
        "argv": ["--tp-size", "8"], "entrypoint": ["/opt/sglang/venv/bin/python", "-m", "x"],
        "env": {"NCCL_PROTO": "LL"},
        "env_proof": {"ok": True, "processes": 3, "schedulers": 2, "control_group": "/system.slice/sglang.service"},
        "files": {"args_sha1": "a1", "unit_sha1": "u1", "env_sha1": "e1"},
        "driver": "580.159.04",
        "times": {"begin": "2026-12-04T13:09:16.949389", "done": "1970-01-01T00:17:02.205500",
                  "started_epoch": 1008.25, "validate_and_stop_s": 5.5, "stop_s": 0.5, "release_and_gate_s": 2.75,
                  "start_to_ready_s": 3.25, "downtime_s": 6.5, "total_s": 22.206},
        "startup": STATE["startup"],
        "stop": {"how": "idle", "load": STOP["load"], "signals": STOP["signals"], "stop_s": 0.08, "msg": STOP["msg"]},
        "release": {"killed": [{"pid": 230, "signal": "TERM"}], "timings": {"term_s": 0.5}, "kill_to_pass_s": 0.7,
                    "gate_passed_epoch": None},
        "gate": {"backend": "nvidia-smi", "passed": True, "polls": 1, "elapsed_s": 0.0573, "gpus": []},
        "ready": READY,
        "generation": {"text": "Paris is the capital of France.", "meta": {"completion_tokens": 8}},
        "replica": {"name": "ct101", "nnodes": 1, "node_rank": 0, "nodes": ["ct101"], "through": "ct101"},
    }
    json.dumps(m)  # what to_nice_json writes


def test_one_nodes_stop_is_its_share_of_the_release_call():
    times = dict(begin=1000.0, begin_iso="x", stopping=1005.0, started=1008.25, ready=1011.5)
    release = dict(RELEASE, timings=dict(stop_s=0.25, term_s=0.5, gate_s=0.1, start_s=0.2))
    got = sl.manifest(facts(times=times, release=release))["times"]
    assert (got["stop_s"], got["validate_and_stop_s"], got["release_and_gate_s"], got["downtime_s"]) == (
        0.25, 5.25, 3.0, 6.5)


def test_times_take_epochs_as_text_too():
    times = dict(begin="1000.0", begin_iso="x", stopping="1005", stopped="1005.5", started="1008.25", ready="1011.5")
    assert sl.manifest(facts(times=times, done="1022.2055"))["times"]["total_s"] == 22.206


def test_the_defaults_of_an_older_caller():
    m = sl.manifest(facts(phase=None, run=None, reasons=None, release={}, ready=READY, stop=None))
    assert m["phase"] == "deploy" and m["run"] == {} and m["reasons"] == ["restart requested"]
    assert m["release"] == {"killed": [], "timings": {}, "kill_to_pass_s": None, "gate_passed_epoch": None}
    assert m["gate"] == {}
    assert m["generation"] == {"text": "", "meta": {}} and m["stop"] == {}


def test_a_multi_node_manifest_names_its_nodes_by_rank_and_rank_0_as_its_way_in():
    replica = dict(name="r1", nnodes=2, nodes=[dict(host="ct104", rank=0), dict(host="ct102", rank=1)])
    m = sl.manifest(facts(host="ct102", replica=replica, node_rank=1, through="ct104"))
    assert m["replica"] == {"name": "r1", "nnodes": 2, "node_rank": 1, "nodes": ["ct104", "ct102"], "through": "ct104"}


@pytest.mark.parametrize("bad, message", [
    ("not a dict", "expected a dict of the lifecycle facts, got str"),
    ({"service": "s"}, "missing host, state, validation, env_proof, times, done, release, ready, replica, "
                       "node_rank, through"),
])
def test_a_caller_without_the_facts_is_told_which(bad, message):
    with pytest.raises(AnsibleFilterError, match="sglang_manifest: " + message):
        sl.manifest(bad)


JINJA = Environment()


@pytest.mark.parametrize("length", [200, 300])
@pytest.mark.parametrize("text", ["", "short", "word " * 39 + "w", "word " * 40 + "wo", "x" * 206,
                                  "word " * 80, "a" * 199 + " b" * 10])
def test_truncate_is_jinjas(text, length):
    assert sl.truncate(text, length) == JINJA.from_string("{{ t | truncate(%d) }}" % length).render(t=text)


CONTEXT = dict(unit="sglang.service", vmid=101, pve_host="lab-pve", host="127.0.0.1", port=30000, ready_timeout=1800)
JOURNAL = "journalctl -u sglang.service in container 101"


def said(rc, phase="port closed"):
    return dict(rc=rc, stdout=json.dumps(dict(ready=False, phase=phase)) + "\n", stderr="")


@pytest.mark.parametrize("ready, ct, message", [
    (said(3, "HTTP 503"), {}, "not ready after 1800 s (sglang_server_ready_timeout): /health_generate on "
                              "127.0.0.1:30000 last: HTTP 503; the server's log: " + JOURNAL),
    (said(4, "sglang.service is failed"), {}, "the server stopped while starting (sglang.service is failed); why: "
                                              + JOURNAL),
    (said(6, "/generate failed: Remote end closed connection without response"), {},
     "the server is ready but its first generation failed: /generate failed: Remote end closed connection without "
     "response; why: " + JOURNAL),
    (said(5, "nothing listens on 127.0.0.1:30000 600 s after the server started (listen timeout 600 s)"), {},
     "the server runs but does not serve: nothing listens on 127.0.0.1:30000 600 s after the server started (listen "
     "timeout 600 s) (sglang_server_listen_timeout; SGLang listens once its model is loaded, so raise it if loading "
     "takes longer here); why: " + JOURNAL),
    (dict(rc=255, stdout="", msg="lxc-attach: 101: attach.c: failed"), dict(stdout="status: stopped\n"),
     "container 101 is not running (status: stopped on lab-pve): it was stopped during the readiness wait, so the "
     "check could not run (rc 255). Find out who stopped it; the next deploy (deploy_eagle3.yml) starts it again"),
    (dict(msg="Failed to connect to the host via ssh: " + "x" * 400), dict(stdout="", stderr="ssh: refused"),
     "the readiness check could not run in container 101 (rc ?: Failed to connect to the host via ssh:...); "
     "`pct status 101` on lab-pve said: ssh: refused"),
    (dict(rc=1, stdout="not json", stderr="Traceback"), {},
     "the readiness check could not run in container 101 (rc 1: Traceback); `pct status 101` on lab-pve said: "
     "(not asked)"),
    (dict(rc=3, stdout="{not json}"), {}, "not ready after 1800 s (sglang_server_ready_timeout): /health_generate on "
                                          "127.0.0.1:30000 last: ?; the server's log: " + JOURNAL),
])
def test_each_readiness_failure_says_what_happened_and_where_to_look(ready, ct, message):
    assert sl.ready_failure(ready, dict(CONTEXT, ct_status=ct)) == message


def test_a_running_container_is_no_ct_down():
    assert sl.ready_case(255, "status: running") == "no_check" and sl.ready_case(255, "status: stopped") == "ct_down"
    assert sl.ready_case(None, "") == "no_check"


def test_the_readiness_message_needs_the_registered_result_and_a_context():
    with pytest.raises(AnsibleFilterError, match="sglang_ready_failure: expected"):
        sl.ready_failure("rc 3", CONTEXT)


def test_registered_as_sglang_manifest_and_sglang_ready_failure():
    assert sl.FilterModule().filters() == {"sglang_manifest": sl.manifest, "sglang_ready_failure": sl.ready_failure}
