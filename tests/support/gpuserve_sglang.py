"""The sglang_server helper (roles/sglang_server/files/usr/local/sbin/gpuserve_sglang.py) run in-process by its tests:
the name it is imported by and its command line. The `helper` fixture is in tests/unit/roles/conftest.py."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELPER = os.path.join(ROOT, "roles", "sglang_server", "files", "usr", "local", "sbin", "gpuserve_sglang.py")
# the name scripts/mutation's mutmut keys its mutants by
NAME = "ansible_collections.gpuserve.sglang.roles.sglang_server.files.usr.local.sbin.gpuserve_sglang"


def run_main(helper, monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang"] + list(argv))
    rc = helper.main()
    out = capsys.readouterr()
    return rc, out.out, out.err


def run_json(helper, monkeypatch, capsys, *argv):
    rc, out, err = run_main(helper, monkeypatch, capsys, *argv)
    return rc, json.loads(out), err
