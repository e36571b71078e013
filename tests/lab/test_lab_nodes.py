"""The lab's PVE hosts on one machine (docs/lab.md, "Several PVE hosts on one machine"): node lab-pve2 answers on
its own sshd, each node's pct refuses the other node's container as a real PVE node does, each node's SIMULATED
nvidia-smi counts only holders of its own GPU files, and fakepve serves every node, a container it creates on
lab-pve2 getting that node's GPU files.

CT 192 is created on lab-pve2 through fakepve's API for this module and destroyed afterwards; CT 101 and its server
are not touched (only read). Runs in lane `fleet` (tests/lab/lanes.py), before its package takes lab-pve2 and
lab-pve4: the GPU-holder test holds and reads GPUs of those two nodes only, which no other lane's server uses.
Needs `lab/lab up`.
"""
import os
import subprocess
import sys
import time

import pytest

import lanes
from labutil import LAB_MARKS, ROOT

pytestmark = LAB_MARKS

sys.path.insert(0, os.path.join(ROOT, "lab"))
import pve_api  # noqa: E402

STATE = "/var/lib/gpuserve-lab"
NODE1, NODE2, NODE4 = "lab-pve", "lab-pve2", "lab-pve4"
GPUS = {n: lanes.node_dir(n) + "/gpus" for n in lanes.NODES}
SSH_PORT = {n: str(lanes.ssh_port(n)) for n in lanes.NODES}
SSH_ADDR = {n: lanes.ssh_addr(n) for n in lanes.NODES}
CT = "192"  # on lab-pve2; no other lab test uses it
VMID = "101"  # the lab's CT on lab-pve (scripts/deploy's), only read here
TEMPLATE = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
LAB = os.path.join(ROOT, "lab", "lab")


def run(*argv, node=None, check=False, timeout=120):
    """A command on the lab host as NODE (GPUSERVE_LAB_NODE, as the node's sshd sets it; None: the first node)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPUSERVE_LAB_NODE", "GPUSERVE_PVE_NODE")}
    if node:
        env["GPUSERVE_LAB_NODE"] = node
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, env=env, timeout=timeout)


def ssh(node, command):
    """COMMAND through the node's lab sshd (the inventory's way in)."""
    return run("ssh", "-p", SSH_PORT[node], "-i", STATE + "/ssh/id_ed25519", "-o", "BatchMode=yes",
               "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
               "root@" + SSH_ADDR[node], command, timeout=60)


def pct(node, *args):
    return run("/usr/sbin/pct", *args, node=node)


def used(node, gpu):
    res = run("/usr/local/bin/nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i",
              str(gpu), node=node, check=True)
    return int(res.stdout)


def inode(path):
    return os.stat(path).st_ino


@pytest.fixture(scope="module")
def api():
    prox, node = pve_api.api(STATE + "/pve")
    assert node == NODE1
    return prox


@pytest.fixture(scope="module")
def ct192(api):
    """CT 192 on lab-pve2, created and started through fakepve's API with node 2's nvidia3 and control files."""
    upid = api.nodes(NODE2).lxc.create(vmid=int(CT), ostemplate=TEMPLATE, hostname="ct" + CT, rootfs="local-lvm:4",
                                       dev0="/dev/nvidia3,mode=0666", dev1="/dev/nvidiactl,mode=0666", start=1)
    try:
        pve_api.wait_task(api, NODE2, upid, timeout=300)
        yield CT
    finally:
        ct = api.nodes(NODE2).lxc(int(CT))
        try:
            if ct.status.current.get()["status"] == "running":
                pve_api.wait_task(api, NODE2, ct.status.stop.post(), timeout=120)
            pve_api.wait_task(api, NODE2, ct.delete(), timeout=300)
        finally:
            run(LAB, "ct-destroy", CT, node=NODE2, timeout=300)  # whatever the API left behind


# ---- the second node's endpoint --------------------------------------------------------------------------------

def test_the_second_sshd_answers_as_lab_pve2_with_its_own_host_key():
    assert ssh(NODE2, "echo node=$GPUSERVE_LAB_NODE").stdout == "node=lab-pve2\n"
    assert ssh(NODE1, "echo node=$GPUSERVE_LAB_NODE").stdout == "node=\n"
    keys = [open(d + "/ssh_host_ed25519_key.pub").read() for d in (STATE + "/ssh", STATE + "/nodes/lab-pve2/ssh")]
    assert keys[0] != keys[1]


# ---- pct: each node sees its own containers only ---------------------------------------------------------------

def test_pct_on_each_node_refuses_the_other_nodes_container(ct192):
    for node, vmid in ((NODE1, CT), (NODE2, VMID)):
        for args in (("exec", vmid, "--", "true"), ("config", vmid), ("status", vmid)):
            res = pct(node, *args)
            assert (res.returncode, res.stderr) == (
                255, "Configuration file 'nodes/%s/lxc/%s.conf' does not exist\n" % (node, vmid)), (node, args)
    # through the second node's sshd, as Ansible gets there
    res = ssh(NODE2, "pct exec %s -- true" % VMID)
    assert (res.returncode, res.stderr) == (255, "Configuration file 'nodes/lab-pve2/lxc/%s.conf' does not exist\n"
                                            % VMID)
    assert ssh(NODE2, "pct exec %s -- true" % CT).returncode == 0
    lists = {node: [line.split()[0] for line in pct(node, "list").stdout.splitlines()[1:]] for node in (NODE1, NODE2)}
    assert CT in lists[NODE2] and CT not in lists[NODE1] and VMID in lists[NODE1] and VMID not in lists[NODE2]
    # a vmid is unique in the cluster; the lab's hooks refuse to move another node's container
    res = pct(NODE1, "create", CT, TEMPLATE)
    assert (res.returncode, res.stderr) == (255, "CT %s already exists on node 'lab-pve2'\n" % CT)
    res = run(LAB, "ct-stop", CT)
    assert res.returncode == 1 and "CT %s lives on node 'lab-pve2', not 'lab-pve'" % CT in res.stderr
    # the node's pct through the API (pve_api.py pct) asks the API as that node
    helper = [sys.executable, os.path.join(ROOT, "lab", "pve_api.py"), "pct", "--state-dir", STATE + "/pve", "config"]
    assert "dev0: /dev/nvidia3,mode=0666" in run(*helper, CT, node=NODE2).stdout
    res = run(*helper, CT)
    assert res.returncode == 255 and "nodes/lab-pve/lxc/%s.conf' does not exist" % CT in res.stderr


# ---- SIMULATED GPUs: each node's nvidia-smi counts holders of its own files only --------------------------------

@pytest.mark.parametrize("holder_node,other_node", [(NODE2, NODE4), (NODE4, NODE2)])
def test_a_host_process_holding_one_nodes_gpu_counts_on_that_node_only(holder_node, other_node):
    gpu, mib = 3, 1234
    before = {n: used(n, gpu) for n in (NODE4, NODE2)}
    holder = subprocess.Popen(["python3", "-c", "import sys, time; f = open(sys.argv[1], 'rb'); time.sleep(30)",
                               "%s/nvidia%d" % (GPUS[holder_node], gpu)], env=dict(os.environ, GPUSIM_MIB=str(mib)))
    try:
        want = before[holder_node] + mib + (9 if before[holder_node] == 0 else 0)
        deadline = time.monotonic() + 10
        while used(holder_node, gpu) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        assert used(holder_node, gpu) == want
        assert used(other_node, gpu) == before[other_node]
        if holder_node == NODE2:  # what the inventory's lab-pve2 sees
            out = ssh(NODE2, "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i %d" % gpu).stdout
            assert int(out) == want
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 5  # the SIMULATED release delay (0.17 s)
    while used(holder_node, gpu) != before[holder_node] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert used(holder_node, gpu) == before[holder_node]


def test_the_nodes_gpus_have_their_own_uuids_and_bus_ids():
    query = ("/usr/local/bin/nvidia-smi", "--query-gpu=uuid,pci.bus_id", "--format=csv,noheader")
    ids = {node: run(*query, node=node, check=True).stdout.splitlines() for node in (NODE1, NODE2)}
    assert len(ids[NODE1]) == len(ids[NODE2]) == 8
    assert not set(",".join(ids[NODE1]).split(",")) & set(",".join(ids[NODE2]).split(","))
    bus = sorted(os.listdir(STATE + "/nodes/lab-pve2/driver/gpus"))
    assert bus[0] == "0000:01:06.0" and not set(bus) & set(os.listdir(STATE + "/driver/gpus"))


# ---- fakepve: one API for both nodes ---------------------------------------------------------------------------

def test_the_api_serves_both_nodes_and_a_ct_on_lab_pve2_gets_its_gpu_files(api, ct192):
    assert {n["node"] for n in api.nodes.get()} == set(lanes.NODES)
    assert int(CT) in [int(c["vmid"]) for c in api.nodes(NODE2).lxc.get()]
    assert int(CT) not in [int(c["vmid"]) for c in api.nodes(NODE1).lxc.get()]
    assert [r["node"] for r in api.cluster.resources.get(type="vm") if int(r["vmid"]) == int(CT)] == [NODE2]
    assert os.path.exists("%s/nodes/lab-pve2/lxc/%s.conf" % (STATE, CT))
    assert not os.path.exists("%s/pve/lxc/%s.conf" % (STATE, CT))
    # the bind mount is node 2's file (same inode), not node 1's
    seen = pct(NODE2, "exec", CT, "--", "stat", "-L", "-c", "%i", "/dev/nvidia3")
    assert seen.returncode == 0, seen.stderr
    assert int(seen.stdout) == inode(GPUS[NODE2] + "/nvidia3") != inode(GPUS[NODE1] + "/nvidia3")
    # and its nvidia-smi (node 2's gpusim.conf) names the GPU as node 2's host does
    inside = pct(NODE2, "exec", CT, "--", "nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader").stdout
    host = run("/usr/local/bin/nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "3", node=NODE2).stdout
    assert inside == host and inside.strip()
