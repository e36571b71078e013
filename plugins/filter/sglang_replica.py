# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The replica an inventory host belongs to: one SGLang server may span several containers, each on its own
PVE host, as SGLang's multi-node tensor parallelism runs it (--nnodes, --node-rank, --dist-init-addr). The nodes of
one replica are the hosts of group sglang that name the same sglang_server_replica; each node's rank is its
sglang_server_node_rank, else its position among them in inventory order. The lifecycle reads this one answer on
every node, so all nodes agree on the order (rank 0 stops first) and on rank 0's address."""

import ipaddress

ADDRESS_HELP = "the address the other nodes reach it at on their shared network; it becomes --dist-init-addr"


def _int(value):
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _dist_host(address):
    """An IPv6 address goes in brackets in HOST:PORT, as SGLang's NetworkAddress.parse reads it."""
    try:
        return "[%s]" % address if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address


def sglang_replica(names, hostvars, host, port=20000):
    """{name, nnodes, multinode, nodes: [{host, rank, address, pve_host}] by rank, rank, rank0 (its host),
    dist_init_addr, problems: [str]}.

    names: the hosts of group sglang in inventory order; host: the asking host (inventory_hostname). A host with
    no sglang_server_replica is a replica of its own. problems is empty when the replica is consistent; each entry
    says what to change.
    """
    names = list(names or [])
    if host not in names:
        names.append(host)

    def var(name, key, default=None):
        value = hostvars[name].get(key, default)
        return default if value is None else value

    def replica_of(name):
        return str(var(name, "sglang_server_replica", "") or name)

    name = replica_of(host)
    members = [n for n in names if replica_of(n) == name]
    problems = []
    nnodes_of = {n: _int(var(n, "sglang_server_nnodes", 1)) for n in members}
    bad = sorted(n for n, v in nnodes_of.items() if v is None or v < 1)
    if bad:
        problems.append("sglang_server_nnodes must be a whole number of at least 1 (%s)" % ", ".join(bad))
    counts = sorted({v for v in nnodes_of.values() if v is not None and v >= 1})
    if len(counts) > 1:
        problems.append("the nodes of replica %s disagree on sglang_server_nnodes: %s; set one value for all of them"
                        % (name, ", ".join("%s says %s" % (n, nnodes_of[n]) for n in members)))
    nnodes = nnodes_of.get(host) if nnodes_of.get(host) and nnodes_of[host] >= 1 else 1
    if not problems and len(members) != nnodes:
        problems.append("replica %s has sglang_server_nnodes %d but %d inventory host(s) of group sglang name it (%s): "
                        "give every node the same sglang_server_replica, one host per node"
                        % (name, nnodes, len(members), ", ".join(members)))

    nodes = []
    for position, n in enumerate(members):
        explicit = var(n, "sglang_server_node_rank", "")
        rank = position if explicit == "" else _int(explicit)
        nodes.append({"host": n, "rank": rank, "address": str(var(n, "sglang_server_node_address", "") or "").strip(),
                      "pve_host": var(n, "gpuserve_pve_host", "")})
    ranks = [node["rank"] for node in nodes]
    if not problems and sorted(r if r is not None else -1 for r in ranks) != list(range(len(nodes))):
        problems.append("the node ranks of replica %s must be 0 to %d, each once; they are %s "
                        "(sglang_server_node_rank, else the order in the inventory)"
                        % (name, len(nodes) - 1, ", ".join("%s: %s" % (node["host"], node["rank"]) for node in nodes)))
    nodes.sort(key=lambda node: (node["rank"] is None, node["rank"] if node["rank"] is not None else 0))
    own = next(node for node in nodes if node["host"] == host)
    dist_init_addr = ""
    if nnodes > 1 and not problems:
        rank0 = nodes[0]
        if not rank0["address"]:
            problems.append("set sglang_server_node_address for %s, rank 0 of replica %s: %s"
                            % (rank0["host"], name, ADDRESS_HELP))
        else:
            dist_init_addr = "%s:%d" % (_dist_host(rank0["address"]), int(port))
    return {"name": name, "nnodes": nnodes, "multinode": nnodes > 1, "rank": own["rank"], "rank0": nodes[0]["host"],
            "nodes": nodes, "dist_init_addr": dist_init_addr, "problems": problems}


class FilterModule:
    def filters(self):
        return {"sglang_replica": sglang_replica}
