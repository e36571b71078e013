"""The sglang_gateway role's launcher, with a stand-in `smg` package (its parse_router_args is an argparse parser
with two of smg's flags; launch_router records what it got). The real smg runs it in tests/lab/test_gateway.py."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LAUNCHER = os.path.join(ROOT, "roles", "sglang_gateway", "files", "gpuserve_smg_launch.py")
FAKE_SMG = '''
import argparse, json, os

def parse_router_args(args):
    p = argparse.ArgumentParser()
    for n in range(200):
        p.add_argument("--filler-%d" % n)
    p.add_argument("--port", type=int)
    p.add_argument("--control-plane-api-keys", nargs="*", default=[])
    return p.parse_args(args)

def launch_router(ns):
    with open(os.environ["LAUNCHED"], "w") as out:
        json.dump(vars(ns), out)
'''


@pytest.fixture
def smg(tmp_path):
    pkg = tmp_path / "site" / "smg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_router.py").write_text(FAKE_SMG)
    return tmp_path


def launch(smg, *argv):
    env = dict(os.environ, PYTHONPATH=str(smg / "site"), LAUNCHED=str(smg / "launched.json"))
    return subprocess.run([sys.executable, LAUNCHER] + [str(a) for a in argv], capture_output=True, text=True,
                          env=env, timeout=60)


def args_file(smg, args):
    path = smg / "args.json"
    path.write_text(json.dumps(args))
    return path


def test_the_keys_come_from_the_file_and_follow_the_arguments(smg):
    keys = smg / "keys"
    keys.write_text("# the admin key\ngpuserve:gpuserve-ansible:admin:s3cret-s3cret-s3cret\n\n  k2:viewer:user:abc  \n")
    out = launch(smg, args_file(smg, ["--port", "30080"]), keys)
    assert out.returncode == 0, out.stderr
    got = json.loads((smg / "launched.json").read_text())
    assert got["port"] == 30080
    assert got["control_plane_api_keys"] == ["gpuserve:gpuserve-ansible:admin:s3cret-s3cret-s3cret",
                                             "k2:viewer:user:abc"]


def test_no_keys_file(smg):
    out = launch(smg, args_file(smg, ["--port", "1"]), "-")
    assert out.returncode == 0, out.stderr
    assert json.loads((smg / "launched.json").read_text())["control_plane_api_keys"] == []


def test_check_parses_and_starts_nothing(smg):
    path = args_file(smg, ["--port", "30080"])
    out = launch(smg, "--check", path)
    assert out.returncode == 0 and out.stdout == "smg launch arguments parse: %s\n" % path
    assert not (smg / "launched.json").exists()


def test_check_reports_only_smg_s_error_line(smg):
    out = launch(smg, "--check", args_file(smg, ["--port", "often"]))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("smg (version unknown) refuses these launch arguments: gpuserve_smg_launch.py: error: "
                          "argument --port: invalid int value: 'often'\n")


@pytest.mark.parametrize("content", ['{"port": 1}', '["--port", 1]'])
def test_an_arguments_file_that_is_not_a_list_of_strings_is_refused(smg, content):
    path = smg / "args.json"
    path.write_text(content)
    out = launch(smg, "--check", path)
    assert out.returncode == 1
    assert out.stderr.strip() == "%s: expected a JSON list of strings (the smg launch arguments)" % path


def test_wrong_usage_prints_the_usage(smg):
    out = launch(smg, "only-one")
    assert out.returncode == 1 and "gpuserve_smg_launch.py ARGS_JSON KEYS_FILE" in out.stderr
