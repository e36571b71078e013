"""sglang_replica: the nodes of one SGLang server spread over several containers, in rank order."""
from ansible_collections.gpuserve.sglang.plugins.filter.sglang_replica import FilterModule, sglang_replica

TWO = {"ct101": {"sglang_server_replica": "big", "sglang_server_nnodes": 2,
                 "sglang_server_node_address": "10.66.0.101", "gpuserve_pve_host": "lab-pve"},
       "ct102": {"sglang_server_replica": "big", "sglang_server_nnodes": "2",
                 "sglang_server_node_address": "10.66.0.102", "gpuserve_pve_host": "lab-pve2"},
       "ct103": {}}


def test_a_host_without_a_replica_is_one_node_of_its_own():
    r = sglang_replica(["ct101", "ct102", "ct103"], TWO, "ct103")
    assert r == {"name": "ct103", "nnodes": 1, "multinode": False, "rank": 0, "rank0": "ct103", "dist_init_addr": "",
                 "problems": [],
                 "nodes": [{"host": "ct103", "rank": 0, "address": "", "pve_host": ""}]}


def test_two_nodes_rank_by_inventory_order_and_rank_0_gives_the_init_address():
    for host, rank in (("ct101", 0), ("ct102", 1)):
        r = sglang_replica(["ct101", "ct102", "ct103"], TWO, host, 25000)
        assert r["problems"] == [] and r["name"] == "big" and r["nnodes"] == 2 and r["rank"] == rank
        assert r["multinode"] is True and r["rank0"] == "ct101"
        nodes = [(n["host"], n["rank"], n["pve_host"]) for n in r["nodes"]]
        assert nodes == [("ct101", 0, "lab-pve"), ("ct102", 1, "lab-pve2")]
        assert r["dist_init_addr"] == "10.66.0.101:25000"


def test_an_explicit_rank_wins_over_the_order():
    hv = {k: dict(v) for k, v in TWO.items()}
    hv["ct101"]["sglang_server_node_rank"] = 1
    hv["ct102"]["sglang_server_node_rank"] = "0"
    r = sglang_replica(["ct101", "ct102"], hv, "ct101")
    assert r["rank"] == 1 and [n["host"] for n in r["nodes"]] == ["ct102", "ct101"]
    assert r["dist_init_addr"] == "10.66.0.102:20000"


def test_an_ipv6_rank_0_is_bracketed():
    hv = {k: dict(v) for k, v in TWO.items()}
    hv["ct101"]["sglang_server_node_address"] = "fd00::1"
    assert sglang_replica(["ct101", "ct102"], hv, "ct102")["dist_init_addr"] == "[fd00::1]:20000"


def test_problems_say_what_to_change():
    hv = {k: dict(v) for k, v in TWO.items()}
    hv["ct102"]["sglang_server_nnodes"] = 3
    assert sglang_replica(["ct101", "ct102"], hv, "ct101")["problems"] == [
        "the nodes of replica big disagree on sglang_server_nnodes: ct101 says 2, ct102 says 3; "
        "set one value for all of them"]

    assert sglang_replica(["ct101"], TWO, "ct101")["problems"] == [
        "replica big has sglang_server_nnodes 2 but 1 inventory host(s) of group sglang name it (ct101): "
        "give every node the same sglang_server_replica, one host per node"]

    hv = {k: dict(v) for k, v in TWO.items()}
    hv["ct102"]["sglang_server_node_rank"] = 0
    (msg,) = sglang_replica(["ct101", "ct102"], hv, "ct102")["problems"]
    assert msg.startswith("the node ranks of replica big must be 0 to 1, each once; they are ct101: 0, ct102: 0")

    hv = {k: dict(v) for k, v in TWO.items()}
    hv["ct101"]["sglang_server_node_address"] = " "
    r = sglang_replica(["ct101", "ct102"], hv, "ct102")
    assert r["problems"] == ["set sglang_server_node_address for ct101, rank 0 of replica big: the address the other "
                             "nodes reach it at on their shared network; it becomes --dist-init-addr"]
    assert r["dist_init_addr"] == ""

    hv = {"a": {"sglang_server_nnodes": "two"}}
    assert sglang_replica(["a"], hv, "a")["problems"] == [
        "sglang_server_nnodes must be a whole number of at least 1 (a)"]

    hv = {"a": {"sglang_server_nnodes": True}}
    assert sglang_replica(["a"], hv, "a")["problems"][0].startswith("sglang_server_nnodes must be a whole number")


def test_a_host_outside_the_list_still_answers_for_itself():
    r = sglang_replica([], {"x": {}}, "x")
    assert r["name"] == "x" and r["nodes"][0]["host"] == "x" and r["problems"] == []


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"sglang_replica": sglang_replica}
