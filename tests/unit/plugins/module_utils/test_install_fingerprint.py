"""_install_fingerprint: the one recipe of an SGLang install's fingerprint (sglang_install's import check and
sglang_server's argument check). Its value is pinned: a record written before the recipe moved must stay valid."""
import hashlib
import json
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _install_fingerprint as fp

CLEAN = {"rc": 0, "error": "", "commit": "a" * 40, "changes": [], "dirty": False}
PROBE = '{"python": "3.11.2", "dists": [["sglang", "0.5.23"]]}'


def test_the_probe_is_the_venvs_python_isolated_listing_itself():
    with open(fp._fingerprint_probe.__file__, encoding="utf-8") as handle:
        script = handle.read()
    assert fp.probe_argv("/opt/sglang/venv/bin/python") == ["/opt/sglang/venv/bin/python", "-I", "-c", script]
    out = subprocess.run(fp.probe_argv(sys.executable), capture_output=True, text=True, check=True).stdout
    listed = json.loads(out)
    assert listed["python"] == sys.version
    assert ["pytest", pytest.__version__] in listed["dists"] and listed["dists"] == sorted(listed["dists"])


def test_the_fingerprint_is_sha256_of_exactly_these_inputs():
    inputs = {"module": "sglang.srt.server_args", "head": "a" * 40, "status": [], "venv": PROBE, "pyvenv_cfg": "f00"}
    want = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    assert fp.install_fingerprint(CLEAN, 0, PROBE + "\n", "f00", "sglang.srt.server_args") == want


@pytest.mark.parametrize("tree, rc", [
    (dict(CLEAN, rc=128), 0),                    # git failed
    (dict(CLEAN, commit=None), 0),               # no commit yet
    (dict(CLEAN, changes=[" M a.py"]), 0),       # local changes: their content is not in the status line
    (CLEAN, 1),                                  # the venv's python did not answer
])
def test_no_fingerprint_when_an_input_cannot_be_read_whole(tree, rc):
    assert fp.install_fingerprint(tree, rc, PROBE, "f00", "m") is None


@pytest.mark.parametrize("change", ["head", "venv", "pyvenv_cfg", "module"])
def test_each_input_changes_the_fingerprint(change):
    args = {"tree": CLEAN, "probe": PROBE, "cfg": "f00", "module": "m"}
    before = fp.install_fingerprint(args["tree"], 0, args["probe"], args["cfg"], args["module"])
    if change == "head":
        args["tree"] = dict(CLEAN, commit="b" * 40)
    elif change == "venv":
        args["probe"] = PROBE.replace("0.5.23", "0.5.24")
    elif change == "pyvenv_cfg":
        args["cfg"] = "f01"
    else:
        args["module"] = "other"
    assert fp.install_fingerprint(args["tree"], 0, args["probe"], args["cfg"], args["module"]) != before


def test_pyvenv_cfg_digest_is_the_files_sha1_or_none(tmp_path):
    (tmp_path / "pyvenv.cfg").write_bytes(b"home = /usr/bin\n")
    assert fp.pyvenv_cfg_digest(str(tmp_path)) == hashlib.sha1(b"home = /usr/bin\n").hexdigest()
    assert fp.pyvenv_cfg_digest(str(tmp_path / "nowhere")) is None
