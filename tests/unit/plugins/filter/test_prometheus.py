"""prometheus_scrape_configs: the replicas and the gateways of the inventory as Prometheus scrape configs."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.prometheus import FilterModule, prometheus_scrape_configs

HV = {'ct104': {'sglang_server_gateway_worker_url': 'http://10.66.0.104:30000/'},
      'ct102': {'sglang_server_gateway_worker_url': 'http://10.66.0.102:30000'},
      'ct101': {},
      'gw100': {'sglang_gateway_settings': {'prometheus_host': '10.66.0.100'}},
      'gw200': {'sglang_gateway_settings': {'policy': 'round_robin'}}}


def test_each_replica_at_its_worker_url_and_each_reachable_gateway_with_the_default_port():
    got = prometheus_scrape_configs(['ct104', 'ct102', 'ct101'], ['gw100', 'gw200'], HV, 29000)
    assert got['scrape_configs'] == [
        {'job_name': 'sglang', 'metrics_path': '/metrics', 'static_configs': [
            {'targets': ['10.66.0.104:30000'], 'labels': {'replica': 'ct104', 'worker': 'http://10.66.0.104:30000'}},
            {'targets': ['10.66.0.102:30000'], 'labels': {'replica': 'ct102', 'worker': 'http://10.66.0.102:30000'}}]},
        {'job_name': 'smg', 'metrics_path': '/metrics', 'static_configs': [
            {'targets': ['10.66.0.100:29000'], 'labels': {'gateway': 'gw100'}}]}]
    assert got['notes'] == [
        'ct101: no sglang_server_gateway_worker_url, so no address another host scrapes it at: not scraped',
        "gw200: SMG's metrics listen on 127.0.0.1 (sglang_gateway_settings.prometheus_host), no address another host "
        "scrapes: not scraped, and the alert on a replica out of the gateway cannot fire; set it to an address your "
        "Prometheus reaches"]


def test_a_gateway_port_and_an_ipv6_address_are_taken_from_its_settings():
    hv = {'gw': {'sglang_gateway_settings': {'prometheus_host': 'fd00::5', 'prometheus_port': 31090}}}
    got = prometheus_scrape_configs([], ['gw'], hv, 29000)
    assert got['scrape_configs'][0]['static_configs'] == [{'targets': ['[fd00::5]:31090'], 'labels': {'gateway': 'gw'}}]


def test_no_replica_and_no_gateway_give_no_job():
    assert prometheus_scrape_configs([], [], {}, 29000) == {'scrape_configs': [], 'notes': []}


def test_a_worker_url_that_is_not_http_host_port_is_refused():
    with pytest.raises(AnsibleFilterError, match=r'^ct9: sglang_server_gateway_worker_url https://x:1: an '):
        prometheus_scrape_configs(['ct9'], [], {'ct9': {'sglang_server_gateway_worker_url': 'https://x:1'}}, 1)


def test_the_filter_is_registered():
    assert list(FilterModule().filters()) == ['prometheus_scrape_configs']
