"""The two containers every module of this package uses, made once (lane `fleet`, tests/lab/lanes.py): CT 104 on
lab-pve4 and CT 102 on lab-pve2, both created through fakepve's API from the lab's installed image."""
import os

import pytest

from gatewayutil import LAB, run
from labutil import LANE, ensure_image

from .nodes import NODES, deploy, first_failure, journals


@pytest.fixture(scope="package")
def two_hosts(lab_up):
    """deploy_eagle3.yml with the lane's overlay, as two single-node replicas and no gateway: CT 104 and CT 102 are
    created on their PVE hosts through fakepve's API (from the installed image, saved from CT 101 if this lab has
    none yet) and deployed. Afterwards both are destroyed."""
    assert LANE["name"] == "fleet", "tests/lab/two_hosts runs in lane fleet (GPUSERVE_LANE=fleet), not %s" % LANE["name"]
    ensure_image()
    code, out = deploy(sglang_server_gateway_worker_url="")
    try:
        assert code == 0, first_failure(out) + "\n" + journals()
        yield out
    finally:
        for node in NODES.values():
            run(LAB, "ct-destroy", node["vmid"], check=False, env=dict(os.environ, GPUSERVE_LAB_NODE=node["pve"]))
