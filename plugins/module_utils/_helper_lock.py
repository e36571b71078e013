# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang lock: the container's lifecycle lock (one run at a time restarts the server), a flock handed to a
holder process that keeps it until release, its lease's end or its death.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package. The holder
runs the package again (HOLDER_CODE); /proc is read with _helper_env._read.
"""
import argparse
import fcntl
import json
import os
import secrets
import select
import signal
import sys
import time

from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_env import _read

# A program run without Ansible (systemd, the role's command tasks, an operator): it prints its JSON and runs its
# commands itself, with no AnsibleModule to log or run_command through.
# pylint: disable=ansible-bad-function


LOCK_PATH = "/run/gpuserve/sglang-lifecycle.lock"
HOLDER_START_S = 10  # a holder not running after this long is ended; the acquire fails


def _iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _read_owner(path):
    """The owner written into the lock file; {} when there is none; {"_unreadable": text} when it is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        owner = json.loads(text)
    except ValueError:
        owner = None
    return owner if isinstance(owner, dict) else {"_unreadable": text[:200]}


def _try_flock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holds_token(cmdline, token):
    """A /proc/PID/cmdline is our `lock hold` process of this token."""
    argv = cmdline.split(b"\0")
    return b"hold" in argv and b"--token" in argv and argv[argv.index(b"--token") + 1:][:1] == [token.encode()]


def _is_holder(owner):
    """The owner's holder PID is still our `lock hold` process of its token (not a PID reused since)."""
    pid, token = owner.get("holder_pid"), owner.get("token")
    if not isinstance(pid, int) or pid <= 1 or not token:
        return False
    try:
        cmdline = _read(pid, "cmdline")
    except OSError:
        return False
    return _holds_token(cmdline, token)


def _holder_gone(owner):
    """The owner's holder has exited, its files (and with them the flock) closed: no such PID, a zombie, or the
    PID reused by another program. An exiting holder whose files are still open reads as an empty cmdline, not
    yet as a zombie, so an empty cmdline alone proves nothing; and the cmdline is judged as it was read once here
    (a second read could find the exiting holder's empty one and take it for another program)."""
    pid, token = owner.get("holder_pid"), owner.get("token")
    if not isinstance(pid, int) or pid <= 1:
        return False
    try:
        state = _read(pid, "stat").rsplit(b")", 1)[1].split()[0]
        argv = _read(pid, "cmdline")
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X") or (argv != b"" and not (token and _holds_token(argv, token)))


def _end_holder(owner):
    """SIGTERM to the owner's holder when it is verifiably ours; True when signalled."""
    if not _is_holder(owner):
        return False
    try:
        os.kill(owner["holder_pid"], signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


def _owner_message(owner, path, waited):
    if not owner or "_unreadable" in owner:
        return ("the lifecycle lock %s is held, and its owner is not written (yet): %s; waited %.0f s"
                % (path, owner.get("_unreadable", "empty"), waited))
    run = owner.get("run") or {}
    return ("the lifecycle lock %s is held by another run: ansible-playbook PID %s on %s (user %s, %s, play %r), "
            "started %s; lock taken %s, its lease ends %s; holder PID %s here. Waited %.0f s. Wait for that run "
            "(sglang_server_lock_wait), or, if it is dead (killed on another machine), take the lock over with "
            "-e sglang_server_lock_steal=%s"
            % (path, run.get("pid", "?"), run.get("host", "?"), run.get("user", "?"),
               " ".join(run.get("playbooks") or []) or "playbook unknown", run.get("play", "?"),
               run.get("started", "?"), owner.get("since", "?"), owner.get("expires_at", "?"),
               owner.get("holder_pid", "?"), waited, owner.get("token", "?")))


# The holder is this helper's command line again, `lock hold ...`, in a new interpreter: python -c with the package
# root first on sys.path (sys.argv is then ['-c', 'lock', 'hold', ...], as main() reads it). /proc/PID/cmdline
# keeps `hold` and `--token TOKEN`, which _is_holder reads.
HOLDER_CODE = "import sys; sys.path.insert(0, %r); from %s._helper_cli import main; sys.exit(main())"
_PACKAGE = __name__.rpartition(".")[0]


def _package_root():
    """The folder this package is imported from: this file's, one folder up per component of its dotted name (the
    container's /usr/local/lib/gpuserve-sglang, a checkout's collections/, mutmut's mutants/)."""
    root = os.path.abspath(__file__)
    for _part in __name__.split("."):
        root = os.path.dirname(root)
    return root


def _spawn_holder(fd, token, until):
    """Fork a `lock hold` process that inherits fd (and with it the flock); returns its PID once it runs."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own session, no stdio of the caller (a pct exec waits for those to close)
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            # no other file of the caller's: a descriptor leaked into it (a flock(1)'s, a pipe) would live as
            # long as the lease. Only non-empty ranges: os.closerange(n, n) may close everything from n on.
            keep = sorted({2, fd, ready_w})
            for low, high in zip([n + 1 for n in keep], keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
                if low < high:
                    os.closerange(low, high)
            os.set_inheritable(fd, True)
            os.set_inheritable(ready_w, True)
            # fd stays open across the exec (inheritable) and is never touched again: holding it is the lock
            os.execv(sys.executable, [sys.executable, "-c", HOLDER_CODE % (_package_root(), _PACKAGE), "lock", "hold",
                                      "--ready-fd", str(ready_w), "--token", token, "--until", "%.3f" % until])
        finally:
            os._exit(127)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        started = bool(select.select([ready], [], [], HOLDER_START_S)[0]) and ready.read(2) == b"ok"
        # then its end closed (EOF): until then the holder still has the pipe, beside the lock, as its caller sees
        started = started and bool(select.select([ready], [], [], HOLDER_START_S)[0]) and ready.read(1) == b""
    if not started:  # its exec failed, or it hangs before it runs: end it, reap it
        if pid > 1:  # never 0 (this whole process group) or 1, whatever went wrong above
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
        return None
    return pid


def _lock_acquire(opts):
    os.makedirs(os.path.dirname(opts.path), exist_ok=True)
    fd = os.open(opts.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    start = time.monotonic()
    deadline = start + opts.wait
    ended = []
    try:
        while not _try_flock(fd):
            owner = _read_owner(opts.path)
            lease_over = isinstance(owner.get("expires"), (int, float)) and owner["expires"] < time.time()
            if ((opts.steal and owner.get("token") == opts.steal) or lease_over) and _end_holder(owner):
                if not ended:  # once: a holder that ignores SIGTERM must not keep this wait open for ever
                    deadline = max(deadline, time.monotonic() + 5)  # the holder's exit frees the lock within ms
                if owner not in ended:
                    ended.append(owner)
            now = time.monotonic()
            if now >= deadline:
                print(json.dumps({"acquired": False, "owner": owner, "waited_s": round(now - start, 1),
                                  "message": _owner_message(owner, opts.path, now - start)}))
                return 2
            time.sleep(min(opts.interval, deadline - now))
        waited = round(time.monotonic() - start, 1)
        stale = _read_owner(opts.path)  # left by a holder that died without release (killed, container reboot)
        now = time.time()
        token = secrets.token_hex(8)
        pid = _spawn_holder(fd, token, now + opts.ttl)
        if pid is None:
            print(json.dumps({"acquired": False, "owner": {}, "waited_s": waited,
                              "message": "the lock holder process did not start"}))
            return 1
        owner = {"token": token, "holder_pid": pid, "since": _iso(now), "expires": round(now + opts.ttl, 3),
                 "expires_at": _iso(now + opts.ttl), "run": json.loads(opts.owner_json)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        os.fsync(fd)
    finally:
        os.close(fd)  # the holder's copy of the open file keeps the lock
    print(json.dumps({"acquired": True, "token": token, "owner": owner, "waited_s": waited,
                      "cleared": stale or None, "ended": ended}))
    return 0


def _lock_release(opts):
    owner = _read_owner(opts.path)
    if owner.get("token") != opts.token:
        print(json.dumps({"released": False, "owner": owner,
                          "reason": "the lock is not held with this token (its lease ended, or it was taken over)"}))
        return 0
    _end_holder(owner)
    fd = os.open(opts.path, os.O_RDWR | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + opts.wait
        locked = _try_flock(fd)
        while not locked:
            if _holder_gone(owner):
                # Gone means its files are closed. It may have exited just after the look above: look once more.
                # Still taken: a waiting run took it the moment it was free; that run's owner is not ours to clear.
                locked = _try_flock(fd)
                break
            if time.monotonic() >= deadline:
                print(json.dumps({"released": False, "owner": owner, "reason": "the holder did not exit"}))
                return 1
            time.sleep(opts.interval)
            locked = _try_flock(fd)
        if locked and _read_owner(opts.path).get("token") == opts.token:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    print(json.dumps({"released": True, "owner": owner}))
    return 0


def _lock_status(opts):
    try:
        fd = os.open(opts.path, os.O_RDONLY)  # flock needs no write access; nothing is exec'd here
    except FileNotFoundError:
        print(json.dumps({"held": False, "owner": {}}))
        return 0
    try:
        held = not _try_flock(fd)
    finally:
        os.close(fd)
    print(json.dumps({"held": held, "owner": _read_owner(opts.path) if held else {}}))
    return 0


def _lock_hold(opts):
    os.write(opts.ready_fd, b"ok")
    os.close(opts.ready_fd)
    while True:  # SIGTERM's default action ends it; the flock goes with it
        left = opts.until - time.time()
        if left <= 0:
            return 0
        time.sleep(min(left, 60))


def cmd_lock():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang lock")
    sub = parser.add_subparsers(dest="action", required=True)
    acquire = sub.add_parser("acquire")
    acquire.add_argument("--owner-json", required=True)
    acquire.add_argument("--ttl", type=float, default=3600)
    acquire.add_argument("--wait", type=float, default=0)
    acquire.add_argument("--steal", default="")
    release = sub.add_parser("release")
    release.add_argument("--token", required=True)
    release.add_argument("--wait", type=float, default=10)
    status = sub.add_parser("status")
    hold = sub.add_parser("hold")
    hold.add_argument("--ready-fd", type=int, required=True)
    hold.add_argument("--token", required=True)
    hold.add_argument("--until", type=float, required=True)
    for each in (acquire, release, status, hold):
        each.add_argument("--path", default=LOCK_PATH)
        each.add_argument("--interval", type=float, default=0.5)
    opts = parser.parse_args(sys.argv[2:])
    return {"acquire": _lock_acquire, "release": _lock_release, "status": _lock_status,
            "hold": _lock_hold}[opts.action](opts)
