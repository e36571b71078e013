"""gpuserve-sglang lock: its command line, the holder's child branch, and acquire/release under a fake clock.

test_gpuserve_sglang_lock.py runs real flocks and holder processes; these tests pin what those cannot see: the
`lock hold` command as the holder runs it (parsed by main, in-process), the child side of the fork (with fork,
exec and _exit faked, so nothing leaves this process), and the exact waits and figures of acquire and release.
"""
import importlib
import json
import os
import sys

import pytest

NAME = "ansible_collections.gpuserve.sglang.roles.sglang_server.files.usr.local.sbin.gpuserve_sglang"
RUN = {"host": "laptop-1", "pid": 4242}


@pytest.fixture(scope="module")
def helper():
    return importlib.import_module(NAME)


def main(helper, monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "lock"] + list(argv))
    return helper.main()


# ------------------------------------------------------------------------------------------------ command line

@pytest.mark.parametrize("argv, names", [
    ([], "action"),
    (["acquire"], "--owner-json"),
    (["release"], "--token"),
    (["hold", "--token", "t", "--until", "1"], "--ready-fd"),
    (["hold", "--ready-fd", "3", "--until", "1"], "--token"),
    (["hold", "--ready-fd", "3", "--token", "t"], "--until"),
])
def test_each_required_argument_is_required(helper, monkeypatch, capsys, argv, names):
    with pytest.raises(SystemExit) as exc:
        main(helper, monkeypatch, *argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("usage: gpuserve-sglang lock")
    assert "the following arguments are required: " + names in err


def test_hold_as_the_holder_runs_it(helper, monkeypatch):
    """`lock hold` parsed by main, as _spawn_holder execs it: says ok on its fd, and returns once its lease is over."""
    read_end, write_end = os.pipe()
    # its lease (1.5 s after the epoch) is long over: a hold that sleeps at all fails here, never hangs
    monkeypatch.setattr(helper.time, "sleep", lambda seconds: pytest.fail("held past its lease: slept %r" % seconds))
    try:
        rc = main(helper, monkeypatch, "hold", "--ready-fd", str(write_end), "--token", "t0k", "--until", "1.5")
        assert rc == 0
        with os.fdopen(read_end, "rb") as ready:
            read_end = None
            assert ready.read() == b"ok"  # and the holder closed its end
    finally:
        if read_end is not None:
            os.close(read_end)


# ------------------------------------------------------------------------------------- the holder's child side

class ChildExit(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def fake_child(helper, monkeypatch):
    """_spawn_holder with fork() answering 0 (this process plays the child) and the child's system calls faked.
    Installed inside the test body, right before the call: pytest's own output capture uses os.dup2 between the
    phases of a test."""
    calls = []

    def execv(path, argv):
        calls.append(("execv", path, argv))
        raise OSError("exec refused (test)")

    def _exit(code):
        raise ChildExit(code)

    monkeypatch.setattr(helper.os, "fork", lambda: 0)
    monkeypatch.setattr(helper.os, "setsid", lambda: calls.append(("setsid",)))
    monkeypatch.setattr(helper.os, "dup2", lambda fd, target: calls.append(("dup2", target)))
    monkeypatch.setattr(helper.os, "closerange", lambda low, high: calls.append(("closerange", low, high)))
    monkeypatch.setattr(helper.os, "set_inheritable", lambda fd, flag: calls.append(("inheritable", fd, flag)))
    monkeypatch.setattr(helper.os, "execv", execv)
    monkeypatch.setattr(helper.os, "_exit", _exit)
    return calls


@pytest.mark.parametrize("lock_fd", [3, None])  # 3: right after stdio, an empty range to skip; None: any
def test_the_child_leaves_the_callers_session_and_stdio_then_execs_the_holder(helper, monkeypatch, lock_fd):
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        child = fake_child(helper, monkeypatch)
        with pytest.raises(ChildExit) as exc:
            helper._spawn_holder(lock_fd or fd, "t0k", 1234.56789)
        monkeypatch.undo()
    finally:
        os.close(fd)
    lock_fd = lock_fd or fd
    assert exc.value.code == 127  # the exec failed: the child ends, with the shell's "cannot run" status
    assert child[0] == ("setsid",)
    assert child[1:4] == [("dup2", 0), ("dup2", 1), ("dup2", 2)]
    name, path, argv = child[-1]
    assert (name, path) == ("execv", sys.executable)
    assert argv[1:] == [os.path.abspath(helper.__file__), "lock", "hold", "--ready-fd", argv[5], "--token", "t0k",
                        "--until", "1234.568"]
    ready = int(argv[5])
    assert child[-3:-1] == [("inheritable", lock_fd, True), ("inheritable", ready, True)]
    # every other descriptor is closed: all but stdio, the lock's and the ready pipe's, up to the system's limit,
    # never with an empty range (os.closerange(n, n) may close everything from n on)
    ranges = child[4:-3]
    assert all(name == "closerange" and low < high for name, low, high in ranges), ranges
    closed = set()
    for _name, low, high in ranges:
        closed.update(range(low, min(high, 4096)))
    assert lock_fd < ready and ranges[-1] == ("closerange", ready + 1, os.sysconf("SC_OPEN_MAX"))
    assert closed == set(range(3, 4096)) - {lock_fd, ready}


@pytest.mark.parametrize("pid, killed", [(1, []), (2, [2]), (4242, [4242])])
def test_a_holder_that_does_not_start_is_killed_but_never_pid_0_or_1(helper, monkeypatch, pid, killed):
    signalled, reaped = [], []
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        fake_child(helper, monkeypatch)  # a mutant that runs the child branch here only records and raises
        monkeypatch.setattr(helper.os, "fork", lambda: pid)  # the parent side; the child never runs
        monkeypatch.setattr(helper.os, "kill", lambda p, sig: signalled.append(p))
        monkeypatch.setattr(helper.os, "waitpid", lambda p, flags: reaped.append((p, flags)) or (p, 0))
        started = helper._spawn_holder(fd, "t0k", 1.0)
        monkeypatch.undo()
        assert started is None  # nothing wrote "ok": the ready pipe just closed
    finally:
        os.close(fd)
    assert signalled == killed and reaped == [(pid, 0)]  # waited for, not polled (WNOHANG would leave a zombie)


# -------------------------------------------------------------------------------------------- owner and holder

def test_end_holder_signals_nothing_that_is_not_a_live_holder(helper, monkeypatch):
    monkeypatch.setattr(helper, "_is_holder", lambda owner: False)
    monkeypatch.setattr(helper.os, "kill", lambda pid, sig: pytest.fail("signalled %d" % pid))
    assert helper._end_holder({"holder_pid": 12, "token": "t"}) is False


def test_is_holder_and_holder_gone_read_pid_2_like_any_other(helper, monkeypatch):
    reads = {"cmdline": b"/usr/bin/python3\0/x\0lock\0hold\0--token\0mine\0", "stat": b"2 (python3) S 1 2"}
    monkeypatch.setattr(helper, "_read", lambda pid, name: reads[name])
    assert helper._is_holder({"holder_pid": 2, "token": "mine"}) is True
    assert helper._holder_gone({"holder_pid": 2, "token": "mine"}) is False
    reads["stat"] = b"2 (python3) Z 1 2"
    assert helper._holder_gone({"holder_pid": 2, "token": "mine"}) is True


@pytest.mark.parametrize("stat, gone", [
    (b"77 (a) S) Z 1 77", True),    # a comm with ') S' in it: the state is after the last ')'
    (b"77 (a) Z) S 1 77", False),
])
def test_holder_gone_reads_the_state_after_the_last_parenthesis(helper, monkeypatch, stat, gone):
    reads = {"cmdline": b"python3\0gpuserve-sglang\0lock\0hold\0--token\0abc\0", "stat": stat}
    monkeypatch.setattr(helper, "_read", lambda pid, name: reads[name])
    assert helper._holder_gone({"holder_pid": 77, "token": "abc"}) is gone


# ------------------------------------------------------------------------------------- a fake clock for acquire

class Clock:
    """monotonic() and time() that move only when the helper sleeps (plus a fixed cost per read, if any)."""

    def __init__(self, mono=100.0, wall=1796000000.12345, cost=0.0):
        self.mono, self.wall, self.cost, self.slept = mono, wall, cost, []

    def monotonic(self):
        self.mono += self.cost
        return self.mono

    def time(self):
        return self.wall

    def sleep(self, seconds):
        # a wait that never ends (a mutant's) fails here at once instead of spinning until a test timeout
        assert len(self.slept) < 100, "slept 100 times: the wait does not end"
        self.slept.append(round(seconds, 6))
        self.mono += seconds
        self.wall += seconds


@pytest.fixture
def clock(helper, monkeypatch):
    fake = Clock()
    monkeypatch.setattr(helper.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(helper.time, "time", fake.time)
    monkeypatch.setattr(helper.time, "sleep", fake.sleep)
    return fake


def acquire(helper, monkeypatch, capsys, path, *argv):
    rc = main(helper, monkeypatch, "acquire", "--path", path, "--owner-json", json.dumps(RUN), *argv)
    return rc, json.loads(capsys.readouterr().out)


def test_a_steal_whose_holder_ignores_sigterm_gives_up_five_seconds_after_it(helper, monkeypatch, capsys, clock,
                                                                               tmp_path):
    owner = {"token": "dead-run", "holder_pid": 4242, "run": RUN}
    path = tmp_path / "lock"
    path.write_text(json.dumps(owner))
    signalled = []
    monkeypatch.setattr(helper, "_try_flock", lambda fd: False)
    monkeypatch.setattr(helper, "_end_holder", lambda o: signalled.append(o["holder_pid"]) or True)
    rc, out = acquire(helper, monkeypatch, capsys, str(path), "--steal", "dead-run", "--interval", "0.5")
    assert rc == 2 and out["acquired"] is False
    assert out["waited_s"] == 5.0  # once: not extended again by every SIGTERM that does not end it
    assert len(signalled) == 11 and clock.slept == [0.5] * 10  # 0, 0.5 ... 5.0 s


def test_wait_zero_fails_at_the_first_look(helper, monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": RUN}))
    monkeypatch.setattr(helper, "_try_flock", lambda fd: False)
    rc, out = acquire(helper, monkeypatch, capsys, str(path))
    assert rc == 2 and out["waited_s"] == 0.0 and clock.slept == []


def test_the_wait_reported_is_rounded_to_a_tenth(helper, monkeypatch, capsys, tmp_path):
    fake = Clock(mono=100.0, cost=0.17)
    monkeypatch.setattr(helper.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(helper.time, "sleep", fake.sleep)
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": RUN}))
    monkeypatch.setattr(helper, "_try_flock", lambda fd: False)
    rc, out = acquire(helper, monkeypatch, capsys, str(path))
    assert rc == 2 and out["waited_s"] == 0.2  # 0.17 s


def test_waits_sleep_the_interval_then_only_what_is_left(helper, monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": RUN}))
    monkeypatch.setattr(helper, "_try_flock", lambda fd: False)
    rc, out = acquire(helper, monkeypatch, capsys, str(path), "--wait", "1.2", "--interval", "0.5")
    assert rc == 2 and clock.slept == [0.5, 0.5, 0.2] and out["waited_s"] == 1.2


def test_the_owner_written_and_the_wait_reported_exactly(helper, monkeypatch, capsys, tmp_path):
    fake = Clock(mono=100.0, cost=0.17)  # every look at the clock costs 0.17 s
    monkeypatch.setattr(helper.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(helper.time, "time", fake.time)
    monkeypatch.setattr(helper.time, "sleep", fake.sleep)
    looks = iter([False, True])
    monkeypatch.setattr(helper, "_try_flock", lambda fd: next(looks))
    monkeypatch.setattr(helper, "_spawn_holder", lambda fd, token, until: 4343)
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": RUN}) + " " * 500)
    rc, out = acquire(helper, monkeypatch, capsys, str(path), "--wait", "30", "--ttl", "60", "--interval", "0.05")
    assert rc == 0
    # start 100.17; the look after the failed flock 100.34; slept 0.05; waited read at 100.56 -> 0.39 -> 0.4
    assert out["waited_s"] == 0.4
    assert out["owner"]["expires"] == round(1796000000.12345 + 0.05 + 60, 3)
    assert out["owner"]["since"] == "2026-11-30T00:53:20Z"  # the fake clock's time, not the real one
    with open(path) as handle:
        assert json.loads(handle.read()) == out["owner"]  # the stale owner's longer text is gone


# ------------------------------------------------------------------------------------- release under the clock

def test_release_with_no_wait_left_fails_at_the_first_look(helper, monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "mine", "holder_pid": 4242}))
    monkeypatch.setattr(helper, "_end_holder", lambda owner: True)
    monkeypatch.setattr(helper, "_try_flock", lambda fd: False)
    monkeypatch.setattr(helper, "_holder_gone", lambda owner: False)
    rc = main(helper, monkeypatch, "release", "--path", str(path), "--token", "mine", "--wait", "0")
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["reason"] == "the holder did not exit" and clock.slept == []


def test_a_lease_that_ends_exactly_now_has_not_ended(helper, monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "expires": clock.wall, "run": RUN}))
    monkeypatch.setattr(helper, "_try_flock", lambda fd: False)
    monkeypatch.setattr(helper, "_end_holder", lambda owner: pytest.fail("ended a holder whose lease has not ended"))
    assert acquire(helper, monkeypatch, capsys, str(path))[0] == 2
    clock.wall += 0.001
    monkeypatch.setattr(helper, "_end_holder", lambda owner: True)
    rc, out = acquire(helper, monkeypatch, capsys, str(path))
    assert rc == 2 and out["waited_s"] == 5.0  # ended: then up to 5 s for it to exit


@pytest.mark.parametrize("second_look, cleared", [(True, True), (False, False)])
def test_a_holder_that_exits_between_two_looks_is_released_and_cleared(helper, monkeypatch, capsys, clock, tmp_path,
                                                                       second_look, cleared):
    """The flock was taken at the first look, the holder is gone at the next: it exited in between (the lock is
    ours to clear), or a waiting run took the lock the moment it was free (not ours to clear)."""
    path = tmp_path / "lock"
    owner = {"token": "mine", "holder_pid": 4242}
    path.write_text(json.dumps(owner) + "\n")
    looks = iter([False, second_look])
    monkeypatch.setattr(helper, "_end_holder", lambda o: True)
    monkeypatch.setattr(helper, "_try_flock", lambda fd: next(looks))
    monkeypatch.setattr(helper, "_holder_gone", lambda o: True)
    rc = main(helper, monkeypatch, "release", "--path", str(path), "--token", "mine")
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out == {"released": True, "owner": owner} and clock.slept == []
    assert path.read_text() == ("" if cleared else json.dumps(owner) + "\n")
    assert next(looks, "none left") == "none left"


def test_a_holder_that_exits_during_the_wait_is_released_and_cleared_after_one_interval(helper, monkeypatch, capsys,
                                                                                      clock, tmp_path):
    path = tmp_path / "lock"
    owner = {"token": "mine", "holder_pid": 4242}
    path.write_text(json.dumps(owner) + "\n")
    looks = iter([False, True])
    monkeypatch.setattr(helper, "_end_holder", lambda o: True)
    monkeypatch.setattr(helper, "_try_flock", lambda fd: next(looks))
    monkeypatch.setattr(helper, "_holder_gone", lambda o: False)  # its PID still reads as running
    rc = main(helper, monkeypatch, "release", "--path", str(path), "--token", "mine", "--interval", "0.25")
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out == {"released": True, "owner": owner} and clock.slept == [0.25]
    assert path.read_text() == ""
