"""gpuserve-sglang wait-ready (plugins/module_utils/_helper_ready.py), in-process: the unit's state, the probe and
the clock are replaced on the module (its `_unit_state`, `_probe`, `_main_started` and `time`), then those three
readers each against a faked systemctl, socket and urllib."""
import types
import urllib.error

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_ready
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    completed, fake_commands, run_json, run_kwargs)


class Clock:
    """time.monotonic / time.sleep: sleeping moves the clock."""

    def __init__(self, now=1000.0):
        self.now, self.sleeps = now, []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def server(monkeypatch):
    """server(states, answers, cost=0): the unit's successive states and the probe's successive answers
    (phase, status); the last of each repeats. Each probe takes `cost` seconds."""
    clock = Clock()
    seen = types.SimpleNamespace(clock=clock, units=[], probes=[])

    def make(states, answers, cost=0.0):
        def unit_state(unit):
            seen.units.append(unit)
            return states[min(len(seen.units), len(states)) - 1]

        def probe(host, port, path, timeout):
            seen.probes.append((host, port, path, timeout))
            clock.now += cost
            return answers[min(len(seen.probes), len(answers)) - 1]

        monkeypatch.setattr(_helper_ready, "time", clock)
        monkeypatch.setattr(_helper_ready, "_unit_state", unit_state)
        monkeypatch.setattr(_helper_ready, "_probe", probe)
        return seen
    return make


def wait_ready(monkeypatch, capsys, *args):
    rc, out, _err = run_json(monkeypatch, capsys, "wait-ready", *args)
    return rc, out


def test_wait_ready_returns_on_the_first_200(server, monkeypatch, capsys):
    seen = server(["activating", "reloading", "active"], [("port closed", None), ("HTTP 503", 503), ("HTTP 200", 200)],
                  cost=0.1234)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--host", "10.0.0.5", "--path", "/health",
                         "--request-timeout", "5", "--interval", "1.5", "--unit", "sglang@a.service")
    assert rc == 0
    assert out == {"ready": True, "unit": "active", "phase": "HTTP 200", "status": 200, "waited_s": 3.4}
    assert seen.probes == [("10.0.0.5", 30000, "/health", 5.0)] * 3 and seen.clock.sleeps == [1.5, 1.5]
    assert seen.units == ["sglang@a.service"] * 3


def test_wait_ready_defaults(server, monkeypatch, capsys):
    seen = server(["active"], [("HTTP 200", 200)], cost=0.06)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000")
    assert rc == 0 and out["waited_s"] == 0.1
    assert seen.probes == [("127.0.0.1", 30000, "/health_generate", 30)] and seen.units == ["sglang.service"]


def test_wait_ready_gives_up_before_the_budget_is_spent(server, monkeypatch, capsys):
    seen = server(["activating"], [("port closed", None), ("HTTP 503", 503)])
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--budget", "10", "--interval", "2")
    # probes at 0, 2, 4, 6, 8 s: another 2 s sleep would reach the 10 s budget
    assert rc == 3 and len(seen.probes) == 5 and seen.clock.sleeps == [2, 2, 2, 2]
    assert out == {"ready": False, "unit": "activating", "phase": "HTTP 503", "status": 503, "waited_s": 8.0}


def test_wait_ready_default_budget_and_interval(server, monkeypatch, capsys):
    seen = server(["active"], [("port open, /health_generate failed: timed out", None)])
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000")
    assert rc == 3 and len(seen.probes) == 30 and seen.clock.sleeps == [2] * 29
    assert out == {"ready": False, "unit": "active", "phase": "port open, /health_generate failed: timed out",
                   "status": None, "waited_s": 58.0}


def test_wait_ready_probes_once_when_the_budget_is_shorter_than_the_interval(server, monkeypatch, capsys):
    seen = server(["active"], [("port closed", None)], cost=0.25)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "1", "--budget", "1", "--interval", "2")
    assert (rc, len(seen.probes), seen.clock.sleeps) == (3, 1, [])
    assert out == {"ready": False, "unit": "active", "phase": "port closed", "status": None, "waited_s": 0.2}


@pytest.mark.parametrize("state", ["failed", "inactive", "deactivating", "unknown"])
def test_wait_ready_stops_when_the_unit_is_not_running(server, monkeypatch, capsys, state):
    seen = server(["activating", state], [("HTTP 503", 503)], cost=0.26)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--interval", "5")
    assert rc == 4 and len(seen.probes) == 1
    assert out == {"ready": False, "unit": state, "phase": "sglang.service is %s" % state, "status": 503,
                   "waited_s": 5.3}


def test_wait_ready_stops_at_once_for_a_stopped_unit(server, monkeypatch, capsys):
    seen = server(["inactive"], [("HTTP 200", 200)])
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--unit", "x.service")
    assert rc == 4 and seen.probes == []
    assert out == {"ready": False, "unit": "inactive", "phase": "x.service is inactive", "status": None,
                   "waited_s": 0.0}


def listen_bound(monkeypatch, started):
    """The unit's main process started at `started` on the fake clock (None: systemd has no time); the calls."""
    calls = []
    monkeypatch.setattr(_helper_ready, "_main_started", lambda unit: calls.append(unit) or started)
    return calls


def test_wait_ready_fails_when_nothing_listens_past_the_listen_timeout_from_the_servers_start(server,
                                                                                              monkeypatch, capsys):
    seen = server(["active"], [("port closed", None)], cost=0.123)
    asked = listen_bound(monkeypatch, started=seen.clock.now - 50)  # this call comes 50 s after the start
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--listen-timeout", "60", "--unit", "u")
    # probes at 50, 52.1, ... s after the start (each takes 0.123 s): the sixth finds the bound passed
    assert rc == 5 and len(seen.probes) == 6 and seen.clock.sleeps == [2] * 5 and asked == ["u"]
    assert out == {"ready": False, "unit": "active", "status": None, "waited_s": 10.7,
                   "phase": "nothing listens on 127.0.0.1:30000 61 s after the server started (listen timeout 60 s)"}


def test_wait_ready_ends_the_wait_when_the_listen_timeout_is_just_reached(server, monkeypatch, capsys):
    seen = server(["active"], [("port closed", None)])
    listen_bound(monkeypatch, started=seen.clock.now - 56)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--listen-timeout", "60")
    assert rc == 5 and len(seen.probes) == 3 and out["waited_s"] == 4.0  # at 56, 58 and 60 s: 60 is the bound


def test_wait_ready_does_not_bound_a_port_that_listens_or_a_unit_still_starting(server, monkeypatch, capsys):
    seen = server(["activating", "activating", "active"], [("port closed", None), ("port closed", None),
                                                           ("HTTP 503", 503)])
    listen_bound(monkeypatch, started=seen.clock.now - 3600)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--listen-timeout", "60", "--budget", "10")
    assert rc == 3 and out["phase"] == "HTTP 503"  # the gate (start-pre), then a port that listens: waited on


def test_wait_ready_without_the_servers_start_time_has_no_listen_bound(server, monkeypatch, capsys):
    server(["active"], [("port closed", None)])
    asked = listen_bound(monkeypatch, started=None)
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--listen-timeout", "1", "--budget", "6")
    assert rc == 3 and out["phase"] == "port closed" and len(asked) == 3  # asked again each poll until it knows


def test_wait_ready_has_no_listen_bound_by_default(server, monkeypatch, capsys):
    server(["active"], [("port closed", None)])
    asked = listen_bound(monkeypatch, started=0.0)
    assert wait_ready(monkeypatch, capsys, "--port", "30000", "--budget", "4")[0] == 3 and asked == []


@pytest.mark.parametrize("stdout, started", [("12345678\n", 12.345678), ("1\n", 1e-06), ("0\n", None), ("", None),
                                             ("[not set]\n", None)])
def test_main_started_reads_systemds_monotonic_time_of_the_main_process(monkeypatch, stdout, started):
    calls = []
    fake_commands(monkeypatch, calls, {"systemctl": completed(stdout)})
    assert _helper_ready._main_started("sglang.service") == started
    assert calls == [(["systemctl", "show", "sglang.service", "--property=ExecMainStartTimestampMonotonic", "--value"],
                      run_kwargs())]


def test_unit_state_asks_systemctl(monkeypatch):
    calls = []
    answers = iter([completed("active\n", returncode=0), completed("", returncode=4)])
    fake_commands(monkeypatch, calls, {"systemctl": lambda argv, **kw: next(answers)})
    assert _helper_ready._unit_state("sglang.service") == "active"
    assert _helper_ready._unit_state("gone.service") == "unknown"
    assert calls == [(["systemctl", "is-active", "sglang.service"], run_kwargs()),
                     (["systemctl", "is-active", "gone.service"], run_kwargs())]


class Connection:
    def __init__(self, calls, error=None):
        self.calls, self.error = calls, error

    def __call__(self, address, timeout=None):
        self.calls.append(("connect", address, timeout))
        if self.error:
            raise self.error
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.calls.append(("close",))
        return False


class Response:
    def __init__(self, status):
        self.status = status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def probe_with(monkeypatch, connect_error=None, answer=None):
    calls = []

    def fetch(url, timeout=None):
        calls.append(("get", url, timeout))
        if isinstance(answer, Exception):
            raise answer
        return Response(answer)

    monkeypatch.setattr(_helper_ready, "socket", types.SimpleNamespace(create_connection=Connection(calls, connect_error)))
    monkeypatch.setattr(_helper_ready, "urllib", types.SimpleNamespace(
        request=types.SimpleNamespace(build_opener=lambda: types.SimpleNamespace(open=fetch)), error=urllib.error))
    return calls, _helper_ready._probe("10.0.0.5", 30000, "/health_generate", 7.5)


def test_probe_reports_a_closed_port_without_http(monkeypatch):
    calls, result = probe_with(monkeypatch, connect_error=ConnectionRefusedError(111, "refused"))
    assert result == ("port closed", None) and calls == [("connect", ("10.0.0.5", 30000), 2)]


@pytest.mark.parametrize("answer, result", [
    (200, ("HTTP 200", 200)),
    (urllib.error.HTTPError("u", 503, "Service Unavailable", {}, None), ("HTTP 503", 503)),
    (urllib.error.URLError("timed out"), ("port open, /health_generate failed: <urlopen error timed out>", None)),
    (ConnectionResetError(104, "reset"), ("port open, /health_generate failed: [Errno 104] reset", None)),
])
def test_probe_gets_the_health_path(monkeypatch, answer, result):
    calls, got = probe_with(monkeypatch, answer=answer)
    assert got == result
    assert calls == [("connect", ("10.0.0.5", 30000), 2), ("close",),
                     ("get", "http://10.0.0.5:30000/health_generate", 7.5)]


def test_probe_against_a_real_server_on_this_machine():
    """The probe's HTTP GET as it runs in the container (the standard library's opener, no fake): the status of a
    200, of an error status, and a closed port."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            self.send_response(200 if self.path == "/health_generate" else 503)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        assert _helper_ready._probe("127.0.0.1", port, "/health_generate", 5) == ("HTTP 200", 200)
        assert _helper_ready._probe("127.0.0.1", port, "/loading", 5) == ("HTTP 503", 503)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert _helper_ready._probe("127.0.0.1", port, "/health_generate", 5) == ("port closed", None)


def test_wait_ready_generates_once_ready_and_keeps_the_answer(server, monkeypatch, capsys):
    server(["active"], [("HTTP 503", 503), ("HTTP 200", 200)])
    asked = []
    monkeypatch.setattr(_helper_ready, "_generate", lambda *a: asked.append(a) or ({"text": " Paris."}, None))
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--generate-prompt", "The capital of France is",
                         "--generate-tokens", "8", "--generate-timeout", "12.5")
    assert rc == 0 and out["ready"] is True and out["generation"] == {"text": " Paris."}
    assert asked == [("127.0.0.1", 30000, "The capital of France is", 8, 12.5)]  # once, after the 200


def test_wait_ready_without_a_prompt_generates_nothing(server, monkeypatch, capsys):
    server(["active"], [("HTTP 200", 200)])
    monkeypatch.setattr(_helper_ready, "_generate", lambda *a: pytest.fail("no prompt, no generation"))
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000")
    assert rc == 0 and "generation" not in out


def test_a_failed_generation_is_rc_6_with_why(server, monkeypatch, capsys):
    server(["active"], [("HTTP 200", 200)])
    asked = []
    monkeypatch.setattr(_helper_ready, "_generate",
                        lambda *a: asked.append(a) or (None, "/generate failed: Remote end closed connection"))
    rc, out = wait_ready(monkeypatch, capsys, "--port", "30000", "--generate-prompt", "x")
    assert rc == 6 and asked == [("127.0.0.1", 30000, "x", 8, 300)]  # the defaults: 8 tokens, 300 s
    assert out == {"ready": False, "unit": "active", "phase": "/generate failed: Remote end closed connection",
                   "status": 200, "generation": None, "waited_s": 0.0}


def test_generate_against_a_real_server_on_this_machine():
    """The generation's POST as it runs in the container (the standard library, no fake): sampled at temperature
    1.0 with ignore_eos, and each way it can fail: an error status, no text, a connection closed without answer."""
    import http.server
    import json
    import threading
    import time

    bodies = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # pylint: disable=invalid-name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append((self.path, self.headers["Content-Type"], body))
            if body["text"] == "close":
                self.close_connection = True
                return
            if body["text"] == "slow":
                time.sleep(1.5)
            status, answer = {"ok": (200, {"text": " Paris.", "meta_info": {"completion_tokens": 8}}),
                              "empty": (200, {"text": ""}), "error": (500, {"error": "boom"}),
                              "bytes": (500, None), "slow": (200, {"text": "late"}),
                              "long": (200, {"text": "", "pad": "x" * 600})}[body["text"]]
            data = json.dumps(answer).encode() if answer else b"\xff boom"
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        assert _helper_ready._generate("127.0.0.1", port, "ok", 8, 5) == (
            {"text": " Paris.", "meta_info": {"completion_tokens": 8}}, None)
        params = {"max_new_tokens": 8, "temperature": 1.0, "ignore_eos": True}
        assert bodies == [("/generate", "application/json", {"text": "ok", "sampling_params": params})]
        assert _helper_ready._generate("127.0.0.1", port, "empty", 8, 5) == (
            None, '/generate answered without text: {"text": ""}')
        assert _helper_ready._generate("127.0.0.1", port, "error", 8, 5) == (
            None, '/generate answered HTTP 500: {"error": "boom"}')
        assert _helper_ready._generate("127.0.0.1", port, "bytes", 8, 5) == (
            None, "/generate answered HTTP 500: \ufffd boom")  # not UTF-8: replaced, never an exception
        long = json.dumps({"text": "", "pad": "x" * 600})
        assert _helper_ready._generate("127.0.0.1", port, "long", 8, 5) == (
            None, "/generate answered without text: " + long[:500])  # 500 characters of it
        answer, why = _helper_ready._generate("127.0.0.1", port, "slow", 8, 0.3)
        assert answer is None and why.startswith("/generate failed: ") and "timed out" in why  # its own timeout
        answer, why = _helper_ready._generate("127.0.0.1", port, "close", 8, 5)
        assert answer is None and why.startswith("/generate failed: ")
    finally:
        server.shutdown()
        server.server_close()
