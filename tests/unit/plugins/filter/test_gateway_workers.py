"""gateway_workers: the gateway's worker list from the replicas' own worker URLs."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.gateway_workers import (FilterModule, gateway_registration,
                                                                                gateway_worker_entry, gateway_workers)


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
                                        "gateway_worker_entry": gateway_worker_entry,
                                        "gateway_registration": gateway_registration}


def test_a_replica_finds_its_entry_whatever_trailing_slash_either_side_has():
    listed = [{"url": "http://10.66.0.101:30000/", "labels": {"replica": "a"}, "priority": 7},
              {"url": "http://10.66.0.102:30000", "labels": {"replica": "b"}}, "not a dict"]
    assert gateway_worker_entry(listed, "http://10.66.0.101:30000")["priority"] == 7
    assert gateway_worker_entry(listed, " http://10.66.0.102:30000/ ")["labels"] == {"replica": "b"}
    assert gateway_worker_entry(listed, "http://10.66.0.103:30000") == {}
    assert gateway_worker_entry(None, "http://x") == {}


# gateway_registration: what a replica sends its gateway (roles/sglang_server/tasks/gateway.yml)

URL = "http://10.66.0.101:30000"
HV = {"ct101": {"sglang_server_gateway_worker_url": URL}}


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "127.0.0.1"])
def test_a_gateway_bound_to_every_address_or_loopback_is_reached_at_loopback(bind):
    gw = {"sglang_gateway_settings": {"host": bind, "port": 30080}}
    assert gateway_registration(gw, URL, "absent", ["ct101"], HV, 1) == {"gateway_url": "http://127.0.0.1:30080"}


def test_a_gateway_bound_to_one_address_is_reached_there():
    gw = {"sglang_gateway_settings": {"host": "10.66.0.100"}}
    assert gateway_registration(gw, URL, "absent", [], HV, 30080)["gateway_url"] == "http://10.66.0.100:30080"


def test_the_port_is_the_gateways_setting_else_its_hosts_shared_port_else_the_replicas():
    assert gateway_registration({"gpuserve_gateway_port": 31000}, URL, "absent", [], HV, 30080)["gateway_url"] == (
        "http://127.0.0.1:31000")
    assert gateway_registration({"sglang_gateway_settings": {"port": 32000}, "gpuserve_gateway_port": 31000}, URL,
                                "absent", [], HV, 30080)["gateway_url"] == "http://127.0.0.1:32000"
    assert gateway_registration({}, URL, "absent", [], HV, 30080)["gateway_url"] == "http://127.0.0.1:30080"
    assert gateway_registration(None, URL, "absent", [], HV, 30080)["gateway_url"] == "http://127.0.0.1:30080"


def test_leaving_sends_no_labels_priority_or_health():
    gw = {"sglang_gateway_workers": [{"url": URL, "labels": {"a": "b"}, "priority": 3}],
          "sglang_gateway_worker_health": {"timeout_secs": 5}}
    assert set(gateway_registration(gw, URL, "absent", [], HV, 30080)) == {"gateway_url"}


def test_joining_sends_the_entry_of_the_gateways_own_list_and_its_health_settings():
    gw = {"sglang_gateway_workers": [{"url": URL + "/", "labels": {"a": "b"}, "priority": 3}],
          "sglang_gateway_worker_health": {"timeout_secs": 5}}
    assert gateway_registration(gw, URL, "present", [], HV, 30080) == {
        "gateway_url": "http://127.0.0.1:30080", "labels": {"a": "b"}, "priority": 3, "health": {"timeout_secs": 5}}


def test_joining_without_a_list_finds_the_entry_derived_from_the_replicas_and_sends_no_empty_health():
    got = gateway_registration({"sglang_gateway_worker_health": {}}, URL, "present", ["ct101"], HV, 30080)
    assert got == {"gateway_url": "http://127.0.0.1:30080", "labels": {"replica": "ct101"}}


def test_joining_a_list_without_this_replica_sends_empty_labels():
    gw = {"sglang_gateway_workers": [{"url": "http://10.66.0.102:30000"}]}
    want = {"gateway_url": "http://127.0.0.1:30080", "labels": {}}
    assert gateway_registration(gw, URL, "present", [], HV, 30080) == want
