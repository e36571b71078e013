# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gateway's worker list derived from the replicas themselves: each container of group sglang with a
sglang_server_gateway_worker_url is a worker, labelled with its inventory name. One source for both sides: the
gateway role registers this list, and each replica finds its own entry in it when it registers itself again."""

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


class FilterModule:
    def filters(self):
        return {"gateway_workers": gateway_workers, "gateway_worker_entry": gateway_worker_entry}
