"""gpuserve.sglang.setting_types in a real play: a setting of the wrong type fails before any role's own argument
check, in the user's words; good settings pass; each option has one spec, its owner's."""
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.action import setting_types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role: {name: gpuserve.sglang.gpuserve}
"""


def test_the_specs_of_every_role_each_option_its_owners():
    specs = setting_types.specs()
    assert specs["gpuserve_port"]["type"] == "int" and specs["sglang_server_args"]["type"] == "dict"
    assert "Site launch settings" in str(specs["sglang_server_args"]["description"])  # sglang_server's, not the benchmark's


def play(tmp_path, collections_path, *extra):
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=collections_path,
               ANSIBLE_LOCALHOST_WARNING="false")
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                           str(tmp_path / "play.yml")] + list(extra), capture_output=True, text=True, env=env,
                          check=False)


@pytest.mark.foreign_python
def test_wrong_types_fail_first_in_the_users_words(tmp_path, collections_path):
    run = play(tmp_path, collections_path, "-e", '{"sglang_server_args": ["tp_size"], "sglang_server_entrypoint": '
               '"python -m sglang.launch_server"}', "-e", "gpuserve_port=http")
    out = " ".join(run.stdout.split())
    assert run.returncode == 2, out
    assert "TASK [gpuserve.sglang.setting_types : Every setting has the type its role takes]" in out
    assert "Validating arguments against arg spec 'main' - Settings shared" not in out  # never reached
    assert "sglang_server_args is a list ([tp_size]): it must be a mapping, e.g. {model_path:" in out
    assert 'sglang_server_entrypoint is a string ("python -m sglang.launch_server"): it must be a list of strings' in out
    assert 'gpuserve_port is a string ("http"): it must be a whole number, e.g. 30000' in out
    assert "unable to convert" not in out and "<class" not in out


@pytest.mark.foreign_python
def test_good_settings_pass(tmp_path, collections_path):
    run = play(tmp_path, collections_path, "-e", '{"sglang_server_args": {"tp_size": 8}, "gpuserve_port": "30001"}')
    assert run.returncode == 0, run.stdout
