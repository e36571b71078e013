# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus scrape configs of the fleet, from the inventory: every replica at the URL its gateway reaches it by
(sglang_server_gateway_worker_url; SGLang serves /metrics there with --enable-metrics), and every gateway's SMG
metrics where they listen on an address another host can reach. The sglang_prometheus role renders them."""

from urllib.parse import urlsplit

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils._smg import normalize_url

NOT_REACHABLE = ('127.0.0.1', 'localhost', '::1', '0.0.0.0', '::', '')


def prometheus_scrape_configs(replicas, gateways, hostvars, gateway_metrics_port):
    """{scrape_configs, notes}: job sglang (each replica labelled replica=NAME and worker=URL, the label SMG's
    per-worker series carry) and job smg (each gateway labelled gateway=NAME); notes say what was left out and why."""
    targets, notes = [], []
    for name in replicas or []:
        url = normalize_url(hostvars[name].get("sglang_server_gateway_worker_url") or "")
        if not url:
            notes.append("%s: no sglang_server_gateway_worker_url, so no address another host scrapes it at: not "
                         "scraped" % name)
            continue
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.netloc:
            raise AnsibleFilterError("%s: sglang_server_gateway_worker_url %s: an http://HOST:PORT URL is scraped, "
                                     "as SGLang serves it" % (name, url))
        targets.append({"targets": [parts.netloc], "labels": {"replica": name, "worker": url}})
    configs = [{"job_name": "sglang", "metrics_path": "/metrics", "static_configs": targets}] if targets else []
    smg = []
    for name in gateways or []:
        settings = hostvars[name].get("sglang_gateway_settings") or {}
        host = str(settings.get("prometheus_host", "127.0.0.1"))
        port = settings.get("prometheus_port", gateway_metrics_port)
        if host in NOT_REACHABLE:
            notes.append("%s: SMG's metrics listen on %s (sglang_gateway_settings.prometheus_host), no address "
                         "another host scrapes: not scraped, and the alert on a replica out of the gateway cannot "
                         "fire; set it to an address your Prometheus reaches" % (name, host or "''"))
            continue
        smg.append({"targets": ["[%s]:%s" % (host, port) if ":" in host else "%s:%s" % (host, port)],
                    "labels": {"gateway": name}})
    if smg:
        configs.append({"job_name": "smg", "metrics_path": "/metrics", "static_configs": smg})
    return {"scrape_configs": configs, "notes": notes}


class FilterModule:
    def filters(self):
        return {"prometheus_scrape_configs": prometheus_scrape_configs}
