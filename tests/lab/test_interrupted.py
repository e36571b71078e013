"""Interrupted runs: the controller dies, or loses its connection, in the middle of a restart;
the next deploy_eagle3.yml converges to a verified, serving server, and no state file is half-written.

Each case starts playbooks/restart_server.yml, reads its output until the task banner of the chosen point, then
SIGKILLs the whole ansible-playbook process group (its workers and their pct/SSH children with it), cuts the
SSH connections it has open to the lab "PVE host" once, mid-task, or stops the container behind its back. Then
playbooks/deploy_eagle3.yml runs.
Asserted after each: the deploy passed; the unit runs the process the manifest verified; every JSON state file
(manifest, history) parses and the last-good copies match the live config; the lock is free.
GPUSERVE_FAULTS_REPORT=PATH appends one JSON line per case (point, the interrupted run's end, the next run's
result and time to serving). Needs a deployed lab (scripts/deploy).
"""
import json
import os
import signal
import subprocess
import threading
import time

import pytest

import lanes
from labutil import HELPER, HOST, LAB_MARKS, NODE, VMID, ct_status, finish, node_env, pct, playbook, wait_ready

pytestmark = LAB_MARKS

RESTART = "playbooks/restart_server.yml"
DEPLOY = "playbooks/deploy_eagle3.yml"
STATE_DIR = "/var/lib/gpuserve"
LAB_SSHD_PORT = lanes.ssh_port(NODE)  # the lane's "PVE host": its own sshd (tests/lab/lanes.py)

# point, the task whose banner marks it, seconds after the banner, how to interrupt: every one runs in CI (lane
# faults, tests/lab/lanes.py).
CASES = [pytest.param(*case, id=case[0]) for case in [
    # one node: the stop, the release and gate and the start are one call on the PVE host
    ("in the call that stops, releases and starts", "Lifecycle | release the GPUs", 0.3, "kill"),
    ("after the start, before readiness", "Lifecycle | wait for /health_generate", 0.3, "kill"),
    ("while writing the manifest", "Lifecycle | write the deployment manifest", 0.2, "kill"),
    ("SSH cut once during the readiness wait", "Lifecycle | wait for /health_generate", 0.5, "cut"),
    ("the container stopped behind our back during the readiness wait", "Lifecycle | wait for /health_generate",
     0.5, "ct-stop"),
]]


@pytest.fixture
def served(lab_up):
    if pct("systemctl", "is-active", "sglang.service", check=False).stdout.strip() != "active":
        pytest.fail("sglang.service is not active: run scripts/deploy first", pytrace=False)


def read_until(proc, banner, limit=300):
    """The playbook's output up to and including the banner line of the task `banner` (TASK [role : NAME])."""
    lines = []
    timer = threading.Timer(limit, proc.kill)  # a banner that never comes ends the run, and readline with it
    timer.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("TASK [") and (" : %s" % banner) in line:
                return "".join(lines)
    finally:
        timer.cancel()
    pytest.fail("the run ended before task %r:\n%s" % (banner, "".join(lines)[-3000:]), pytrace=False)


def lab_sshd_sessions():
    """PIDs of the per-connection sshd processes of the lane's "PVE host" (children of its sshd)."""
    out = subprocess.run(["ss", "-Hltnp", "sport = :%d" % LAB_SSHD_PORT], capture_output=True, text=True,
                         check=True).stdout
    masters = {int(part.split("=")[1]) for part in out.replace(",", " ").split() if part.startswith("pid=")}
    assert masters, "no sshd listens on port %d: %r" % (LAB_SSHD_PORT, out)
    children = subprocess.run(["pgrep", "-P", ",".join(str(p) for p in sorted(masters))], capture_output=True,
                              text=True, check=False).stdout.split()
    return [int(pid) for pid in children]


def interrupt(proc, how):
    """kill: SIGKILL to the run's process group; cut: SIGKILL to the SSH sessions serving it; ct-stop: `pct stop`
    of the container (lab pct: lxc-stop). Except for kill, the run then ends by itself."""
    if how == "kill":
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        return "killed", out
    if how == "cut":
        sessions = lab_sshd_sessions()
        assert sessions, "the run has no SSH session open to cut"
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)
    else:
        subprocess.run(["/usr/sbin/pct", "stop", VMID], check=True, capture_output=True, timeout=120, env=node_env())
    rc, out = finish(proc)
    # the run's own account: the task that failed and what its rollback did
    said = [line.strip() for line in out.splitlines()
            if line.strip().startswith(("sglang_server: the restart failed at", "Rollback: "))]
    said = said[-2:] or [line.strip()[:200] for line in out.splitlines() if "[ERROR]:" in line][:1]
    return "rc %d%s" % (rc, (": " + " / ".join(said)) if said else ""), out


def unit(prop):
    return pct("systemctl", "show", "sglang.service", "--property=" + prop, "--value").stdout.strip()


def check_state_files():
    """Every JSON state file parses; the last-good copies are the live config (what a rollback would restore)."""
    names = pct("find", STATE_DIR, "-name", "*.json", "-type", "f").stdout.split()
    assert "%s/sglang-manifest.json" % STATE_DIR in names, names
    for name in names:
        text = pct("cat", name).stdout
        try:
            json.loads(text)
        except ValueError:
            pytest.fail("%s is not whole JSON: %r" % (name, text[-500:]), pytrace=False)
    for name, live in (("sglang.args", "/etc/gpuserve/sglang.args"),
                       ("sglang.service", "/etc/systemd/system/sglang.service")):
        kept = pct("cat", "%s/last-good/%s" % (STATE_DIR, name)).stdout
        assert kept and kept == pct("cat", live).stdout, "last-good/%s differs from %s" % (name, live)
    # Ansible's copy and `gpuserve-sglang config` write a temporary file beside the destination, then rename it
    stray = pct("find", STATE_DIR, "/etc/gpuserve", "(", "-name", ".ansible_tmp*", "-o", "-name", "*.gpuserve-tmp",
                ")").stdout.split()
    assert stray == [], "temporary files left beside the state: %s" % stray
    return json.loads(pct("cat", "%s/sglang-manifest.json" % STATE_DIR).stdout)


def report(row):
    path = os.environ.get("GPUSERVE_FAULTS_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")


@pytest.mark.parametrize("point, banner, after, how", CASES)
def test_an_interrupted_restart_converges_on_the_next_deploy(served, point, banner, after, how):
    proc = playbook(RESTART)
    before = read_until(proc, banner)
    time.sleep(after)
    ended, rest = interrupt(proc, how)
    if how == "ct-stop":  # the run says what happened, not just that a check failed
        assert "container %s is not running (status: stopped on " % VMID in rest, rest[-3000:]
    ct = ct_status()
    unit_after = ("%s (%s)" % (unit("ActiveState"), unit("SubState")) if ct == "status: running"
                  else "container " + ct.split(":", 1)[1].strip())

    start = time.monotonic()
    rc, out = finish(playbook(DEPLOY))
    to_serving = time.monotonic() - start
    assert rc == 0, (before + rest)[-2000:] + "\n--- next deploy ---\n" + out[-3000:]

    assert wait_ready(60)["ready"] is True
    manifest = check_state_files()
    if how == "ct-stop" and str(manifest["main_pid"]) != unit("MainPID"):
        # The container's boot started the server from the files the manifest verified (the restart was of the same
        # config): the deploy takes it as the verified config with no restart, and the manifest stays the record of
        # the start that verified those files.
        assert "no restart: the running server matches its verified manifest" in out, out[-3000:]
    else:
        assert str(manifest["main_pid"]) == unit("MainPID"), (manifest["main_pid"], unit("MainPID"))
    status = json.loads(pct("/usr/bin/python3", HELPER, "lock", "status").stdout)
    assert status == {"held": False, "owner": {}}, status
    recap = [line for line in out.splitlines() if line.startswith(HOST)]
    report({"point": point, "interrupted_run": ended, "unit_after": unit_after,
            "next_deploy": "rc 0, " + " ".join(recap[-1].split()[2:4]) if recap else "rc 0",
            "to_serving_s": round(to_serving, 1)})
