"""What the two-host lab tests share: CT 104 on lab-pve4 and CT 102 on lab-pve2 (two of the lab's PVE hosts: lane
`fleet`, tests/lab/lanes.py), each with that host's SIMULATED GPUs 0-3, on the lab bridge; deployed by
deploy_eagle3.yml with the lane's overlay, hosts.yml (labutil.playbook adds it and --limit)."""
import datetime
import json
import os
import re

from gatewayutil import run
from labutil import finish, playbook

NODES = {"ct104": {"vmid": "104", "pve": "lab-pve4", "ip": "10.66.0.104"},
         "ct102": {"vmid": "102", "pve": "lab-pve2", "ip": "10.66.0.102"}}
MANIFEST = "/var/lib/gpuserve/sglang-manifest.json"


def on_pve(name, *argv, check=True, timeout=180):
    """A command on the PVE host of container name, as that host's sshd runs it (GPUSERVE_LAB_NODE)."""
    return run(*argv, check=check, timeout=timeout, env=dict(os.environ, GPUSERVE_LAB_NODE=NODES[name]["pve"]))


def in_ct(name, *argv, check=True):
    return on_pve(name, "/usr/sbin/pct", "exec", NODES[name]["vmid"], "--", *argv, check=check).stdout


def manifest(name):
    return json.loads(in_ct(name, "cat", MANIFEST))


def served_argv(name):
    return json.loads(in_ct(name, "cat", "/etc/gpuserve/sglang.args"))["argv"]


def arg(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def main_pid(name):
    return in_ct(name, "systemctl", "show", "-p", "MainPID", "--value", "sglang").strip()


def deploy(*extra, limit=1800, **evars):
    """deploy_eagle3.yml with the overlay; extra vars fleet_changes (every container), fleet_ct102_changes and any
    other given."""
    argv = (["-e", json.dumps(evars)] if evars else []) + list(extra)  # playbook(): the lane's overlay, --limit
    return finish(playbook("playbooks/deploy_eagle3.yml", *argv), limit=limit)


def first_failure(out):
    """The output from the first failed task on (the rollout summary at the end would hide it), or the tail."""
    at = out.find("fatal: [")
    return out[max(0, at - 1500):at + 3000] if at >= 0 else out[-4000:]


def journals(lines=80):
    """Each container's server journal (its last lines) for a failure message: the container is destroyed after."""
    out = []
    for name in NODES:
        res = on_pve(name, "/usr/sbin/pct", "exec", NODES[name]["vmid"], "--", "journalctl", "--no-pager", "-o",
                     "short-precise", "-n", str(lines), "-u", "sglang.service", check=False)
        out.append("--- %s: journalctl -u sglang.service (rc %s)\n%s%s" % (name, res.returncode, res.stdout,
                                                                            res.stderr))
    return "\n".join(out)


def recap(out, host):
    """(changed, failed) of host in the play recap."""
    found = re.findall(r"^%s\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)" % host, out, re.M)
    assert found, out[-3000:]
    return int(found[-1][0]), int(found[-1][1])


def epoch(iso):
    """A manifest time (UTC, written without its zone by now(utc=true)) as epoch seconds."""
    return datetime.datetime.fromisoformat(iso).replace(tzinfo=datetime.timezone.utc).timestamp()
