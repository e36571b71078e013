"""The lab's lanes: independent lab scenarios that run side by side (scripts/lab-lanes, docs/testing.md), each on PVE
nodes, containers, GPUs, addresses and an sshd of its own, so that no test of one lane can touch another lane's
processes or files. This table is the one place that says which lane runs what and on which lab resources; the
runner reads it, and labutil reads the lane a test runs in (GPUSERVE_LANE) from it.

A lane's steps run one after the other; the lanes run at the same time. `main` is the lab as scripts/deploy made it
(CT 101 on lab-pve, inventory/lab as it is). The other lanes' containers are created through fakepve's API from the
lab's installed image (lab/lab image save: CT 101 after this run's scripts/deploy, less the server's config and
state) by a deploy_eagle3.yml of their own; their inventory is an overlay on inventory/lab, always run with --limit
to the lane's hosts.
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LANES = {
    "main": {
        "what": "molecule default on scripts/deploy's lab, the stop, the benchmark, the lab's own checks, a "
                "SIMULATED host reboot, molecule rebuild last",
        "node": "lab-pve", "vmid": "101", "host": "ct101", "inventory": None,
        "nodes": ["lab-pve"], "vmids": ["101"],
        "steps": [("molecule", "default"),
                  ("pytest", ["tests/lab/test_check_mode.py", "tests/lab/test_stop.py", "tests/lab/test_benchmark.py",
                              "tests/lab/test_gpu_ownership.py", "tests/lab/test_lab_lab.py",
                              "tests/lab/test_host_boot.py"]),
                  ("molecule", "rebuild")],
    },
    "faults": {
        "what": "faults, interrupted runs and bad settings on CT 103 (lab-pve3), then the lab tests that need no "
                "container (each its own fakepve)",
        "node": "lab-pve3", "vmid": "103", "host": "ct103", "inventory": "tests/lab/lanes/faults.yml",
        "limit": ["ct103"], "provision": True, "nodes": ["lab-pve3"], "vmids": ["103"],
        # its controller (ansible-playbook) 5 hours west of UTC, the lab host's zone: a controller-side time read as
        # local shows there (the manifest's started_epoch, the next restart's Xid cut-off: test_gpu_health)
        "controller_tz": "EST5",
        "steps": [("pytest", ["tests/lab/test_faults.py", "tests/lab/test_gpu_health.py",
                              "tests/lab/test_interrupted.py", "tests/lab/test_bad_settings.py",
                              "tests/lab/test_pve_api.py", "tests/lab/test_pve_provisioning.py"])],
    },
    "fleet": {
        "what": "the gateway (CT 100), the lab's network and nodes, then two replicas and one multi-node server over "
                "CT 104 (lab-pve4) and CT 102 (lab-pve2)",
        "node": "lab-pve4", "vmid": "104", "host": "ct104", "inventory": "inventory/lab-fleet/hosts.yml",
        # tests/lab/two_hosts makes CT 104 and CT 102; localhost: the lab host as the fleet's Prometheus host
        "limit": ["ct104", "ct102", "gw100", "localhost"], "provision": False,
        # CT 100: the gateway (on lab-pve: its sessions count as lane main's sshd); CT 192: test_lab_nodes
        "nodes": ["lab-pve4", "lab-pve2"], "vmids": ["104", "102", "100", "192"],
        "steps": [("pytest", ["tests/lab/test_gateway.py", "tests/lab/test_lab_network.py",
                              "tests/lab/test_lab_nodes.py", "tests/lab/two_hosts"])],
    },
}

DEFAULT = "main"


def current():
    """The lane this process runs in: GPUSERVE_LANE, else main (a developer's run on the deployed lab)."""
    name = os.environ.get("GPUSERVE_LANE") or DEFAULT
    if name not in LANES:
        raise SystemExit("GPUSERVE_LANE=%r: the lanes are %s (tests/lab/lanes.py)" % (name, ", ".join(sorted(LANES))))
    return dict(LANES[name], name=name)


def pytest_paths(lane):
    """The test paths (files or directories, relative to the repository) that lane's pytest steps run."""
    return [path for kind, what in LANES[lane]["steps"] if kind == "pytest" for path in what]


def lane_of(path):
    """The lane whose pytest steps run the test file at path (absolute or relative to the repository); None if no
    lane does."""
    rel = os.path.relpath(os.path.abspath(os.path.join(ROOT, path)), ROOT)
    for name in LANES:
        for step in pytest_paths(name):
            if rel == step or rel.startswith(step.rstrip("/") + "/"):
                return name
    return None


def ssh_port(node):
    """The lab sshd's port of a node (lab/lab: node N from 0 on 127.0.0.(N+1), port 2222+N)."""
    return 2222 + NODES.index(node)


def ssh_addr(node):
    return "127.0.0.%d" % (NODES.index(node) + 1)


NODES = ["lab-pve", "lab-pve2", "lab-pve3", "lab-pve4"]  # lab/lab's NODES, in order
STATE = "/var/lib/gpuserve-lab"
IMAGE_VOLUME = "debian-12-gpuserve-lab-installed_1_amd64.tar.zst"  # lab/lab's: the installed image's template


def node_dir(node):
    """A node's state directory on the lab host (lab/lab node_dir)."""
    return STATE if node == NODES[0] else "%s/nodes/%s" % (STATE, node)
