"""_pve_lxc_gpu's own functions, directly (the whole module runs in tests/unit/plugins/modules/test_proxmox_lxc_gpu.py):
the method choice, the client made for it and what it refuses, the 403 explanation, secrets kept out of logs."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_client as client
from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_lxc_gpu as lg


class Failed(Exception):
    pass


class Module:
    def fail_json(self, **kwargs):
        raise Failed(kwargs)

    def run_command(self, argv):  # pragma: no cover - a client is only made here
        raise AssertionError(argv)


def params(**extra):
    base = {name: spec.get("default") for name, spec in lg.argument_spec().items()}
    base.update(vmid=101, node="pve1")
    base.update(extra)
    return base


@pytest.mark.parametrize("extra, method", [
    (dict(api_host="pve", api_user="root@pam", api_password="pw"), "api"),
    (dict(api_host="pve", api_user="ops@pam", api_password="pw"), "pct"),   # PVE refuses devN to other users
    (dict(api_host="pve", api_user="root@pam", api_token_id="root@pam!t", api_token_secret="s"), "pct"),  # and tokens
    (dict(api_user="root@pam", api_password="pw"), "pct"),                  # no API host: pct on the node
    (dict(method="api"), "api"),
    (dict(method="pct", api_host="pve", api_user="root@pam", api_password="pw"), "pct"),
])
def test_choose_method(extra, method):
    assert lg.choose_method(params(**extra)) == method


def test_secrets_are_no_log_and_come_from_the_environment():
    spec = lg.argument_spec()
    assert spec["api_password"]["no_log"] is True and spec["api_token_secret"]["no_log"] is True
    assert spec["api_password"]["fallback"][1] == ["PROXMOX_PASSWORD"]
    assert spec["api_token_secret"]["fallback"][1] == ["PROXMOX_TOKEN_SECRET"]


@pytest.mark.parametrize("extra, message", [
    (dict(api_user="root@pam", api_password="pw"), "method api needs api_host"),
    (dict(api_host="pve", node=None, api_password="pw"), "method api needs api_user, node"),
    (dict(api_host="pve", api_user="root@pam"), "method api needs api_password (root@pam) or an API token"),
])
def test_an_api_client_needs_its_connection_and_a_secret(monkeypatch, extra, message):
    monkeypatch.setattr(client, "HAS_PROXMOXER", True)
    with pytest.raises(Failed) as exc:
        lg.make_client(Module(), params(**extra), "api")
    assert exc.value.args[0]["msg"] == message


def test_a_pct_client_needs_pct_here(tmp_path):
    with pytest.raises(Failed) as exc:
        lg.make_client(Module(), params(pct_path=str(tmp_path / "pct")), "pct")
    assert "%s is not here on " % (tmp_path / "pct") in exc.value.args[0]["msg"]
    pct = tmp_path / "pct"
    pct.write_text("#!/bin/sh\n")
    pct.chmod(0o755)
    made = lg.make_client(Module(), params(pct_path=str(pct)), "pct")
    assert isinstance(made, client.PctClient) and made.vmid == "101" and made.pct == str(pct)


@pytest.mark.parametrize("message, status, method, explained", [
    ("403 Forbidden", 403, "api", True),
    ("403 Forbidden", 403, "pct", False),
    ("500 " + client.DENIED_DEV, 500, "api", True),
    ("CT is locked", None, "pct", False),
])
def test_explain_names_the_root_pam_rule_only_for_a_refused_devn(message, status, method, explained):
    text = lg.explain(client.PveFailure(message, status), method, {"vmid": 7})
    assert text.startswith("CT 7: " + message)
    assert ("PVE lets only root@pam with a password set devN" in text) is explained
