"""One SGLang server over two PVE hosts: CT 104 on lab-pve4 (rank 0) and CT 102 on lab-pve2 (rank 1), each
with its host's SIMULATED GPUs 0-3, tp 8 over both, --dist-init-addr on the lab bridge, deployed by
playbooks/deploy_eagle3.yml with -e gpuserve_serial=2.

The SIMULATED stand-in behaves as SGLang across nodes (lab/files/sglang_standin.py): rank 1 serves only a dummy
/health, joins rank 0 at --dist-init-addr and exits when rank 0's shutdown arrives; rank 0 is ready once rank 1
joined and exits when rank 1's link drops or rank 1 never comes within --dist-timeout. Both containers' journals
are on one machine's clock, so their timestamps compare. Uses the package's two containers (conftest.py).
"""
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from labutil import LAB_MARKS, ROOT, STANDIN_FAULT, finish, playbook

from .nodes import NODES, arg, deploy, first_failure, in_ct, main_pid, manifest, on_pve, recap, served_argv

pytestmark = LAB_MARKS

with open(os.path.join(ROOT, "roles", "gpuserve", "defaults", "main.yml")) as _src:
    NCCL = dict(yaml.safe_load(_src)["gpuserve_nccl_env"], NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0")
# One replica of two nodes, with no gateway (a multi-node server behind one is its rank 0's URL, as one replica).
MULTI = {"fleet_replica": "kimi", "sglang_server_nnodes": 2, "gpuserve_serial": 2,  # hosts.yml: its replica
         "sglang_server_gateway_worker_url": "", "gpuserve_nccl_env": NCCL}
# rank 0 gives up on a missing rank 1 after 60 s (SGLang's --dist-timeout). It also bounds how far apart the two
# nodes' starts may be: a rank 1 whose deadline ends before rank 0 forms the group exits, and rank 0 then loses it
# right after it answered ready. 20 s was too short for the rollback's starts under CI load (2026-12-03, the
# rank-1 rollback case: rank 0 ready, then connection refused at the generation, rank 1 gone).
BASE = {"dist_timeout": 60}
CHANGED = dict(BASE, max_running_requests=16)  # the last config that deploys, from the second test on
HELD = "/var/lib/gpuserve-lab/nodes/lab-pve2/gpus/nvidia2"
# seconds: how far apart two containers' journals may stamp one moment (measured: 16 ms)
SKEW = 0.25  # lab-pve2's GPU 2, one of CT 102's


def deploy_replica(changes, **evars):
    return deploy(fleet_changes=changes, **dict(MULTI, **evars))


def journal(name, since):
    """[(epoch seconds, message)] of sglang.service in container name since epoch `since` (systemd's lines and the
    server's). The time is the sender's own when it gave one (systemd does), else journald's arrival time."""
    out = in_ct(name, "journalctl", "-u", "sglang", "-o", "json", "--no-pager", "--since", "@%d" % int(since))
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [(int(e.get("_SOURCE_REALTIME_TIMESTAMP") or e["__REALTIME_TIMESTAMP"]) / 1e6, str(e.get("MESSAGE", "")))
            for e in lines]


def first(entries, *needles, after=0.0):
    return next((t for t, msg in entries if t >= after and any(n in msg for n in needles)), None)


def gpu_used(name):
    """{nvidia-smi index: MiB used} on the PVE host of container name."""
    out = on_pve(name, "nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits").stdout
    return {int(i): int(u) for i, u in (line.split(", ") for line in out.strip().splitlines())}


def uuids(name):
    out = on_pve(name, "nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader").stdout
    return {int(i): u for i, u in (line.split(", ") for line in out.strip().splitlines())}


@pytest.fixture(scope="module")
def replica(two_hosts):
    t0 = time.time()
    code, out = deploy_replica(BASE)
    assert code == 0, first_failure(out)
    return out, t0


def test_one_server_runs_over_both_hosts(replica):
    out, _t0 = replica
    assert recap(out, "ct104")[0] > 0 and recap(out, "ct102")[0] > 0
    m = {name: manifest(name) for name in NODES}
    for rank, name in enumerate(("ct104", "ct102")):
        argv = served_argv(name)
        assert (arg(argv, "--nnodes"), arg(argv, "--node-rank"), arg(argv, "--tp-size")) == ("2", str(rank), "8")
        assert arg(argv, "--dist-init-addr") == "10.66.0.104:20000"
        assert m[name]["replica"] == {"name": "kimi", "nnodes": 2, "node_rank": rank, "nodes": ["ct104", "ct102"],
                                      "through": "ct104"}
        # every process of every node carries the one NCCL set, the cross-node settings included
        assert m[name]["env_proof"]["ok"] is True and m[name]["env_proof"]["schedulers"] == 4, m[name]["env_proof"]
        assert m[name]["env"]["NCCL_SOCKET_IFNAME"] == "eth0" and m[name]["env"]["GLOO_SOCKET_IFNAME"] == "eth0"
        # the gate read this node's own PVE host: its GPUs 0-3 by that host's UUIDs
        assert sorted(g["uuid"] for g in m[name]["gate"]["gpus"]) == sorted(uuids(name)[i] for i in range(4))
    assert m["ct104"]["run"] == m["ct102"]["run"] and m["ct104"]["run"], "one run wrote both manifests"
    assert m["ct102"]["generation"] == m["ct104"]["generation"] and m["ct104"]["generation"]["text"]
    assert not set(uuids("ct104").values()) & set(uuids("ct102").values()), "the two hosts have different GPUs"
    # global TP ranks: 0-3 on rank 0's node, 4-7 on rank 1's; each holds its own host's GPUs 0-3
    for name, ranks in (("ct104", range(0, 4)), ("ct102", range(4, 8))):
        titles = in_ct(name, "ps", "-eo", "args").split()
        assert sorted(t for t in titles if t.startswith("sglang::scheduler")) == sorted(
            "sglang::scheduler_TP%d" % r for r in ranks)
        used = gpu_used(name)
        assert all(used[i] > 0 for i in range(4)) and all(used[i] == 0 for i in range(4, 8)), (name, used)


def test_a_change_stops_rank_0_first_and_starts_only_once_both_gates_passed(replica):
    t0 = time.time()
    code, out = deploy_replica(CHANGED)
    assert code == 0, first_failure(out)
    assert recap(out, "ct104")[0] > 0 and recap(out, "ct102")[0] > 0
    j = {name: journal(name, t0 - 1) for name in NODES}
    # Rank 0's stop: the lifecycle's stop ends an idle server's whole tree at once (SIGKILL to its control group,
    # docs/server.md, "The stop"); rank 1 then ends, by its own abort on the lost link or by its --no-drain stop.
    stop0 = first(j["ct104"], "Sent signal SIGKILL to main process", "Stopping sglang.service", after=t0)
    end = {name: first(j[name], "Deactivated successfully", "Stopped sglang.service", "Main process exited",
                       after=t0) for name in NODES}
    start = {name: first(j[name], "Starting sglang.service", after=t0) for name in NODES}
    assert stop0 is not None and None not in end.values() and None not in start.values(), j
    # Rank 0 stopped first: rank 1 ended only after it. Two journals of one machine, each stamping its lines as they
    # arrive: compared across nodes within SKEW.
    assert stop0 - SKEW <= end["ct102"], (stop0, end)
    # no node started before both were down and gated (the gates take longer than SKEW)
    assert max(end.values()) + SKEW < min(start.values()), (end, start)
    for name in NODES:
        m = manifest(name)
        assert m["gate"]["passed"] is True and sorted(m["gate"]["clear_at_s"]) == ["0", "1", "2", "3"], m["gate"]
        assert arg(m["argv"], "--max-running-requests") == "16"
    totals = tuple(manifest(name)["times"]["total_s"] for name in NODES)
    print("MULTINODE RESTART rank0_stop_to_rank1_end_s=%+.3f both_down_to_first_start_s=%.3f "
          "total_ct104_s=%s total_ct102_s=%s" % ((end["ct102"] - stop0, min(start.values()) - max(end.values()))
                                                 + totals))


def test_held_gpu_memory_on_rank_1_blocks_the_start_on_both_hosts(replica, monkeypatch):
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")  # the playbook's lines as they come (Ansible does not flush them)
    before = {name: gpu_used(name)[2] for name in NODES}  # the server's own memory on each host's GPU 2
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'rb'); time.sleep(600)",
                               HELD], env=dict(os.environ, GPUSIM_MIB="4096"))
    try:
        deadline = time.time() + 30
        while gpu_used("ct102")[2] < before["ct102"] + 4096 and time.time() < deadline:
            time.sleep(0.2)
        # lab-pve2's GPU 2 holds the 4 GiB more; lab-pve4's GPU 2 does not see them
        assert gpu_used("ct102")[2] == before["ct102"] + 4096 and gpu_used("ct104")[2] == before["ct104"]
        t0 = time.time()
        proc = playbook("playbooks/deploy_eagle3.yml", "-e", json.dumps(dict(
            MULTI, fleet_changes=CHANGED, sglang_server_force_restart=True, sglang_server_gate_timeout=8,
            sglang_server_unit_gate_timeout=120)))  # the unit stays as it is
        seen = []
        for line in proc.stdout:  # the first pass's gate fails; free the GPU once the rollback begins
            seen.append(line)
            if "Rollback | keep the reason" in line:
                break
        freed = time.time()
        holder.kill()
        code, rest = finish(proc, limit=900)
        out = "".join(seen) + rest
    finally:
        holder.kill()
        holder.wait()
    flat = " ".join(out.split())
    assert code != 0 and recap(out, "ct104")[1] == 1 and recap(out, "ct102")[1] == 1, out[-3000:]
    assert "ct102 of replica kimi failed before 'deploy: GPUs free'" in flat, first_failure(out)
    assert "gate timed out" in flat, first_failure(out)
    # each node's run ends with the whole replica's outcome: it rolled back, and so did the other node
    assert "ct104: FAILED in this run; rollback: done" in flat and "ct102: rolled back in this run" in flat, out[-4000:]
    assert "ct102: FAILED in this run; rollback: done" in flat and "ct104: rolled back in this run" in flat, out[-4000:]
    for name in NODES:
        starts = [t for t, msg in journal(name, t0 - 1) if t >= t0 and "Starting sglang.service" in msg]
        # the only start is the rollback's, after the GPU was freed: rank 0 did not start while rank 1's was held
        assert len(starts) == 1 and starts[0] > freed, (name, starts, freed)
        m = manifest(name)
        assert m["phase"] == "rollback" and m["gate"]["passed"] is True and m["env_proof"]["ok"] is True


def test_a_failed_rank_1_start_rolls_back_both_nodes(replica):
    before = {name: served_argv(name) for name in NODES}
    # CT 102's new server exits at start (the stand-in's SIMULATED startup fault), after both nodes stopped
    in_ct("ct102", "touch", STANDIN_FAULT)
    try:
        code, out = deploy_replica(dict(CHANGED, max_running_requests=8))
    finally:
        in_ct("ct102", "rm", "-f", STANDIN_FAULT)  # its start took it; a run that failed before leaves it
    flat = " ".join(out.split())
    assert code != 0 and recap(out, "ct104")[1] == 1 and recap(out, "ct102")[1] == 1, out[-3000:]
    assert "SIMULATED startup failure" in flat, first_failure(out)
    assert "ct104: FAILED in this run; rollback: done" in flat and "ct102: rolled back in this run" in flat, out[-4000:]
    assert "ct102: FAILED in this run; rollback: done" in flat and "ct104: rolled back in this run" in flat, out[-4000:]
    for name in NODES:
        m = manifest(name)
        assert m["phase"] == "rollback" and m["env_proof"]["ok"] is True, m
        assert served_argv(name) == before[name] == m["argv"]  # the last verified config, not the new one
    assert arg(served_argv("ct102"), "--max-running-requests") != "8"


def test_a_rerun_changes_nothing(replica):
    pids = {name: main_pid(name) for name in NODES}
    code, out = deploy_replica(CHANGED)
    assert code == 0 and recap(out, "ct104") == (0, 0) and recap(out, "ct102") == (0, 0), out[-3000:]
    assert {name: main_pid(name) for name in NODES} == pids
