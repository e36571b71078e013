"""A setting renamed for one name per concept (docs/architecture.md "Names") is refused by its old name,
never silently ignored: each role's preflight, run by ansible-playbook on localhost with the old name set, fails
first, naming the old and the new name; without it, the preflight gets past that check."""
import os
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.foreign_python  # ansible-playbook runs the role in a process of its own
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RENAMED = {"nvidia_userspace": ("nvidia_userspace_expected_gpu_count", "nvidia_userspace_gpu_count"),
           "sglang_benchmark": ("sglang_benchmark_expected_count", "sglang_benchmark_min_gpu_count")}


def preflight(tmp_path, role, **evars):
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "gpuserve.sglang." + role, "tasks_from": "preflight"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
            "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml")]
    for key, value in evars.items():
        argv += ["-e", "%s=%s" % (key, value)]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)


@pytest.mark.parametrize("role", sorted(RENAMED))
def test_an_old_name_is_refused_naming_the_new_one(tmp_path, role):
    old, new = RENAMED[role]
    out = preflight(tmp_path, role, **{old: 8})
    assert out.returncode != 0
    assert "%s is now %s (renamed in 0.2.0): set the new name instead." % (old, new) in out.stdout, out.stdout[-3000:]


@pytest.mark.parametrize("role", sorted(RENAMED))
def test_without_an_old_name_the_check_passes(tmp_path, role):
    out = preflight(tmp_path, role)
    assert "Refuse a setting by a name it no longer has" in out.stdout
    assert "renamed in 0.2.0" not in out.stdout, out.stdout[-3000:]


def test_each_renamed_setting_is_listed_in_its_role_and_gone_from_its_spec():
    for role, (old, new) in RENAMED.items():
        with open(os.path.join(ROOT, "roles", role, "vars", "main.yml"), encoding="utf-8") as handle:
            assert yaml.safe_load(handle)["__%s_renamed" % role][old] == new
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
            spec = handle.read()
        assert old not in spec and new in spec
