"""tests/lab/lanes.py, the table of the lab's lanes: every lab test runs in exactly one lane, and no two lanes share
a PVE node, a container or an inventory host (what lets scripts/lab-lanes run them side by side)."""
import glob
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lab"))
import lanes  # noqa: E402  pylint: disable=wrong-import-position

LAB_MARK = re.compile(r"pytestmark = (LAB_MARKS|pytest\.mark\.lab)\b")


def lab_test_files():
    """The test files under tests/lab whose tests are lab-marked (the others run with the unit tests)."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "lab", "**", "test_*.py"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            if LAB_MARK.search(f.read()):
                found.append(os.path.relpath(path, ROOT))
    return found


def test_every_lab_test_file_runs_in_exactly_one_lane():
    files = lab_test_files()
    assert len(files) >= 12, files  # the glob found them
    owners = {f: [name for name in lanes.LANES for step in lanes.pytest_paths(name)
                  if f == step or f.startswith(step.rstrip("/") + "/")] for f in files}
    assert {f: o for f, o in owners.items() if len(o) != 1} == {}
    assert all(lanes.lane_of(f) == o[0] for f, o in owners.items())
    # and every path a lane names exists
    for name in lanes.LANES:
        for step in lanes.pytest_paths(name):
            assert os.path.exists(os.path.join(ROOT, step)), (name, step)


def test_no_two_lanes_share_a_node_a_container_or_a_host():
    seen = {}
    for name, lane in lanes.LANES.items():
        assert lane["node"] in lane["nodes"] and lane["vmid"] in lane["vmids"], name
        for kind in ("nodes", "vmids", "limit"):
            for value in lane.get(kind) or []:
                assert (kind, value) not in seen, "%s %s is lane %s's and %s's" % (kind, value, seen[(kind, value)], name)
                seen[(kind, value)] = name
        assert set(lane["nodes"]) <= set(lanes.NODES), name


def group_hosts(group, inherited=None):
    """{host: its variables} of an inventory group and its children, each group's vars under its children's."""
    here = dict(inherited or {}, **(group.get("vars") or {}))
    found = {host: dict(here, **(hostvars or {})) for host, hostvars in (group.get("hosts") or {}).items()}
    for child in (group.get("children") or {}).values():
        found.update(group_hosts(child or {}, here))
    return found


def lab_pve_hosts():
    with open(os.path.join(ROOT, "inventory", "lab", "hosts.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["all"]["children"]["pve"]["hosts"]


def test_a_lanes_overlay_defines_its_hosts_on_its_nodes_from_the_installed_image():
    for name, lane in lanes.LANES.items():
        if not lane["inventory"]:
            assert lane["node"] == lanes.NODES[0] and not lane.get("limit"), name  # inventory/lab as it is
            continue
        with open(os.path.join(ROOT, lane["inventory"]), encoding="utf-8") as f:
            inv = yaml.safe_load(f)
        # vars of group sglang itself would reach inventory/lab's CT 101 too (it is in that group, outside --limit)
        assert not inv["all"]["children"]["sglang"].get("vars"), name
        for host, merged in group_hosts(inv["all"]["children"]["sglang"]).items():
            assert host in lane["limit"], (name, host)
            assert str(merged["proxmox_vmid"]) in lane["vmids"], (name, host)
            assert merged["gpuserve_pve_host"] in lane["nodes"], (name, host)
            node = merged["gpuserve_pve_host"]
            assert (merged["ansible_host"], merged["ansible_port"]) == (lanes.ssh_addr(node), lanes.ssh_port(node))
            assert merged["proxmox_container_gpu_device_root"] == lanes.node_dir(node) + "/gpus", (name, host)
            assert merged["gpuserve_gpu_info_root"] == lanes.node_dir(node) + "/driver/gpus", (name, host)
            assert merged["proxmox_container_ostemplate"].endswith("/" + lanes.IMAGE_VOLUME), (name, host)
            # its PVE host is an inventory host, reached at that node's sshd
            pve = dict(lab_pve_hosts(), **inv["all"]["children"].get("pve", {}).get("hosts", {}))
            assert node in pve, (name, host, node)
            assert (pve[node] or {}).get("ansible_host", "127.0.0.1") == lanes.ssh_addr(node), (name, node)
            assert (pve[node] or {}).get("ansible_port", 2222) == lanes.ssh_port(node), (name, node)


def test_the_lanes_know_the_labs_nodes_image_and_ports_as_lab_lab_sets_them():
    with open(os.path.join(ROOT, "lab", "lab"), encoding="utf-8") as f:
        script = f.read()
    assert 'NODE1=%s' % lanes.NODES[0] in script
    assert re.search(r'^NODES=\("\$NODE1" "\$NODE1"2 "\$NODE1"3 "\$NODE1"4\)', script, re.M)
    assert lanes.NODES == [lanes.NODES[0]] + [lanes.NODES[0] + str(i) for i in (2, 3, 4)]
    assert "IMAGE_VOLUME=%s\n" % lanes.IMAGE_VOLUME in script
    assert "SSH_PORT=${GPUSERVE_LAB_SSH_PORT:-%d}" % lanes.ssh_port(lanes.NODES[0]) in script
    assert [lanes.ssh_addr(n) for n in lanes.NODES] == ["127.0.0.%d" % i for i in (1, 2, 3, 4)]


def test_the_lane_comes_from_gpuserve_lane_and_an_unknown_one_is_refused(monkeypatch):
    monkeypatch.delenv("GPUSERVE_LANE", raising=False)
    assert lanes.current()["name"] == "main"
    monkeypatch.setenv("GPUSERVE_LANE", "faults")
    assert lanes.current()["vmid"] == "103"
    monkeypatch.setenv("GPUSERVE_LANE", "nope")
    try:
        lanes.current()
    except SystemExit as exc:
        assert "GPUSERVE_LANE='nope': the lanes are faults, fleet, main" in str(exc)
    else:
        raise AssertionError("an unknown lane was accepted")


def test_lane_faults_keeps_the_defaults_of_what_the_lab_shortens():
    """inventory/lab's short timers (group_vars: the settings it sets below their roles' defaults to wait less on
    SIMULATED parts) are the roles' own values in lane faults, so the defaults stay tested in CI."""
    with open(os.path.join(ROOT, "roles", "sglang_server", "defaults", "main.yml"), encoding="utf-8") as f:
        defaults = yaml.safe_load(f)
    with open(os.path.join(ROOT, "inventory", "lab", "group_vars", "sglang.yml"), encoding="utf-8") as f:
        lab = yaml.safe_load(f)
    with open(os.path.join(ROOT, lanes.LANES["faults"]["inventory"]), encoding="utf-8") as f:
        faults = group_hosts(yaml.safe_load(f)["all"]["children"]["sglang"])["ct103"]
    shortened = {k for k, v in lab.items() if k in defaults and isinstance(v, (int, float))
                 and not isinstance(v, bool) and v < defaults[k]}
    assert shortened == {"sglang_server_ready_poll_interval"}
    assert {k: faults.get(k) for k in shortened} == {k: defaults[k] for k in shortened}
