# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's worker list derived from the replicas themselves: each container of group sglang with a
sglang_server_gateway_worker_url is a worker, labelled with its inventory name. One source for both sides: the
gateway role registers this list, and each replica finds its own entry in it when it registers itself again
(gateway_registration: what sglang_server's smg_worker call sends)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils._smg import normalize_url


def gateway_worker_entry(workers, url):
    """The entry of workers (sglang_gateway_workers) for url, both normalized as smg_worker compares them; {} when
    none."""
    want = normalize_url(url)
    for entry in workers or []:
        if isinstance(entry, dict) and isinstance(entry.get("url"), str) and normalize_url(entry["url"]) == want:
            return entry
    return {}


def gateway_workers(names, hostvars):
    """[{url, labels: {replica: NAME}}] for each name whose sglang_server_gateway_worker_url is set, in order."""
    workers, seen = [], {}
    for name in names or []:
        url = hostvars[name].get("sglang_server_gateway_worker_url") or ""
        if not isinstance(url, str):
            raise AnsibleFilterError("%s: sglang_server_gateway_worker_url must be a URL string, got %r" % (name, url))
        url = normalize_url(url)
        if not url:
            continue
        if url in seen:
            raise AnsibleFilterError("%s and %s have the same sglang_server_gateway_worker_url %s: each replica needs "
                                     "its own address" % (seen[url], name, url))
        seen[url] = name
        workers.append({"url": url, "labels": {"replica": name}})
    return workers


# A gateway bound to every address (or loopback) is reached on its own host at loopback
LOOPBACK_BINDS = ("0.0.0.0", "::", "127.0.0.1")


def gateway_registration(gateway, url, state, names, hostvars, port):
    """What a replica at url sends its gateway to join it (state present) or leave it (absent), from the gateway
    host's variables (gateway: {} when it is not in the inventory): {gateway_url} (the gateway on its own host: its
    sglang_gateway_settings host and port, else its gpuserve_gateway_port, else port), and joining, the labels (default
    {}) and priority of the replica's entry in the gateway's worker list (its sglang_gateway_workers, else the list
    derived from names, gateway_workers) and the gateway's worker health settings when it has any."""
    gateway = gateway or {}
    settings = gateway.get("sglang_gateway_settings")
    settings = settings if isinstance(settings, dict) else {}
    bind = settings.get("host", "0.0.0.0")
    port = settings["port"] if "port" in settings else gateway.get("gpuserve_gateway_port", port)
    out = {"gateway_url": "http://%s:%s" % ("127.0.0.1" if bind in LOOPBACK_BINDS else bind, port)}
    if state != "present":
        return out
    workers = (gateway["sglang_gateway_workers"] if "sglang_gateway_workers" in gateway
               else gateway_workers(names, hostvars))
    entry = gateway_worker_entry(workers, url)
    out["labels"] = entry.get("labels", {})
    if "priority" in entry:
        out["priority"] = entry["priority"]
    if gateway.get("sglang_gateway_worker_health"):
        out["health"] = gateway["sglang_gateway_worker_health"]
    return out


class FilterModule:
    def filters(self):
        return {"gateway_workers": gateway_workers, "gateway_worker_entry": gateway_worker_entry,
                "gateway_registration": gateway_registration}
