"""gpuserve-sglang stop (plugins/module_utils/_helper_stop.py): the load read from /v1/loads (parse_loads on a real
H200 server's answer, read_loads against a local HTTP server), the decision for each load (Stop with a scripted unit, load
and clock), the systemctl argv, and the command line."""
import http.server
import json
import os
import socket
import threading

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_stop
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    ROOT, completed, fake_commands, run_json, run_kwargs)

LOADS = os.path.join(ROOT, "tests", "fixtures", "sglang-0.5.23-h200-helper", "v1_loads.json")
SOURCE = "GET http://127.0.0.1:30000/v1/loads?include=core"


def real_loads():
    with open(LOADS, encoding="utf-8") as handle:
        return json.load(handle)


# ------------------------------------------------------------------------------------------------------ the load

def test_parse_loads_reads_the_real_answer():
    assert _helper_stop.parse_loads(real_loads()) == (0, 0)


def test_parse_loads_sums_running_and_waiting_over_the_dp_ranks():
    body = real_loads()
    one = dict(body["loads"][0], num_running_reqs=3, num_waiting_reqs=1)
    body["loads"] = [one, dict(one, dp_rank=1, num_running_reqs=2, num_waiting_reqs=0)]
    assert _helper_stop.parse_loads(body) == (5, 1)


@pytest.mark.parametrize("body, error", [
    ({"loads": []}, "no `loads` list"),
    ({"detail": "Not Found"}, "no `loads` list"),
    ([], "no `loads` list"),
    ({"loads": [{"dp_rank": 0, "num_running_reqs": 0}]}, "without num_running_reqs and num_waiting_reqs"),
])
def test_parse_loads_refuses_an_answer_without_the_counts(body, error):
    with pytest.raises(ValueError, match=error):
        _helper_stop.parse_loads(body)


@pytest.fixture
def http_server():
    """http_server(status, body): a local server answering every GET; yields its URL."""
    servers = []

    def make(status, body):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return "http://127.0.0.1:%d%s" % (server.server_port, _helper_stop.LOADS_PATH)
    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def test_read_loads_counts_what_is_in_flight(http_server):
    body = real_loads()
    body["loads"][0].update(num_running_reqs=2, num_waiting_reqs=1)
    assert _helper_stop.read_loads(http_server(200, body)) == {"in_flight": 3, "running": 2, "waiting": 1}


def test_read_loads_says_when_nothing_listens():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert _helper_stop.read_loads("http://127.0.0.1:%d/v1/loads" % port) == {
        "listening": False, "error": "connection refused"}


@pytest.mark.parametrize("status, body, error", [
    (404, {"detail": "Not Found"}, "HTTP 404"),
    (200, b"<html>", "Expecting value"),
    (200, {"detail": "other"}, "no `loads` list"),
])
def test_read_loads_reports_an_answer_that_is_no_load(http_server, status, body, error):
    answer = _helper_stop.read_loads(http_server(status, body))
    assert set(answer) == {"error"} and error in answer["error"]


# ----------------------------------------------------------------------------------------------------- the decision

class Clock:
    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(round(seconds, 3))
        self.now += seconds


class FakeUnit:
    """A unit whose state follows the signals: SIGKILL to the group stops it (failed) after `kill_takes` s;
    `states` forces the answers of the first state reads."""

    name = "sglang.service"

    def __init__(self, clock, state="active", kill_takes=0.0, kill_error=None, stuck=False):
        self.clock, self.current, self.kill_takes = clock, state, kill_takes
        self.kill_error, self.stuck = kill_error, stuck
        self.calls, self.stopped_at = [], None

    def state(self):
        if self.stopped_at is not None and self.clock() >= self.stopped_at and not self.stuck:
            self.current = "failed"
        return self.current, 4242 if self.current not in _helper_stop.STOPPED else 0

    def kill(self, signal, main_only=False):
        self.calls.append(("kill", signal, "main" if main_only else "all"))
        if self.kill_error:
            return self.kill_error
        if signal == "SIGKILL":
            self.current = "deactivating" if self.kill_takes or self.stuck else "failed"
            self.stopped_at = self.clock() + self.kill_takes
        return None

    def stop(self):
        self.calls.append(("stop",))
        self.current = "inactive"
        return None

    def reset_failed(self):
        self.calls.append(("reset-failed",))
        self.current, self.stopped_at = "inactive", None


def loads(*answers, clock=None, cost=0.0):
    """read(): the answers in turn (an int is that many requests in flight), the last one repeated."""
    seen = []

    def read():
        seen.append(clock() if clock else None)
        if clock:
            clock.now += cost
        answer = answers[min(len(seen), len(answers)) - 1]
        return {"in_flight": answer, "running": answer, "waiting": 0} if isinstance(answer, int) else dict(answer)
    read.seen = seen
    return read


def stop(unit, read, clock, drain=30.0, **kwargs):
    return _helper_stop.Stop(unit, read, SOURCE, drain, clock=clock, sleep=clock.sleep,
                             wall=lambda: clock() + 1.7e9, **kwargs).run()


def test_an_idle_server_gets_sigkill_to_its_whole_group_at_once():
    clock = Clock()
    unit = FakeUnit(clock, kill_takes=0.1)
    read = loads(0)
    rc, answer = stop(unit, read, clock)
    assert rc == 0 and answer["how"] == "idle"
    assert unit.calls == [("kill", "SIGKILL", "all"), ("reset-failed",)]  # no SIGTERM, so no 5 s watchdog poll
    assert answer["load"] == {"in_flight": 0, "running": 0, "waiting": 0, "source": SOURCE}
    assert answer["unit_before"] == "active" and answer["main_pid"] == 4242 and answer["unit_after"] == "inactive"
    assert answer["signal_epoch"] == 1.7e9 + 100.05  # the wall clock of the SIGKILL, for an outside observer
    assert answer["stop_s"] == pytest.approx(0.1, abs=0.021) and answer["signals"] == [
        {"at_s": 0.05, "signal": "SIGKILL", "to": "control group", "error": None}]
    assert answer["msg"] == ("sglang.service: nothing in flight (%s: 0 running, 0 waiting): SIGKILL to the control "
                             "group (stopped in %.2f s)" % (SOURCE, answer["stop_s"]))


def test_idle_is_read_twice_a_settle_apart_so_a_response_being_written_finishes():
    clock = Clock()
    read = loads(0, clock=clock)
    stop(FakeUnit(clock), read, clock)
    assert read.seen == [100.0, 100.0 + _helper_stop.SETTLE_S]


def test_a_request_arriving_between_the_two_idle_reads_is_drained():
    clock = Clock()
    unit = FakeUnit(clock)
    rc, answer = stop(unit, loads(0, 1, 1, 0, 0), clock)
    assert rc == 0 and answer["how"] == "drained"
    assert unit.calls[0] == ("kill", "SIGTERM", "main") and answer["drain"]["in_flight_at_sigterm"] == 1


def test_nothing_listening_means_nothing_in_flight():
    clock = Clock()
    unit = FakeUnit(clock)
    rc, answer = stop(unit, loads({"listening": False, "error": "connection refused"}), clock)
    assert rc == 0 and answer["how"] == "idle" and unit.calls[0] == ("kill", "SIGKILL", "all")
    assert "nothing listens (%s: connection refused): no request can be in flight" % SOURCE in answer["msg"]


def test_requests_in_flight_drain_with_sigterm_to_the_main_process_only_then_sigkill():
    clock = Clock()
    unit = FakeUnit(clock)
    # 2 in flight; still 1 after two polls; then idle twice
    rc, answer = stop(unit, loads(2, 1, 1, 0, 0), clock, drain=30)
    assert rc == 0 and answer["how"] == "drained"
    assert unit.calls == [("kill", "SIGTERM", "main"), ("kill", "SIGKILL", "all"), ("reset-failed",)]
    assert clock.sleeps == [0.2, 0.2, 0.2, _helper_stop.SETTLE_S]
    assert answer["drain"] == {"bound_s": 30.0, "in_flight_at_sigterm": 2, "waited_s": 0.65, "cut": 0}
    assert [s["signal"] for s in answer["signals"]] == ["SIGTERM", "SIGKILL"]
    assert "2 request(s) in flight: SIGTERM to the main process, drained in 0.65 s" in answer["msg"]


def test_at_the_drain_bound_the_stop_cuts_and_says_how_many_and_for_how_long():
    clock = Clock()
    unit = FakeUnit(clock)
    rc, answer = stop(unit, loads(3, 2), clock, drain=1.0)
    assert rc == 0 and answer["how"] == "cut"
    assert unit.calls == [("kill", "SIGTERM", "main"), ("kill", "SIGKILL", "all"), ("reset-failed",)]
    assert answer["drain"] == {"bound_s": 1.0, "in_flight_at_sigterm": 3, "waited_s": 1.0, "cut": 2}
    assert ("3 request(s) in flight: SIGTERM to the main process; at the drain bound (1 s) 2 were still running or "
            "queued and are cut (any of them in flight at the SIGTERM had run 1.0 s or more)") in answer["msg"]


def test_a_drain_bound_of_zero_cuts_at_once():
    clock = Clock()
    rc, answer = stop(FakeUnit(clock), loads(1), clock, drain=0)
    assert answer["how"] == "cut" and answer["drain"]["cut"] == 1 and clock.sleeps == []


def test_a_server_that_exits_by_itself_during_the_drain_is_not_called_drained():
    # SGLang's own shutdown after its drain, or a crash: either way the port closes with the main process
    clock = Clock()
    unit = FakeUnit(clock)
    calls = []

    def read():
        calls.append(1)
        if len(calls) >= 3:
            unit.current = "inactive"
            return {"listening": False, "error": "connection refused"}
        return {"in_flight": 2, "running": 2, "waiting": 0}
    rc, answer = stop(unit, read, clock)
    assert rc == 0 and answer["how"] == "exited" and ("kill", "SIGKILL", "all") not in unit.calls
    assert answer["drain"]["in_flight_at_last_read"] == 2 and answer["drain"]["cut"] == 0
    assert "the server exited by itself 0.45 s later (2 in flight at the read before)" in answer["msg"]


def test_a_closed_port_with_the_unit_still_up_gets_sigkill_for_what_is_left():
    clock = Clock()
    unit = FakeUnit(clock)
    rc, answer = stop(unit, loads(1, 1, {"listening": False, "error": "connection refused"}), clock)
    assert rc == 0 and answer["how"] == "exited" and unit.calls[-2:] == [("kill", "SIGKILL", "all"),
                                                                         ("reset-failed",)]


def test_an_unreadable_load_with_something_listening_gets_the_units_own_stop():
    clock = Clock()
    unit = FakeUnit(clock)
    rc, answer = stop(unit, loads({"error": "HTTP 404"}), clock)
    assert rc == 0 and answer["how"] == "unit stop" and unit.calls == [("stop",)]
    assert answer["load"] == {"error": "HTTP 404", "source": SOURCE}
    assert "the load is unknown (%s: HTTP 404): the unit's own stop" % SOURCE in answer["msg"]


def test_no_drain_kills_at_once_without_reading_the_load():
    clock = Clock()
    unit = FakeUnit(clock)
    read = loads(5)
    rc, answer = stop(unit, read, clock, no_drain="rank 0 stopped")
    assert rc == 0 and answer["how"] == "no drain" and read.seen == []
    assert unit.calls[0] == ("kill", "SIGKILL", "all")
    assert answer["load"] == {"source": "rank 0 stopped", "in_flight": 0}


@pytest.mark.parametrize("state, calls", [("inactive", []), ("failed", [("reset-failed",)])])
def test_a_unit_that_is_not_running_is_left_alone_but_a_failed_one_is_reset(state, calls):
    clock = Clock()
    unit = FakeUnit(clock, state=state)
    rc, answer = stop(unit, loads(0), clock)
    assert rc == 0 and answer["how"] == "not running" and unit.calls == calls and answer["stop_s"] is None
    assert answer["msg"] == "sglang.service: it was %s: nothing to stop" % state


def test_an_unknown_unit_state_signals_nothing_and_fails():
    clock = Clock()
    unit = FakeUnit(clock, state="unknown")
    rc, answer = stop(unit, loads(0), clock)
    assert rc == 1 and unit.calls == [] and "nothing was signalled" in answer["msg"]
    assert answer["error"] == answer["msg"]  # what the rollback's message quotes (sglang_decisions.failure)


def test_a_failed_sigterm_fails_the_stop_with_the_server_running():
    clock = Clock()
    unit = FakeUnit(clock, kill_error="Failed to kill unit sglang.service: Access denied")
    rc, answer = stop(unit, loads(1), clock)
    assert rc == 1 and answer["how"] == "failed" and answer["unit_after"] == "active"
    assert "SIGTERM to the main process failed: Failed to kill unit" in answer["msg"]


def test_a_failed_sigkill_of_a_running_unit_fails_the_stop():
    clock = Clock()
    unit = FakeUnit(clock, kill_error="Access denied")
    rc, answer = stop(unit, loads(0), clock)
    assert rc == 1 and answer["how"] == "failed"
    assert "SIGKILL to the control group failed: Access denied" in answer["msg"]


def test_a_unit_still_deactivating_after_sigkill_is_reported_not_failed():
    clock = Clock()
    unit = FakeUnit(clock, stuck=True)
    rc, answer = stop(unit, loads(0), clock)
    assert rc == 0 and answer["unit_after"] == "deactivating"
    assert answer["stop_s"] == pytest.approx(_helper_stop.KILL_WAIT_S, abs=0.05)
    assert "still deactivating 10 s later (a process stuck in the driver?): gpu_release waits" in answer["msg"]


def test_a_unit_still_running_after_the_signals_fails_the_stop():
    clock = Clock()
    unit = FakeUnit(clock)
    unit.kill = lambda signal, main_only=False: unit.calls.append(("kill", signal)) or None  # signalled, nothing ends
    rc, answer = stop(unit, loads(0), clock)
    assert rc == 1 and answer["how"] == "failed" and answer["unit_after"] == "active"
    assert answer["error"].endswith("SIGKILL to the control group, but the unit is still active")


# ---------------------------------------------------------------------------------------------- systemctl, command

def test_unit_signals_through_systemctl_kill(monkeypatch):
    calls = []
    fake_commands(monkeypatch, calls, {"systemctl": completed()})
    unit = _helper_stop.Unit("sglang.service")
    assert unit.kill("SIGTERM", main_only=True) is None and unit.kill("SIGKILL") is None
    assert [call[0] for call in calls] == [
        ["systemctl", "kill", "--kill-who=main", "--signal=SIGTERM", "sglang.service"],
        ["systemctl", "kill", "--kill-who=all", "--signal=SIGKILL", "sglang.service"]]


def test_stop_command_reads_the_load_on_the_servers_port(monkeypatch, capsys):
    calls, urls = [], []
    states = iter(["ActiveState=active\nMainPID=77\n", "ActiveState=failed\nMainPID=0\n",
                   "ActiveState=failed\nMainPID=0\n", "ActiveState=inactive\nMainPID=0\n"])
    fake_commands(monkeypatch, calls, {"systemctl": lambda argv, **kw: completed(
        next(states) if argv[1] == "show" else "")})
    monkeypatch.setattr(_helper_stop, "read_loads", lambda url: urls.append(url) or {"in_flight": 0})
    monkeypatch.setattr(_helper_stop, "SETTLE_S", 0)
    rc, out, _err = run_json(monkeypatch, capsys, "stop", "--port", "30001", "--host", "::1", "--unit", "x.service")
    assert rc == 0 and out["how"] == "idle" and out["main_pid"] == 77 and out["unit_after"] == "inactive"
    assert urls == ["http://[::1]:30001/v1/loads?include=core"] * 2
    assert out["load"]["source"] == "GET http://[::1]:30001/v1/loads?include=core"
    assert [argv[1:3] for argv, kw in calls] == [["show", "x.service"], ["kill", "--kill-who=all"],
                                                 ["show", "x.service"], ["show", "x.service"],
                                                 ["reset-failed", "x.service"], ["show", "x.service"]]
    assert all(kw == run_kwargs() for _argv, kw in calls)


def test_stop_command_needs_a_port_or_no_drain(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exc:
        run_json(monkeypatch, capsys, "stop")
    assert exc.value.code == 2 and "--port is required (or --no-drain REASON)" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------- start

def start(monkeypatch, capsys, show, start_rc=0):
    calls = []

    def systemctl(argv, **kwargs):
        if argv[1] == "show":
            return completed(show.pop(0))
        if argv[1] == "start":
            return completed("", "" if start_rc == 0 else "Job for x.service failed.\n", start_rc)
        return completed()
    fake_commands(monkeypatch, calls, {"systemctl": systemctl})
    rc, out, _err = run_json(monkeypatch, capsys, "start", "--unit", "x.service")
    return rc, out, [argv[1] for argv, _kw in calls]


def test_start_reloads_only_when_systemd_needs_it(monkeypatch, capsys):
    rc, out, calls = start(monkeypatch, capsys, ["NeedDaemonReload=no\nLoadState=loaded\n",
                                                 "ActiveState=active\nMainPID=88\n"])
    assert rc == 0 and calls == ["show", "start", "show"]
    assert out["reloaded"] is False and out["active_state"] == "active" and out["main_pid"] == 88


@pytest.mark.parametrize("show", ["NeedDaemonReload=yes\nLoadState=loaded\n",  # the unit's file changed
                                  "NeedDaemonReload=no\nLoadState=not-found\n"])  # a new unit
def test_start_reloads_a_changed_or_new_unit_first(monkeypatch, capsys, show):
    rc, out, calls = start(monkeypatch, capsys, [show, "ActiveState=active\nMainPID=88\n"])
    assert rc == 0 and calls == ["show", "daemon-reload", "start", "show"] and out["reloaded"] is True


def test_a_failed_start_says_what_systemctl_said(monkeypatch, capsys):
    rc, out, _calls = start(monkeypatch, capsys, ["NeedDaemonReload=no\nLoadState=loaded\n",
                                                  "ActiveState=failed\nMainPID=0\n"], start_rc=1)
    assert rc == 1 and out["error"] == "systemctl start x.service failed (rc 1): Job for x.service failed."
