"""The two containers every module of this package uses, made once: CT 102's whole install is the long part
(docs/testing.md, CI budget)."""
import os

import pytest

from gatewayutil import LAB, run
from labutil import finish, playbook

from .nodes import NODES, deploy, first_failure


@pytest.fixture(scope="package")
def two_hosts(lab_up):
    """deploy_eagle3.yml with the overlay, as two single-node replicas and no gateway: CT 101 is re-provisioned (its
    GPUs and net0 change, so it restarts), CT 102 is created on lab-pve2 through fakepve's API and deployed whole.
    Afterwards CT 102 is destroyed and CT 101 put back (no net0, all 8 GPUs, the lab's settings) by one deploy with
    inventory/lab, unless GPUSERVE_LAB_REBUILD_NEXT=1 says molecule `rebuild` replaces CT 101 next."""
    code, out = deploy(sglang_server_gateway_worker_url="")
    try:
        assert code == 0, first_failure(out)
        yield out
    finally:
        run(LAB, "ct-destroy", NODES["ct102"]["vmid"], check=False,
            env=dict(os.environ, GPUSERVE_LAB_NODE=NODES["ct102"]["pve"]))
        # scripts/lab-tests runs molecule `rebuild` next, which destroys CT 101 and deploys a new one from
        # inventory/lab: putting it back first would be 80 s of CI for nothing.
        if os.environ.get("GPUSERVE_LAB_REBUILD_NEXT") != "1":
            run("/usr/sbin/pct", "set", "101", "--delete", "net0", check=False)
            code, out = finish(playbook("playbooks/deploy_eagle3.yml"), limit=900)
            assert code == 0, "putting CT 101 back failed: " + out[-4000:]
