# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang stop and start: the lifecycle's stop, as fast as what the server has in flight allows, and its
start (a daemon-reload only when systemd needs one).

SGLang 0.5.23's own stop is slow on purpose (managers/tokenizer_manager.py, sigterm_watchdog): SIGTERM only sets a
flag, a watchdog looks at it every 5 s, then drains with no bound; the GPU memory comes free when the main process
exits (5.2-6.1 s after SIGTERM on an H200, docs/benchmarks.md). SGL_FORCE_SHUTDOWN skips the drain, not the 5 s poll.
So this command reads the load itself and ends the server's whole tree at once when nothing is in flight:
- the load: GET /v1/loads, num_running_reqs + num_waiting_reqs summed over the DP ranks (the schedulers' own
  counts; SMG's load monitor reads the same), read twice SETTLE_S apart so a response being written when the first
  read came back is finished;
- idle (or nothing listens on the port: no request can be in flight): SIGKILL to the unit's whole control group;
- busy: SIGTERM to the main process only (SGLang then answers /health 503, so a gateway routes elsewhere; under
  the unit's KillMode=mixed its schedulers keep running), the load polled every POLL_S until idle or the drain
  bound, then SIGKILL to the control group; at the bound the answer says how many requests it cut;
- the load unreadable while something listens (an old SGLang, another API): `systemctl stop`, SGLang's own drain,
  bounded by the unit's TimeoutStopSec;
- --no-drain REASON (a multi-node server's rank >= 1 node once rank 0 stopped: nothing can be in flight there):
  SIGKILL at once.
Then `systemctl reset-failed`, so the start and the audit see a clean unit (a SIGKILLed main process leaves it
failed). The GPU release and the gate come next (gpu_release on the PVE host).

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package.
"""
import argparse
import json
import sys
import time
import urllib.error
import urllib.request

from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_run import properties, systemctl

# A program run without Ansible (the role's stop task, an operator): it prints its JSON, with no AnsibleModule to log
# through; its commands go through _helper_run.
# pylint: disable=ansible-bad-function

# The core section only: the counts without the memory, speculative and queue sections SGLang builds otherwise.
LOADS_PATH = "/v1/loads?include=core"
POLL_S = 0.2
# Between a request leaving the scheduler's counts and its last bytes leaving the HTTP server there are the
# detokenizer and the tokenizer manager: milliseconds. A second idle read this much later covers them.
SETTLE_S = 0.05
READ_TIMEOUT_S = 2.0
# After SIGKILL the control group empties in milliseconds, unless a process sits in the driver (state D) while its
# GPU memory is torn down (SGLang PR #31746); gpu_release's gate waits for that memory, so this wait is short.
KILL_WAIT_S = 10.0
STOPPED = ("inactive", "failed")


def parse_loads(body):
    """(running, waiting) summed over the DP ranks of a /v1/loads answer; ValueError when it has no load."""
    loads = body.get("loads") if isinstance(body, dict) else None
    if not isinstance(loads, list) or not loads:
        raise ValueError("no `loads` list in the answer")
    running = waiting = 0
    for load in loads:
        try:
            running += int(load["num_running_reqs"])
            waiting += int(load["num_waiting_reqs"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("a load without num_running_reqs and num_waiting_reqs: %s" % json.dumps(load)[:200])
    return running, waiting


def read_loads(url, timeout=READ_TIMEOUT_S):
    """What url (GET /v1/loads) says is in flight: {in_flight, running, waiting}; {listening: False, error} when
    nothing listens there; {error} when it cannot be read otherwise."""
    try:
        with urllib.request.build_opener().open(url, timeout=timeout) as resp:
            body = json.loads(resp.read().decode("utf-8", "replace"))
        running, waiting = parse_loads(body)
    except urllib.error.HTTPError as exc:
        return {"error": "HTTP %s" % exc.code}
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return {"listening": False, "error": "connection refused"}
        return {"error": str(exc.reason)}
    except ConnectionRefusedError:
        return {"listening": False, "error": "connection refused"}
    except (OSError, ValueError) as exc:
        return {"error": str(exc) or type(exc).__name__}
    return {"in_flight": running + waiting, "running": running, "waiting": waiting}


class Unit:
    """The unit, through systemctl (_helper_run): its state, a signal to the main process or the whole control
    group, systemd's own stop, reset-failed."""

    def __init__(self, name):
        self.name = name

    def state(self):
        props = properties(self.name, "ActiveState", "MainPID")
        return props.get("ActiveState") or "unknown", int(props.get("MainPID") or 0)

    def kill(self, signal, main_only=False):
        # --kill-who: systemd 249 knows no other name; 252 and later take it as --kill-whom's old name
        res = systemctl("kill", "--kill-who=" + ("main" if main_only else "all"), "--signal=" + signal, self.name)
        return None if res.rc == 0 else (res.err or res.out).strip() or "rc %s" % res.rc

    def stop(self):
        res = systemctl("stop", self.name)
        return None if res.rc == 0 else (res.err or res.out).strip() or "rc %s" % res.rc

    def reset_failed(self):
        systemctl("reset-failed", self.name)


class Stop:
    """One stop: run() returns (exit status, answer). read() is read_loads bound to the URL (None with --no-drain),
    unit a Unit; clock and sleep injected for the tests."""

    def __init__(self, unit, read, source, drain_timeout, no_drain=None, clock=time.monotonic, sleep=time.sleep,
                 poll=POLL_S, wall=time.time):
        self.unit, self.read, self.source, self.bound = unit, read, source, float(drain_timeout)
        self.no_drain, self.clock, self.sleep, self.poll, self.wall = no_drain, clock, sleep, poll, wall
        self.start = clock()
        self.signals, self.first_signal = [], None
        # the wall clock of the first signal: an observer of the GPU's memory puts the release on the same line
        self.answer = {"unit": unit.name, "signal_epoch": None}

    def at(self):
        return round(self.clock() - self.start, 3)

    def signal(self, signal, main_only=False):
        if self.first_signal is None:
            self.answer["signal_epoch"] = self.wall()
        error = self.unit.kill(signal, main_only)
        self.first_signal = self.clock() if self.first_signal is None else self.first_signal
        self.signals.append({"at_s": self.at(), "signal": signal, "to": "main process" if main_only else
                             "control group", "error": error})
        return error

    def load(self):
        """The load now, with its source; a second idle read SETTLE_S later (a request can arrive in between)."""
        load = dict(self.read(), source=self.source)
        if load.get("in_flight") == 0 or load.get("listening") is False:
            self.sleep(SETTLE_S)
            load = dict(self.read(), source=self.source)
        return load

    def idle(self, load):
        return load.get("in_flight") == 0 or load.get("listening") is False

    def run(self):
        state, pid = self.unit.state()
        self.answer.update(unit_before=state, main_pid=pid)
        if state == "unknown":
            return self.finish("failed", "systemd did not say whether %s runs: nothing was signalled" % self.unit.name,
                               rc=1)
        if state in STOPPED:
            return self.finish("not running", "it was %s: nothing to stop" % state)
        if self.no_drain:
            self.answer["load"] = {"source": self.no_drain, "in_flight": 0}
            return self.kill_all("no drain", "nothing can be in flight (%s)" % self.no_drain)
        load = self.answer["load"] = self.load()
        if self.idle(load):
            why = ("nothing in flight (%s: 0 running, 0 waiting)" % self.source if load.get("in_flight") == 0
                   else "nothing listens (%s: %s): no request can be in flight" % (self.source, load["error"]))
            return self.kill_all("idle", why)
        if "in_flight" not in load:
            # something answers, but not with a load: the unit's own stop, SGLang's drain bounded by TimeoutStopSec
            self.answer["signal_epoch"], self.first_signal = self.wall(), self.clock()
            error = self.unit.stop()
            self.signals.append({"at_s": self.at(), "signal": "systemctl stop", "to": "unit", "error": error})
            why = ("the load is unknown (%s: %s): the unit's own stop (SGLang drains under KillMode=mixed, SIGKILL "
                   "at TimeoutStopSec)" % (self.source, load["error"]))
            return self.finish("unit stop", why)
        return self.drain(load)

    def drain(self, load):
        first = load["in_flight"]
        error = self.signal("SIGTERM", main_only=True)
        if error:
            return self.finish("failed", "SIGTERM to the main process failed: %s" % error, rc=1)
        began = self.clock()
        last = load
        while self.clock() - began < self.bound:
            self.sleep(min(self.poll, self.bound - (self.clock() - began)))
            now = self.load()
            if now.get("listening") is False or self.unit.state()[0] in STOPPED:
                # the port closes when the main process exits: SGLang's own shutdown (after its drain), or a crash
                self.answer["drain"] = dict(self.drain_record(first, began, 0),
                                            in_flight_at_last_read=last.get("in_flight"))
                why = ("%d request(s) in flight: SIGTERM to the main process; the server exited by itself %.2f s "
                       "later (%s in flight at the read before)" % (first, self.clock() - began, last.get("in_flight")))
                if self.unit.state()[0] in STOPPED:
                    return self.finish("exited", why)
                return self.kill_all("exited", why)
            if "in_flight" in now:
                last = now
            if now.get("in_flight") == 0:
                break
        waited = self.clock() - began
        cut = last.get("in_flight") or 0
        self.answer["drain"] = self.drain_record(first, began, cut)
        if cut:
            return self.kill_all("cut", "%d request(s) in flight: SIGTERM to the main process; at the drain bound "
                                        "(%g s) %d were still running or queued and are cut (any of them in flight "
                                        "at the SIGTERM had run %.1f s or more)" % (first, self.bound, cut, waited))
        return self.kill_all("drained", "%d request(s) in flight: SIGTERM to the main process, drained in %.2f s"
                             % (first, waited))

    def drain_record(self, first, began, cut):
        return {"bound_s": self.bound, "in_flight_at_sigterm": first, "waited_s": round(self.clock() - began, 3),
                "cut": cut}

    def kill_all(self, how, why):
        error = self.signal("SIGKILL")
        if error and self.unit.state()[0] not in STOPPED:
            return self.finish("failed", "%s, but SIGKILL to the control group failed: %s" % (why, error), rc=1)
        deadline = self.clock() + KILL_WAIT_S
        while self.unit.state()[0] not in STOPPED and self.clock() < deadline:
            self.sleep(0.02)
        return self.finish(how, why + ": SIGKILL to the control group")

    def finish(self, how, why, rc=0):
        state = self.unit.state()[0]
        if state == "failed":
            self.unit.reset_failed()
            state = self.unit.state()[0]
        stop_s = None if self.first_signal is None else round(self.clock() - self.first_signal, 3)
        if rc == 0 and self.first_signal is not None and state == "deactivating":
            why += "; the unit is still deactivating %g s later (a process stuck in the driver?): gpu_release " \
                   "waits for its GPU memory" % KILL_WAIT_S
        elif rc == 0 and self.first_signal is not None and state not in STOPPED:
            how, rc = "failed", 1
            why += ", but the unit is still %s" % state
        self.answer.update(how=how, signals=self.signals, stop_s=stop_s, elapsed_s=self.at(), unit_after=state,
                           msg="%s: %s%s" % (self.unit.name, why, " (stopped in %.2f s)" % stop_s
                                             if stop_s is not None and state in STOPPED else ""))
        if rc:
            self.answer["error"] = self.answer["msg"]
        return rc, self.answer


def cmd_stop():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang stop")
    parser.add_argument("--unit", default="sglang.service")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--drain-timeout", type=float, default=30)
    parser.add_argument("--no-drain", metavar="REASON")
    opts = parser.parse_args(sys.argv[2:])
    if opts.port is None and not opts.no_drain:
        parser.error("--port is required (or --no-drain REASON)")
    host = "[%s]" % opts.host if ":" in opts.host else opts.host
    url = "http://%s:%s%s" % (host, opts.port, LOADS_PATH)
    rc, answer = Stop(Unit(opts.unit), lambda: read_loads(url), "GET " + url, opts.drain_timeout,
                      no_drain=opts.no_drain).run()
    print(json.dumps(answer))
    return rc


def cmd_start():
    """start: `systemctl daemon-reload` when systemd says the unit's file changed (or it is not loaded), then
    `systemctl start`, which returns once the unit's ExecStartPre gate passed and the server is forked. Prints
    {unit, reloaded, active_state, main_pid, start_s}; exit 1 (with `error`) when the start failed."""
    parser = argparse.ArgumentParser(prog="gpuserve-sglang start")
    parser.add_argument("--unit", default="sglang.service")
    opts = parser.parse_args(sys.argv[2:])
    began = time.monotonic()
    props = properties(opts.unit, "NeedDaemonReload", "LoadState")
    reload = props.get("NeedDaemonReload") == "yes" or props.get("LoadState") != "loaded"
    if reload:
        systemctl("daemon-reload")
    res = systemctl("start", opts.unit)
    after = properties(opts.unit, "ActiveState", "MainPID")
    answer = {"unit": opts.unit, "reloaded": reload, "active_state": after.get("ActiveState") or "unknown",
              "main_pid": int(after.get("MainPID") or 0), "start_s": round(time.monotonic() - began, 3)}
    if res.rc != 0:
        answer["error"] = "systemctl start %s failed (rc %s): %s" % (opts.unit, res.rc, (res.err or res.out).strip())
    print(json.dumps(answer))
    return 1 if res.rc != 0 else 0
