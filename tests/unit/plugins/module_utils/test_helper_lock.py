"""gpuserve-sglang lock (plugins/module_utils/_helper_lock.py): the container's lifecycle lock, with real flock(2) and
real holder processes.

Each test uses a lock file of its own under tmp_path; the helper runs in-process (acquire forks and execs the
holder, `lock hold`: `python -c` with the package's root first on sys.path, as in the container). Holders left by
a test are ended and reaped by the fixture.

Then what those cannot see: the `lock hold` command as the holder runs it (parsed by main, in-process), the child
side of the fork (with fork, exec and _exit faked, so nothing leaves this process), and the exact waits and
figures of acquire and release under a fake clock.
"""
import fcntl
import json
import os
import signal
import sys
import threading
import time

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_cli, _helper_lock
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import raising

# What the holder runs: the package's command line, imported from the folder this test imported the package from (a
# checkout's collections/, the installed artifact's tree, mutmut's mutants/): _helper_lock.py's own path less its
# import name.
PACKAGE_ROOT = os.path.abspath(_helper_lock.__file__)[:-len(
    "/ansible_collections/gpuserve/sglang/plugins/module_utils/_helper_lock.py")]
HOLDER_CODE = ("import sys; sys.path.insert(0, %r); from ansible_collections.gpuserve.sglang.plugins.module_utils."
               "_helper_cli import main; sys.exit(main())" % PACKAGE_ROOT)
RUN = {"host": "laptop-1", "pid": 4242, "user": "ops", "playbooks": ["playbooks/restart_server.yml"],
       "play": "Restart the SGLang server", "started": "2026-11-30T21:00:00Z"}
BRIEF_RUN = {"host": "laptop-1", "pid": 4242}


@pytest.fixture
def lock(monkeypatch, capsys, tmp_path):
    """lock(action, *args) -> (rc, json); the lock file is tmp_path/run/lock (its directory does not exist yet)."""
    path = str(tmp_path / "run" / "lock")
    holders = []

    def call(action, *args):
        monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "lock", action, "--path", path, "--interval", "0.05"]
                            + list(args))
        rc = _helper_cli.main()
        out = json.loads(capsys.readouterr().out)
        pid = (out.get("owner") or {}).get("holder_pid") if out.get("acquired") else None
        if pid:
            holders.append(pid)
        return rc, out

    call.path = path
    yield call
    holders.extend(own_holders())  # any a test did not see (a mutant's), so no child is left for another to reap
    # never 0, -1 or 1: a mutant that reports PID 0 would have this kill its own process group
    holders = sorted(set(pid for pid in holders if isinstance(pid, int) and pid > 1))
    for pid in holders:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in holders:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def own_holders():
    """`lock hold` processes that are children of this process."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as stat, open("/proc/%s/cmdline" % name, "rb") as cmdline:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                    argv = cmdline.read()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == os.getpid() and b"\0lock\0hold\0" in argv:
                pids.append(int(name))
    return pids


def alive(pid):
    """Running and not a zombie (holders are children of this test process until reaped)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, limit=5.0):
    end = time.monotonic() + limit
    while alive(pid):
        assert time.monotonic() < end, "holder %d still alive" % pid
        time.sleep(0.02)


def flock_free(path):
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def acquire(lock, *args):
    return lock("acquire", "--owner-json", json.dumps(RUN), *args)


def test_a_free_lock_is_taken_and_handed_to_a_holder_process(lock):
    before = time.time()
    rc, out = acquire(lock, "--ttl", "60")
    assert rc == 0 and out["acquired"] is True
    owner = out["owner"]
    assert out["token"] == owner["token"] and len(owner["token"]) == 16
    assert owner["run"] == RUN
    assert before + 59 < owner["expires"] <= time.time() + 60
    assert owner["expires_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(owner["expires"]))
    # expires is rounded to the millisecond, since is not
    assert owner["since"] in [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(owner["expires"] - 60 - d))
                              for d in (0, 0.001)]
    assert out["cleared"] is None and out["ended"] == [] and out["waited_s"] < 1
    pid = owner["holder_pid"]
    assert alive(pid) and pid != os.getpid()
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        argv = handle.read().split(b"\0")
    assert argv[1:5] == [b"-c", HOLDER_CODE.encode(), b"lock", b"hold"]
    assert argv[argv.index(b"--token") + 1] == owner["token"].encode()
    # the holder has its own session and none of the caller's stdio (a pct exec would wait for it)
    assert os.getsid(pid) == pid
    assert all(os.readlink("/proc/%d/fd/%d" % (pid, n)) == "/dev/null" for n in (0, 1, 2))
    with open(lock.path) as handle:
        assert json.loads(handle.read()) == owner
    assert oct(os.stat(lock.path).st_mode & 0o777) == "0o644"
    assert not flock_free(lock.path)
    assert lock("status") == (0, {"held": True, "owner": owner})


def test_the_holder_keeps_no_file_of_its_caller_but_the_lock(lock, tmp_path):
    """An inheritable descriptor of the caller (a flock(1)'s, a pipe of a CI runner) would live as long as the
    lease in the holder; it keeps stdio on /dev/null and the lock file, nothing else."""
    leaked = os.open(str(tmp_path / "leaked"), os.O_RDWR | os.O_CREAT)
    os.set_inheritable(leaked, True)
    try:
        _rc, out = acquire(lock)
    finally:
        os.close(leaked)
    pid = out["owner"]["holder_pid"]
    fds = {int(n): os.readlink("/proc/%d/fd/%s" % (pid, n)) for n in os.listdir("/proc/%d/fd" % pid)}
    assert sorted(fds.values()) == sorted(["/dev/null"] * 3 + [lock.path])
    assert all(fds[n] == "/dev/null" for n in (0, 1, 2))


def test_a_second_run_fails_fast_naming_the_holder(lock):
    _rc, first = acquire(lock)
    rc, out = acquire(lock)
    assert rc == 2 and out["acquired"] is False
    assert out["owner"] == first["owner"] and out["waited_s"] < 1
    msg = out["message"]
    assert msg.startswith("the lifecycle lock %s is held by another run: ansible-playbook PID 4242 on laptop-1 "
                          "(user ops, playbooks/restart_server.yml, play 'Restart the SGLang server'), started "
                          "2026-11-30T21:00:00Z; lock taken %s, its lease ends %s; holder PID %d here. Waited 0 s."
                          % (lock.path, first["owner"]["since"], first["owner"]["expires_at"],
                             first["owner"]["holder_pid"]))
    assert msg.endswith("take the lock over with -e sglang_server_lock_steal=%s" % first["token"])
    assert alive(first["owner"]["holder_pid"])


def test_release_with_the_token_ends_the_holder_and_clears_the_owner(lock):
    _rc, first = acquire(lock)
    rc, out = lock("release", "--token", first["token"])
    assert rc == 0 and out == {"released": True, "owner": first["owner"]}
    wait_gone(first["owner"]["holder_pid"])
    assert flock_free(lock.path)
    with open(lock.path) as handle:
        assert handle.read() == ""
    assert lock("status") == (0, {"held": False, "owner": {}})
    rc, again = acquire(lock)
    assert rc == 0 and again["cleared"] is None


def test_release_with_another_token_leaves_the_lock_alone(lock):
    _rc, first = acquire(lock)
    rc, out = lock("release", "--token", "0" * 16)
    assert rc == 0 and out["released"] is False
    assert out["reason"] == "the lock is not held with this token (its lease ended, or it was taken over)"
    assert out["owner"] == first["owner"]
    assert alive(first["owner"]["holder_pid"]) and not flock_free(lock.path)


def test_a_holder_killed_without_release_leaves_no_lock_and_is_reported_cleared(lock):
    _rc, first = acquire(lock)
    os.kill(first["owner"]["holder_pid"], signal.SIGKILL)
    wait_gone(first["owner"]["holder_pid"])
    # the file still names the dead holder; status judges by the flock, not by the file
    assert lock("status") == (0, {"held": False, "owner": {}})
    rc, out = acquire(lock)
    assert rc == 0 and out["cleared"] == first["owner"] and out["ended"] == []
    assert out["token"] != first["token"]


def test_steal_ends_the_holder_of_exactly_that_token(lock):
    _rc, first = acquire(lock)
    rc, out = acquire(lock, "--steal", first["token"])
    assert rc == 0 and out["ended"] == [first["owner"]] and out["cleared"] == first["owner"]
    wait_gone(first["owner"]["holder_pid"])
    assert alive(out["owner"]["holder_pid"])


def test_steal_with_another_token_ends_nothing(lock):
    _rc, first = acquire(lock)
    rc, out = acquire(lock, "--steal", "f" * 16)
    assert rc == 2 and alive(first["owner"]["holder_pid"])


def test_the_holder_ends_itself_when_its_lease_ends(lock):
    _rc, first = acquire(lock, "--ttl", "0.3")
    wait_gone(first["owner"]["holder_pid"], limit=3)
    assert flock_free(lock.path)


def test_a_holder_past_its_lease_is_ended(lock):
    _rc, first = acquire(lock, "--ttl", "60")
    owner = dict(first["owner"], expires=time.time() - 1)
    with open(lock.path, "w") as handle:
        handle.write(json.dumps(owner))
    rc, out = acquire(lock)
    assert rc == 0 and out["ended"] == [owner]
    wait_gone(first["owner"]["holder_pid"])


def test_a_second_run_waits_for_the_first_to_finish(lock):
    _rc, first = acquire(lock)
    # the first run's holder ends half a second into the second run's wait
    timer = threading.Timer(0.5, os.kill, (first["owner"]["holder_pid"], signal.SIGTERM))
    timer.start()
    try:
        rc, out = acquire(lock, "--wait", "10")
    finally:
        timer.cancel()
    assert rc == 0 and 0.4 <= out["waited_s"] < 5
    assert out["cleared"] == first["owner"]


def test_waiting_gives_up_at_its_limit(lock):
    acquire(lock)
    start = time.monotonic()
    rc, out = acquire(lock, "--wait", "0.4")
    assert rc == 2 and 0.35 < time.monotonic() - start < 5 and 0.4 <= out["waited_s"] < 5
    assert "Waited %.0f s." % out["waited_s"] in out["message"]


def test_the_message_marks_what_the_owner_does_not_say():
    assert _helper_lock._owner_message({"token": "t"}, "/run/l", 2.4) == (
        "the lifecycle lock /run/l is held by another run: ansible-playbook PID ? on ? (user ?, playbook unknown, "
        "play '?'), started ?; lock taken ?, its lease ends ?; holder PID ? here. Waited 2 s. Wait for that run "
        "(sglang_server_lock_wait), or, if it is dead (killed on another machine), take the lock over with "
        "-e sglang_server_lock_steal=t")
    assert _helper_lock._owner_message({"run": {"playbooks": ["a.yml", "b.yml"]}}, "/run/l", 0).endswith(
        "(user ?, a.yml b.yml, play '?'), started ?; lock taken ?, its lease ends ?; holder PID ? here. Waited 0 s. "
        "Wait for that run (sglang_server_lock_wait), or, if it is dead (killed on another machine), take the lock "
        "over with -e sglang_server_lock_steal=?")


def test_a_lock_held_before_its_owner_is_written(lock, tmp_path):
    os.makedirs(os.path.dirname(lock.path))
    fd = os.open(lock.path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rc, out = acquire(lock)
        assert rc == 2 and out["owner"] == {}
        assert out["message"] == ("the lifecycle lock %s is held, and its owner is not written (yet): empty; "
                                  "waited 0 s" % lock.path)
        os.write(fd, b"half a json {")
        rc, out = acquire(lock)
        assert out["owner"] == {"_unreadable": "half a json {"}
        assert "owner is not written (yet): half a json {;" in out["message"]
    finally:
        os.close(fd)


def record_forks(monkeypatch):
    """The helper's os.fork, recording each child's PID (in the parent) in the list returned."""
    forked, fork = [], os.fork

    def recording_fork():
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(_helper_lock.os, "fork", recording_fork)
    return forked


def test_a_holder_that_cannot_start_fails_the_acquire_and_holds_nothing(lock, monkeypatch):
    monkeypatch.setattr(_helper_lock.sys, "executable", "/nonexistent/python3")
    forked = record_forks(monkeypatch)
    rc, out = acquire(lock)
    assert rc == 1 and out == {"acquired": False, "owner": {}, "waited_s": 0.0,
                               "message": "the lock holder process did not start"}  # waited for no lock
    assert flock_free(lock.path)
    assert len(forked) == 1
    with pytest.raises(ChildProcessError):  # the child whose exec failed was reaped
        os.waitpid(forked[0], os.WNOHANG)


def test_a_holder_that_hangs_before_it_runs_is_ended_and_the_acquire_fails(lock, monkeypatch, tmp_path):
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    monkeypatch.setattr(_helper_lock.sys, "executable", str(hang))
    monkeypatch.setattr(_helper_lock, "HOLDER_START_S", 0.3)
    forked = record_forks(monkeypatch)
    start = time.monotonic()
    rc, out = acquire(lock)
    assert rc == 1 and out["message"] == "the lock holder process did not start"
    assert 0.3 <= time.monotonic() - start < 5
    assert flock_free(lock.path)
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(forked[0], os.WNOHANG)


def test_a_holder_has_ten_seconds_to_start():
    assert _helper_lock.HOLDER_START_S == 10


def test_release_when_a_waiting_run_takes_the_lock_the_moment_the_holder_exits(lock, monkeypatch):
    _rc, first = acquire(lock)
    end_holder = _helper_lock._end_holder
    taken = {}

    def end_then_next_run_takes_it(owner):
        signalled = end_holder(owner)
        wait_gone(owner["holder_pid"])
        taken["fd"] = os.open(lock.path, os.O_RDWR)  # the next run's acquire, between our exit and our flock
        fcntl.flock(taken["fd"], fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(taken["fd"], b'{"token": "next-run"}\n', 0)
        return signalled

    monkeypatch.setattr(_helper_lock, "_end_holder", end_then_next_run_takes_it)
    try:
        start = time.monotonic()
        rc, out = lock("release", "--token", first["token"], "--wait", "5")
        assert rc == 0 and out == {"released": True, "owner": first["owner"]}
        assert time.monotonic() - start < 2  # not the whole --wait
        with open(lock.path) as handle:
            assert json.loads(handle.read().splitlines()[0]) == {"token": "next-run"}  # the next run's owner stays
        assert not flock_free(lock.path)
    finally:
        os.close(taken["fd"])


def test_release_gives_up_when_the_holder_does_not_exit(lock, monkeypatch):
    _rc, first = acquire(lock)
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda owner: False)
    rc, out = lock("release", "--token", first["token"], "--wait", "0.2")
    assert rc == 1 and out == {"released": False, "owner": first["owner"], "reason": "the holder did not exit"}


def test_hold_says_it_runs_then_holds_until_its_lease_ends(monkeypatch):
    """In-process (the tests above run it as the real holder process, which mutation testing cannot see)."""
    read, write = os.pipe()
    slept = []
    now = [1000.0]

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(_helper_lock.time, "time", lambda: now[0])
    monkeypatch.setattr(_helper_lock.time, "sleep", sleep)
    opts = type("Opts", (), {"ready_fd": write, "until": 1000.0 + 120.5})
    assert _helper_lock._lock_hold(opts) == 0
    assert os.read(read, 10) == b"ok"  # and nothing more: the end was closed
    assert os.read(read, 10) == b""
    assert slept == [60, 60, 0.5]  # to the end of the lease, not a second less
    os.close(read)


def test_hold_with_its_lease_over_returns_at_once(monkeypatch):
    read, write = os.pipe()
    monkeypatch.setattr(_helper_lock.time, "sleep", lambda seconds: pytest.fail("slept"))
    opts = type("Opts", (), {"ready_fd": write, "until": time.time() - 1})
    assert _helper_lock._lock_hold(opts) == 0
    os.close(read)


def test_status_without_a_lock_file(lock):
    assert lock("status") == (0, {"held": False, "owner": {}})


@pytest.mark.parametrize("text, owner", [
    (None, {}), ("", {}), ("  \n", {}), ('{"token": "a"}', {"token": "a"}),
    ("[1, 2]", {"_unreadable": "[1, 2]"}), ("x" * 300, {"_unreadable": "x" * 200}),
])
def test_read_owner(tmp_path, text, owner):
    path = tmp_path / "lock"
    if text is not None:
        path.write_text(text)
    assert _helper_lock._read_owner(str(path)) == owner


@pytest.mark.parametrize("owner", [
    {}, {"holder_pid": 1, "token": "t"}, {"holder_pid": "12", "token": "t"}, {"holder_pid": 12, "token": ""},
    {"holder_pid": 999999999, "token": "t"},
])
def test_is_holder_refuses_what_is_not_a_live_holder(owner):
    assert _helper_lock._is_holder(owner) is False


def test_is_holder_refuses_a_reused_pid(monkeypatch):
    # the PID now runs something else, or another holder (another token)
    argvs = {7: b"/usr/bin/python3\0/x\0lock\0hold\0--token\0other\0",
             8: b"sshd\0-D\0", 9: b"/usr/bin/python3\0/x\0lock\0hold\0--token\0"}
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: argvs[pid])
    assert [_helper_lock._is_holder({"holder_pid": pid, "token": "mine"}) for pid in (7, 8, 9)] == [False] * 3
    argvs[7] = b"/usr/bin/python3\0/x\0lock\0hold\0--token\0mine\0--until\0"
    assert _helper_lock._is_holder({"holder_pid": 7, "token": "mine"}) is True


def test_is_holder_never_names_init_a_pid_that_is_not_a_number_or_an_empty_token(monkeypatch):
    # every PID "is" a holder of token mine here: only the owner's own fields can refuse
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: b"/usr/bin/python3\0/x\0lock\0hold\0--token\0mine\0")
    assert _helper_lock._is_holder({"holder_pid": 12, "token": "mine"}) is True
    for owner in ({"holder_pid": 1, "token": "mine"}, {"holder_pid": 0, "token": "mine"},
                  {"holder_pid": "12", "token": "mine"}, {"holder_pid": 12.0, "token": "mine"},
                  {"holder_pid": 12, "token": ""}, {"holder_pid": 12}, {"token": "mine"}):
        assert _helper_lock._is_holder(owner) is False, owner
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: b"/usr/bin/python3\0/x\0lock\0status\0--token\0mine\0")
    assert _helper_lock._is_holder({"holder_pid": 12, "token": "mine"}) is False  # not `hold`


def test_end_holder_of_a_holder_that_just_exited(monkeypatch):
    monkeypatch.setattr(_helper_lock, "_is_holder", lambda owner: True)
    monkeypatch.setattr(_helper_lock.os, "kill", lambda pid, sig: raising(ProcessLookupError()))
    assert _helper_lock._end_holder({"holder_pid": 12, "token": "t"}) is False


def test_defaults(monkeypatch):
    seen = {}
    monkeypatch.setattr(_helper_lock, "_lock_acquire", lambda opts: seen.update(vars(opts)) or 0)
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "lock", "acquire", "--owner-json", "{}"])
    assert _helper_cli.main() == 0
    assert seen == {"action": "acquire", "owner_json": "{}", "ttl": 3600, "wait": 0, "steal": "",
                    "path": "/run/gpuserve/sglang-lifecycle.lock", "interval": 0.5}
    monkeypatch.setattr(_helper_lock, "_lock_release", lambda opts: seen.update(vars(opts)) or 0)
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "lock", "release", "--token", "t"])
    _helper_cli.main()
    assert seen["wait"] == 10 and seen["token"] == "t"


@pytest.mark.parametrize("stat, cmdline, gone", [
    (None, None, True),                                                  # no such PID
    (b"77 (python3) Z 1 77", b"", True),                                 # a zombie: its files are closed
    (b"77 (python3) X 1 77", b"", True),
    (b"77 (python3) R 1 77", b"", False),                                # exiting, files maybe still open
    (b"77 (python3) S 1 77", b"python3\0gpuserve-sglang\0lock\0hold\0--token\0abc\0", False),  # our holder
    (b"77 (sshd) S 1 77", b"sshd\0-D\0", True),                          # the PID reused by another program
    (b"77 (python3", b"x\0", True),                                     # a stat that cannot be read
])
def test_holder_gone(monkeypatch, stat, cmdline, gone):
    def read(pid, name):
        assert pid == 77
        value = {"stat": stat, "cmdline": cmdline}[name]
        if value is None:
            raise FileNotFoundError(name)
        return value

    monkeypatch.setattr(_helper_lock, "_read", read)
    assert _helper_lock._holder_gone({"holder_pid": 77, "token": "abc"}) is gone


def test_holder_gone_judges_the_one_cmdline_it_read(monkeypatch):
    """An exiting holder: its cmdline reads as the holder's, then empty once its memory is gone, while its files (the
    flock) may still be open. Read once, it is still the holder: not gone (a second read took it for another
    program, and release then left the owner in the file)."""
    reads = {"stat": [b"77 (python3) S 1 77"], "cmdline": [b"python3\0-c\0x\0lock\0hold\0--token\0abc\0", b""]}
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: reads[name].pop(0))
    assert _helper_lock._holder_gone({"holder_pid": 77, "token": "abc"}) is False
    assert reads == {"stat": [], "cmdline": [b""]}


@pytest.mark.parametrize("cmdline", [b"python3\0-c\0x\0lock\0hold\0--token\0abc\0", b"sshd\0-D\0"])
def test_holder_gone_without_a_token_takes_any_live_program_for_another(monkeypatch, cmdline):
    reads = {"stat": b"77 (python3) S 1 77", "cmdline": cmdline}
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: reads[name])
    assert _helper_lock._holder_gone({"holder_pid": 77}) is True
    assert _helper_lock._holder_gone({"holder_pid": 77, "token": ""}) is True


@pytest.mark.parametrize("pid", [None, "77", 0, 1, -1])
def test_holder_gone_never_for_a_pid_that_is_not_one(monkeypatch, pid):
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: pytest.fail("read /proc for %r" % pid))
    assert _helper_lock._holder_gone({"holder_pid": pid, "token": "abc"}) is False


def main(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "lock"] + list(argv))
    return _helper_cli.main()


# ------------------------------------------------------------------------------------------------ command line

@pytest.mark.parametrize("argv, names", [
    ([], "action"),
    (["acquire"], "--owner-json"),
    (["release"], "--token"),
    (["hold", "--token", "t", "--until", "1"], "--ready-fd"),
    (["hold", "--ready-fd", "3", "--until", "1"], "--token"),
    (["hold", "--ready-fd", "3", "--token", "t"], "--until"),
])
def test_each_required_argument_is_required(monkeypatch, capsys, argv, names):
    with pytest.raises(SystemExit) as exc:
        main(monkeypatch, *argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("usage: gpuserve-sglang lock")
    assert "the following arguments are required: " + names in err


def test_hold_as_the_holder_runs_it(monkeypatch):
    """`lock hold` parsed by main, as _spawn_holder execs it: says ok on its fd, and returns once its lease is over."""
    read_end, write_end = os.pipe()
    # its lease (1.5 s after the epoch) is long over: a hold that sleeps at all fails here, never hangs
    monkeypatch.setattr(_helper_lock.time, "sleep", lambda seconds: pytest.fail("held past its lease: slept %r" % seconds))
    try:
        rc = main(monkeypatch, "hold", "--ready-fd", str(write_end), "--token", "t0k", "--until", "1.5")
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


def fake_child(monkeypatch):
    """_spawn_holder with fork() answering 0 (this process plays the child) and the child's system calls faked.
    Installed inside the test body, right before the call: pytest's own output capture uses os.dup2 between the
    phases of a test."""
    calls = []

    def execv(path, argv):
        calls.append(("execv", path, argv))
        raise OSError("exec refused (test)")

    def _exit(code):
        raise ChildExit(code)

    monkeypatch.setattr(_helper_lock.os, "fork", lambda: 0)
    monkeypatch.setattr(_helper_lock.os, "setsid", lambda: calls.append(("setsid",)))
    monkeypatch.setattr(_helper_lock.os, "dup2", lambda fd, target: calls.append(("dup2", target)))
    monkeypatch.setattr(_helper_lock.os, "closerange", lambda low, high: calls.append(("closerange", low, high)))
    monkeypatch.setattr(_helper_lock.os, "set_inheritable", lambda fd, flag: calls.append(("inheritable", fd, flag)))
    monkeypatch.setattr(_helper_lock.os, "execv", execv)
    monkeypatch.setattr(_helper_lock.os, "_exit", _exit)
    return calls


@pytest.mark.parametrize("lock_fd", [3, None])  # 3: right after stdio, an empty range to skip; None: any
def test_the_child_leaves_the_callers_session_and_stdio_then_execs_the_holder(monkeypatch, lock_fd):
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        child = fake_child(monkeypatch)
        with pytest.raises(ChildExit) as exc:
            _helper_lock._spawn_holder(lock_fd or fd, "t0k", 1234.56789)
        monkeypatch.undo()
    finally:
        os.close(fd)
    lock_fd = lock_fd or fd
    assert exc.value.code == 127  # the exec failed: the child ends, with the shell's "cannot run" status
    assert child[0] == ("setsid",)
    assert child[1:4] == [("dup2", 0), ("dup2", 1), ("dup2", 2)]
    name, path, argv = child[-1]
    assert (name, path) == ("execv", sys.executable)
    assert argv[1:] == ["-c", HOLDER_CODE, "lock", "hold", "--ready-fd", argv[6], "--token", "t0k",
                        "--until", "1234.568"]
    ready = int(argv[6])
    assert child[-3:-1] == [("inheritable", lock_fd, True), ("inheritable", ready, True)]
    # every other descriptor is closed: all but stdio, the lock's and the ready pipe's, up to the system's limit,
    # never with an empty range (os.closerange(n, n) may close everything from n on)
    ranges = child[4:-3]
    assert all(name == "closerange" and low < high for name, low, high in ranges), ranges
    closed, limit = set(), min(os.sysconf("SC_OPEN_MAX"), 4096)  # 1024 under ansible-test units
    for _name, low, high in ranges:
        closed.update(range(low, min(high, limit)))
    assert lock_fd < ready and ranges[-1] == ("closerange", ready + 1, os.sysconf("SC_OPEN_MAX"))
    assert closed == set(range(3, limit)) - {lock_fd, ready}


@pytest.mark.parametrize("pid, killed", [(1, []), (2, [2]), (4242, [4242])])
def test_a_holder_that_does_not_start_is_killed_but_never_pid_0_or_1(monkeypatch, pid, killed):
    signalled, reaped = [], []
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        fake_child(monkeypatch)  # a mutant that runs the child branch here only records and raises
        monkeypatch.setattr(_helper_lock.os, "fork", lambda: pid)  # the parent side; the child never runs
        monkeypatch.setattr(_helper_lock.os, "kill", lambda p, sig: signalled.append(p))
        monkeypatch.setattr(_helper_lock.os, "waitpid", lambda p, flags: reaped.append((p, flags)) or (p, 0))
        started = _helper_lock._spawn_holder(fd, "t0k", 1.0)
        monkeypatch.undo()
        assert started is None  # nothing wrote "ok": the ready pipe just closed
    finally:
        os.close(fd)
    assert signalled == killed and reaped == [(pid, 0)]  # waited for, not polled (WNOHANG would leave a zombie)


# -------------------------------------------------------------------------------------------- owner and holder

def test_end_holder_signals_nothing_that_is_not_a_live_holder(monkeypatch):
    monkeypatch.setattr(_helper_lock, "_is_holder", lambda owner: False)
    monkeypatch.setattr(_helper_lock.os, "kill", lambda pid, sig: pytest.fail("signalled %d" % pid))
    assert _helper_lock._end_holder({"holder_pid": 12, "token": "t"}) is False


def test_is_holder_and_holder_gone_read_pid_2_like_any_other(monkeypatch):
    reads = {"cmdline": b"/usr/bin/python3\0/x\0lock\0hold\0--token\0mine\0", "stat": b"2 (python3) S 1 2"}
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: reads[name])
    assert _helper_lock._is_holder({"holder_pid": 2, "token": "mine"}) is True
    assert _helper_lock._holder_gone({"holder_pid": 2, "token": "mine"}) is False
    reads["stat"] = b"2 (python3) Z 1 2"
    assert _helper_lock._holder_gone({"holder_pid": 2, "token": "mine"}) is True


@pytest.mark.parametrize("stat, gone", [
    (b"77 (a) S) Z 1 77", True),    # a comm with ') S' in it: the state is after the last ')'
    (b"77 (a) Z) S 1 77", False),
])
def test_holder_gone_reads_the_state_after_the_last_parenthesis(monkeypatch, stat, gone):
    reads = {"cmdline": b"python3\0gpuserve-sglang\0lock\0hold\0--token\0abc\0", "stat": stat}
    monkeypatch.setattr(_helper_lock, "_read", lambda pid, name: reads[name])
    assert _helper_lock._holder_gone({"holder_pid": 77, "token": "abc"}) is gone


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
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(_helper_lock.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(_helper_lock.time, "time", fake.time)
    monkeypatch.setattr(_helper_lock.time, "sleep", fake.sleep)
    return fake


def acquire_by_main(monkeypatch, capsys, path, *argv):
    rc = main(monkeypatch, "acquire", "--path", path, "--owner-json", json.dumps(BRIEF_RUN), *argv)
    return rc, json.loads(capsys.readouterr().out)


def test_a_steal_whose_holder_ignores_sigterm_gives_up_five_seconds_after_it(monkeypatch, capsys, clock, tmp_path):
    owner = {"token": "dead-run", "holder_pid": 4242, "run": BRIEF_RUN}
    path = tmp_path / "lock"
    path.write_text(json.dumps(owner))
    signalled = []
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: False)
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda o: signalled.append(o["holder_pid"]) or True)
    rc, out = acquire_by_main(monkeypatch, capsys, str(path), "--steal", "dead-run", "--interval", "0.5")
    assert rc == 2 and out["acquired"] is False
    assert out["waited_s"] == 5.0  # once: not extended again by every SIGTERM that does not end it
    assert len(signalled) == 11 and clock.slept == [0.5] * 10  # 0, 0.5 ... 5.0 s


def test_wait_zero_fails_at_the_first_look(monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": BRIEF_RUN}))
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: False)
    rc, out = acquire_by_main(monkeypatch, capsys, str(path))
    assert rc == 2 and out["waited_s"] == 0.0 and clock.slept == []


def test_the_wait_reported_is_rounded_to_a_tenth(monkeypatch, capsys, tmp_path):
    fake = Clock(mono=100.0, cost=0.17)
    monkeypatch.setattr(_helper_lock.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(_helper_lock.time, "sleep", fake.sleep)
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": BRIEF_RUN}))
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: False)
    rc, out = acquire_by_main(monkeypatch, capsys, str(path))
    assert rc == 2 and out["waited_s"] == 0.2  # 0.17 s


def test_waits_sleep_the_interval_then_only_what_is_left(monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": BRIEF_RUN}))
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: False)
    rc, out = acquire_by_main(monkeypatch, capsys, str(path), "--wait", "1.2", "--interval", "0.5")
    assert rc == 2 and clock.slept == [0.5, 0.5, 0.2] and out["waited_s"] == 1.2


def test_the_owner_written_and_the_wait_reported_exactly(monkeypatch, capsys, tmp_path):
    fake = Clock(mono=100.0, cost=0.17)  # every look at the clock costs 0.17 s
    monkeypatch.setattr(_helper_lock.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(_helper_lock.time, "time", fake.time)
    monkeypatch.setattr(_helper_lock.time, "sleep", fake.sleep)
    looks = iter([False, True])
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: next(looks))
    monkeypatch.setattr(_helper_lock, "_spawn_holder", lambda fd, token, until: 4343)
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "run": BRIEF_RUN}) + " " * 500)
    rc, out = acquire_by_main(monkeypatch, capsys, str(path), "--wait", "30", "--ttl", "60", "--interval", "0.05")
    assert rc == 0
    # start 100.17; the look after the failed flock 100.34; slept 0.05; waited read at 100.56 -> 0.39 -> 0.4
    assert out["waited_s"] == 0.4
    assert out["owner"]["expires"] == round(1796000000.12345 + 0.05 + 60, 3)
    assert out["owner"]["since"] == "2026-11-30T00:53:20Z"  # the fake clock's time, not the real one
    with open(path) as handle:
        assert json.loads(handle.read()) == out["owner"]  # the stale owner's longer text is gone


# ------------------------------------------------------------------------------------- release under the clock

def test_release_with_no_wait_left_fails_at_the_first_look(monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "mine", "holder_pid": 4242}))
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda owner: True)
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: False)
    monkeypatch.setattr(_helper_lock, "_holder_gone", lambda owner: False)
    rc = main(monkeypatch, "release", "--path", str(path), "--token", "mine", "--wait", "0")
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["reason"] == "the holder did not exit" and clock.slept == []


def test_a_lease_that_ends_exactly_now_has_not_ended(monkeypatch, capsys, clock, tmp_path):
    path = tmp_path / "lock"
    path.write_text(json.dumps({"token": "other", "holder_pid": 4242, "expires": clock.wall, "run": BRIEF_RUN}))
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: False)
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda owner: pytest.fail("ended a holder whose lease has not ended"))
    assert acquire_by_main(monkeypatch, capsys, str(path))[0] == 2
    clock.wall += 0.001
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda owner: True)
    rc, out = acquire_by_main(monkeypatch, capsys, str(path))
    assert rc == 2 and out["waited_s"] == 5.0  # ended: then up to 5 s for it to exit


@pytest.mark.parametrize("second_look, cleared", [(True, True), (False, False)])
def test_a_holder_that_exits_between_two_looks_is_released_and_cleared(monkeypatch, capsys, clock, tmp_path,
                                                                       second_look, cleared):
    """The flock was taken at the first look, the holder is gone at the next: it exited in between (the lock is
    ours to clear), or a waiting run took the lock the moment it was free (not ours to clear)."""
    path = tmp_path / "lock"
    owner = {"token": "mine", "holder_pid": 4242}
    path.write_text(json.dumps(owner) + "\n")
    looks = iter([False, second_look])
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda o: True)
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: next(looks))
    monkeypatch.setattr(_helper_lock, "_holder_gone", lambda o: True)
    rc = main(monkeypatch, "release", "--path", str(path), "--token", "mine")
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out == {"released": True, "owner": owner} and clock.slept == []
    assert path.read_text() == ("" if cleared else json.dumps(owner) + "\n")
    assert next(looks, "none left") == "none left"


def test_a_holder_that_exits_during_the_wait_is_released_and_cleared_after_one_interval(monkeypatch, capsys,
                                                                                        clock, tmp_path):
    path = tmp_path / "lock"
    owner = {"token": "mine", "holder_pid": 4242}
    path.write_text(json.dumps(owner) + "\n")
    looks = iter([False, True])
    monkeypatch.setattr(_helper_lock, "_end_holder", lambda o: True)
    monkeypatch.setattr(_helper_lock, "_try_flock", lambda fd: next(looks))
    monkeypatch.setattr(_helper_lock, "_holder_gone", lambda o: False)  # its PID still reads as running
    rc = main(monkeypatch, "release", "--path", str(path), "--token", "mine", "--interval", "0.25")
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out == {"released": True, "owner": owner} and clock.slept == [0.25]
    assert path.read_text() == ""
