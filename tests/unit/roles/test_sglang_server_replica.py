"""A multi-node replica in the sglang_server role, through ansible-playbook on local hosts: the flags each node gets,
the refusals before anything stops, and the barrier that keeps the nodes of one server together (a node that fails
a step sends every node of its replica to the rollback, instead of the others going on alone)."""
import json
import os
import subprocess
import sys

import pytest
import yaml

# ansible-playbook runs the role and its filters (sglang_args is in the mutation run's safety core) in processes of
# its own, where mutmut's trampolines cannot run: scripts/mutation leaves these tests out (pytest.ini)
pytestmark = pytest.mark.foreign_python
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NODE = {"sglang_server_replica": "big", "sglang_server_nnodes": 2}
INVENTORY = {"all": {
    "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "gpuserve_pve_host": "a0", "proxmox_vmid": 101, "gpuserve_gpus": [0, 1, 2, 3],
             "sglang_server_args": {"model_path": "/m", "speculative_draft_model_path": "/d"}},
    "children": {"sglang": {"hosts": {
        "a0": dict(NODE, sglang_server_node_address="10.66.0.101"),
        "a1": dict(NODE, sglang_server_node_address="10.66.0.102"),
        "solo": {}}}}}}

PREFLIGHT = """
- hosts: sglang
  gather_facts: false
  serial: "{{ gpuserve_serial | default(1) }}"
  tasks:
    - ansible.builtin.include_role: {name: gpuserve.sglang.sglang_server, tasks_from: preflight}
    - ansible.builtin.debug: {msg: "{{ __sglang_server_argv }}"}
"""

# The barrier as the lifecycle uses it: a step that fails on a1 only, the barrier, then a step that must not run.
BARRIER = """
- hosts: a0,a1
  gather_facts: false
  tasks:
    - name: One restart
      block:
        - name: Preflight (the replica)
          ansible.builtin.include_role: {name: gpuserve.sglang.sglang_server, tasks_from: preflight}
        - name: A step that fails on rank 1
          ansible.builtin.command: "{{ 'false' if inventory_hostname == 'a1' else 'true' }}"
          changed_when: false
        - name: The barrier
          ansible.builtin.include_role: {name: gpuserve.sglang.sglang_server, tasks_from: replica_barrier}
          vars: {__sglang_server_step: "deploy: started"}
        - name: The next step
          ansible.builtin.set_fact: {ran_ahead: true}
      rescue:
        - name: The rollback
          ansible.builtin.set_fact:
            rolled_back: "{{ ansible_failed_task.name }}"
            why: "{{ ansible_failed_result.msg | default('') }}"
"""


@pytest.fixture
def play(tmp_path, collections_path):
    """Runs a playbook text on INVENTORY (or the one given) with the json callback: (exit code, report)."""
    def run(text, *extra, inventory=None):
        (tmp_path / "inv.yml").write_text(yaml.safe_dump(inventory or INVENTORY))
        (tmp_path / "play.yml").write_text(text)
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
                   ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path,
                   ANSIBLE_LOCALHOST_WARNING="false")
        ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        out = subprocess.run([ansible_playbook, "-i", str(tmp_path / "inv.yml"), str(tmp_path / "play.yml"),
                              *extra], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        return out.returncode, json.loads(out.stdout)
    return run


def results(report, task_name):
    """The results of the task named task_name (a role's task carries its role's name in front)."""
    return {host: r for p in report["plays"] for t in p["tasks"]
            if t["task"]["name"] == task_name or t["task"]["name"].endswith(" : " + task_name)
            for host, r in t["hosts"].items()}


def test_each_node_gets_its_rank_and_rank_0s_address_and_one_node_stays_as_it_was(play):
    rc, report = play(PREFLIGHT, "-e", "gpuserve_serial=2")
    assert rc == 0
    argv = {h: r["msg"] for h, r in results(report, "ansible.builtin.debug").items()}
    for host, rank in (("a0", "0"), ("a1", "1")):
        a = argv[host]
        assert a[a.index("--tp-size") + 1] == "8"  # 4 GPUs on each of 2 nodes
        assert a[a.index("--nnodes") + 1] == "2" and a[a.index("--node-rank") + 1] == rank
        assert a[a.index("--dist-init-addr") + 1] == "10.66.0.101:20000"
    assert "--nnodes" not in argv["solo"] and "--dist-init-addr" not in argv["solo"]
    assert argv["solo"][argv["solo"].index("--tp-size") + 1] == "4"


def test_a_batch_without_every_node_is_refused_before_anything_stops(play):
    rc, report = play(PREFLIGHT)
    assert rc != 0
    failed = {h: r for h, r in results(report, "Replica | every node of a multi-node replica is in this batch "
                                               "(they stop, gate and start together)").items() if r.get("failed")}
    assert set(failed) == {"a0"}  # the first batch; the play stops there
    assert "a1 of replica big (2 nodes) is not in this batch (a0)" in failed["a0"]["msg"]
    assert "-e gpuserve_serial=2" in failed["a0"]["msg"] and "Nothing was stopped" in failed["a0"]["msg"]


LAUNCH_RULES = "Preflight | the launch settings agree with each other, the inventory and the other nodes of the replica"


def test_nodes_that_would_launch_different_servers_are_refused(play):
    inv = json.loads(json.dumps(INVENTORY))
    inv["all"]["children"]["sglang"]["hosts"]["a1"]["gpuserve_gpus"] = [0, 1]  # 2 GPUs: tp 4, not 8
    rc, report = play(PREFLIGHT, "-e", "gpuserve_serial=2", inventory=inv)
    assert rc != 0
    msgs = {h: r["msg"] for h, r in results(report, LAUNCH_RULES).items() if r.get("failed")}
    assert msgs and all("would launch different servers" in m for m in msgs.values())


def test_a_rank_1_node_behind_the_gateway_is_refused(play):
    inv = json.loads(json.dumps(INVENTORY))
    inv["all"]["children"]["sglang"]["hosts"]["a1"]["sglang_server_gateway_worker_url"] = "http://10.66.0.102:30000"
    inv["all"]["children"]["sglang_gateway"] = {"hosts": {"gw": {}}}
    rc, report = play(PREFLIGHT, "-e", "gpuserve_serial=2", inventory=inv)
    assert rc != 0
    (r,) = [r for r in results(report, LAUNCH_RULES).values() if r.get("failed")]
    assert r["msg"].startswith("a1 is node rank 1 of replica big: it serves no API")


def test_a_node_that_fails_a_step_takes_every_node_of_its_replica_to_the_rollback_at_once(play):
    rc, report = play(BARRIER)
    assert rc == 0  # both rescued
    facts = results(report, "The rollback")
    assert facts["a1"]["ansible_facts"]["rolled_back"] == "A step that fails on rank 1"
    assert facts["a0"]["ansible_facts"]["rolled_back"] == (
        "Replica | every node of the replica passed the step deploy: started")
    assert facts["a0"]["ansible_facts"]["why"] == (
        "a1 of replica big failed before 'deploy: started' (its error is above): every node of a multi-node server "
        "stops here and rolls back with it")
    assert results(report, "The next step") == {}  # a0 did not go on alone
