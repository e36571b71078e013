"""The lifecycle lock as a run takes and releases it (plugins/module_utils/_lifecycle_lock.py): one test per
decision, with the helper's answers faked (its own tests: test_helper_lock.py)."""
import json

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _lifecycle_lock as ll

OWNER = {"host": "laptop-1", "pid": 4242, "user": "ops", "playbooks": ["playbooks/restart_server.yml"]}
HOLDER = {"token": "aaaa", "since": "2026-12-06T05:00:00Z", "run": {"host": "laptop-1", "pid": 77}}
TAKEN = (0, json.dumps({"acquired": True, "token": "bbbb", "owner": {}, "cleared": None}), "")
BUSY = (2, json.dumps({"acquired": False, "owner": HOLDER, "message": "held by ansible-playbook PID 77 on laptop-1"}), "")


def helper(*answers):
    """run(argv) answering each call in turn; the argvs it was called with in .calls."""
    queue = list(answers)

    def run(argv):
        run.calls.append(argv)
        return queue.pop(0)
    run.calls = []
    return run


def take(run, gone=lambda other: False, held=None, steal=""):
    return ll.acquire(run, gone, held or {}, "main", OWNER, "/h", "/run/lock", 3600, 30, steal)


def test_a_free_lock_is_taken_at_once_naming_this_run():
    run = helper(TAKEN)
    assert take(run) == ({"run": OWNER, "token": "bbbb", "scope": "main"}, None)
    assert run.calls == [["/usr/bin/python3", "/h", "lock", "acquire", "--path", "/run/lock", "--ttl", "3600",
                          "--owner-json", json.dumps(OWNER), "--wait", "0"]]


def test_a_lock_this_run_holds_is_kept_and_nothing_runs():
    run = helper()
    held = {"run": OWNER, "token": "bbbb", "scope": "main"}
    assert ll.acquire(run, None, held, "restart", OWNER, "/h", "/run/lock", 3600, 30) == (held, None)
    assert run.calls == []


def test_a_live_holder_is_waited_for():
    run = helper(BUSY, TAKEN)
    assert take(run)[0]["token"] == "bbbb"
    assert run.calls[1][-2:] == ["--wait", "30"]


def test_the_operators_steal_token_goes_with_both_tries():
    run = helper(BUSY, TAKEN)
    take(run, steal="cccc")
    assert run.calls[0][-2:] == ["--steal", "cccc"] and run.calls[1][-4:] == ["--wait", "30", "--steal", "cccc"]


def test_a_holder_of_this_controller_that_is_gone_is_taken_over():
    asked = []
    run = helper(BUSY, TAKEN)
    take(run, gone=lambda other: asked.append(other) or True)
    assert asked == [HOLDER["run"]] and run.calls[1][-2:] == ["--steal", "aaaa"]


def test_a_holder_still_there_after_the_wait_fails_the_run_naming_it():
    with pytest.raises(ll.LockError, match="held by ansible-playbook PID 77 on laptop-1"):
        take(helper(BUSY, BUSY))


def test_a_helper_that_fails_otherwise_says_why():
    with pytest.raises(ll.LockError, match="No such file"):
        take(helper((1, "", "python3: can't open file '/h': [Errno 2] No such file or directory\n")))
    with pytest.raises(ll.LockError, match="the lock holder process did not start"):
        take(helper((1, json.dumps({"acquired": False, "message": "the lock holder process did not start"}), "")))


def test_a_lock_left_by_a_run_that_is_gone_is_reported_cleared():
    cleared = {"token": "dddd", "since": "2026-12-06T04:00:00Z", "run": {"host": "laptop-1", "pid": 99}}
    run = helper((0, json.dumps({"acquired": True, "token": "bbbb", "cleared": cleared}), ""))
    assert take(run)[1] == cleared
    assert ll.cleared_message(cleared) == (
        "cleared the lifecycle lock of a run that is gone: ansible-playbook PID 99 on laptop-1 (taken "
        "2026-12-06T04:00:00Z)")
    assert ll.cleared_message({}) == "cleared the lifecycle lock of a run that is gone: ansible-playbook PID ? on ? (taken ?)"


def test_the_scope_that_took_the_lock_releases_it():
    run = helper((0, json.dumps({"released": True}), ""))
    held = {"run": OWNER, "token": "bbbb", "scope": "main"}
    assert ll.release(run, held, "main", "/h", "/run/lock") == ({"run": OWNER, "token": "", "scope": ""}, True)
    assert run.calls == [["/usr/bin/python3", "/h", "lock", "release", "--path", "/run/lock", "--token", "bbbb"]]


@pytest.mark.parametrize("held", [{}, None, {"run": OWNER, "token": "", "scope": ""},
                                  {"run": OWNER, "token": "bbbb", "scope": "main"}])
def test_another_scope_or_no_lock_releases_nothing(held):
    run = helper()
    assert ll.release(run, held, "restart", "/h", "/run/lock") == (dict(held or {}), False)
    assert run.calls == []


def test_a_release_that_fails_says_why():
    with pytest.raises(ll.LockError, match="the holder did not exit"):
        ll.release(helper((1, json.dumps({"released": False, "reason": "the holder did not exit"}), "")),
                   {"token": "bbbb", "scope": "main"}, "main", "/h", "/run/lock")
