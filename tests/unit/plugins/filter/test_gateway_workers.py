"""gateway_workers: the gateway's worker list from the replicas' own worker URLs."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.gateway_workers import (FilterModule, gateway_worker_entry,
                                                                                gateway_workers)


def test_each_replica_with_a_url_is_a_worker_labelled_with_its_name_in_order():
    hv = {"ct102": {"sglang_server_gateway_worker_url": "http://10.66.0.102:30000/"},
          "ct101": {"sglang_server_gateway_worker_url": " http://10.66.0.101:30000"},
          "ct103": {"sglang_server_gateway_worker_url": ""}, "ct104": {}}
    assert gateway_workers(["ct102", "ct101", "ct103", "ct104"], hv) == [
        {"url": "http://10.66.0.102:30000", "labels": {"replica": "ct102"}},
        {"url": "http://10.66.0.101:30000", "labels": {"replica": "ct101"}},
    ]
    assert gateway_workers([], hv) == [] and gateway_workers(None, hv) == []


def test_two_replicas_with_one_url_are_refused_naming_both():
    hv = {"a": {"sglang_server_gateway_worker_url": "http://x:1"},
          "b": {"sglang_server_gateway_worker_url": "http://x:1/"}}
    with pytest.raises(AnsibleFilterError, match=r"^a and b have the same sglang_server_gateway_worker_url http://x:1"):
        gateway_workers(["a", "b"], hv)


def test_a_url_that_is_not_a_string_is_refused():
    with pytest.raises(AnsibleFilterError, match=r"^a: sglang_server_gateway_worker_url must be a URL string, got 5$"):
        gateway_workers(["a"], {"a": {"sglang_server_gateway_worker_url": 5}})


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"gateway_workers": gateway_workers,
                                        "gateway_worker_entry": gateway_worker_entry}


def test_a_replica_finds_its_entry_whatever_trailing_slash_either_side_has():
    listed = [{"url": "http://10.66.0.101:30000/", "labels": {"replica": "a"}, "priority": 7},
              {"url": "http://10.66.0.102:30000", "labels": {"replica": "b"}}, "not a dict"]
    assert gateway_worker_entry(listed, "http://10.66.0.101:30000")["priority"] == 7
    assert gateway_worker_entry(listed, " http://10.66.0.102:30000/ ")["labels"] == {"replica": "b"}
    assert gateway_worker_entry(listed, "http://10.66.0.103:30000") == {}
    assert gateway_worker_entry(None, "http://x") == {}
