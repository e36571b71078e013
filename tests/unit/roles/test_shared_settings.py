"""Each setting several roles need is defined once, in roles/gpuserve/defaults/main.yml (the role every role
depends on): no other role's defaults, vars or argument_specs, and no inventory, repeats its value; nothing reads
another role's files by path.

The settings' values come from this checkout's roles/gpuserve. GPUSERVE_SETTINGS_ROOT=<another checkout> scans
that tree instead (the tree before roles/gpuserve existed fails every test here)."""
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROOT = os.path.abspath(os.environ.get("GPUSERVE_SETTINGS_ROOT") or HERE)
COMMON = "gpuserve"


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


SETTINGS = load(os.path.join(HERE, "roles", COMMON, "defaults", "main.yml"))
# Shared path, name and URL literals: a value holding one of them (as a whole path component) repeats it.
LITERALS = {name: SETTINGS[name] for name in
            ("gpuserve_venv", "gpuserve_src_dir", "gpuserve_env_file", "gpuserve_unit", "gpuserve_gpu_info_root")}
LITERALS["gpuserve_sglang_repo_url"] = "https://github.com/sgl-project/sglang.git"
PORT = SETTINGS["gpuserve_port"]
# gpuserve_gpu_count defaults to the length of gpuserve_gpus, else a literal count: that literal is the setting.
GPU_COUNT = SETTINGS["gpuserve_gpu_count"]
if isinstance(GPU_COUNT, str):
    GPU_COUNT = int(re.fullmatch(r"\{\{ gpuserve_gpus \| length if gpuserve_gpus else (\d+) \}\}", GPU_COUNT).group(1))
NCCL_NAMES = set(SETTINGS["gpuserve_nccl_env"])
# Keys whose literal value would be a second GPU count (the benchmark's host count 0 means "any": not one).
GPU_COUNT_KEY = re.compile(r"(gpu_count|tp_size|expected_count)$")
SHA = re.compile(r"\b[0-9a-f]{40}\b")


def roles():
    """Every role but the settings role and what it depends on itself (setting_types, which checks every role's
    settings before the settings role's own argument check)."""
    own = [dep["role"].split(".")[-1] for dep in load(os.path.join(ROOT, "roles", COMMON, "meta", "main.yml"))
           .get("dependencies") or []]
    return sorted(r for r in os.listdir(os.path.join(ROOT, "roles"))
                  if r != COMMON and r not in own and not r.startswith("."))


def walk(value, path):
    """(path, key, scalar) for every scalar in value; key is the innermost mapping key above it."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, path + [str(key)])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from walk(item, path + [str(i)])
    else:
        yield path, value


def repeats(data, where):
    """Every place in data that repeats a shared setting's value, as 'where path: why'."""
    found = []
    for path, value in walk(data, []):
        at = "%s %s" % (where, ".".join(path))
        keys = [p for p in path if not p.isdigit() and p not in ("default", "options")]
        if set(path) & NCCL_NAMES:
            found.append("%s: an NCCL variable (gpuserve_nccl_env)" % at)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if value == PORT:
                found.append("%s: the port %d (gpuserve_port)" % (at, value))
            if value == GPU_COUNT and keys and GPU_COUNT_KEY.search(keys[-1]):
                found.append("%s: a GPU count %d (gpuserve_gpu_count)" % (at, value))
            continue
        if not isinstance(value, str):
            continue
        for name, literal in LITERALS.items():
            if re.search(r"(^|[\s/=:,\[\"'])%s($|[\s/,\]\"'])" % re.escape(literal), value):
                found.append("%s: %r holds %s (%s)" % (at, value, literal, name))
        if re.search(r"(?<![\d.])%d(?![\d.])" % PORT, value) and "{{" not in value:
            found.append("%s: %r holds the port %d (gpuserve_port)" % (at, value, PORT))
        if SHA.search(value):
            found.append("%s: %r is a commit (gpuserve_sglang_commit)" % (at, value))
    return found


def role_files(role):
    """(label, data) of a role's defaults, vars and argument_specs option defaults."""
    base = os.path.join(ROOT, "roles", role)
    for part in ("defaults", "vars"):
        path = os.path.join(base, part, "main.yml")
        if os.path.exists(path):
            yield "roles/%s/%s/main.yml" % (role, part), load(path) or {}
    specs = load(os.path.join(base, "meta", "argument_specs.yml"))["argument_specs"]
    for entry, spec in specs.items():
        defaults = {name: opt["default"] for name, opt in (spec.get("options") or {}).items() if "default" in opt}
        yield "roles/%s/meta/argument_specs.yml %s" % (role, entry), defaults


@pytest.mark.parametrize("role", roles())
def test_no_role_repeats_a_shared_setting(role):
    found = [line for label, data in role_files(role) for line in repeats(data, label)]
    assert not found, "set these from roles/gpuserve's variables instead:\n" + "\n".join(found)


def inventory_files():
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "inventory")):
        for name in sorted(files):
            if name.endswith((".yml", ".yaml")):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, ROOT), load(path) or {}


def aliases():
    """Role variables whose default is exactly one shared setting: the inventory sets the shared one."""
    out = {}
    for role in roles():
        defaults = load(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) or {}
        for name, value in defaults.items():
            m = re.fullmatch(r"\{\{ (gpuserve_[a-z_]+) \}\}", value) if isinstance(value, str) else None
            if m and m.group(1) in SETTINGS:
                out[name] = m.group(1)
    return out


def test_an_inventory_sets_each_shared_setting_once():
    found, alias = [], aliases()
    for label, data in inventory_files():
        # hosts.yml and group_vars alike; the gpuserve_* settings themselves are where the values belong
        for path, value in walk(data, []):
            if any(p in SETTINGS for p in path):
                continue
            found += repeats({".".join(path): value}, label)
            found += ["%s %s: set %s instead (its default)" % (label, ".".join(path), alias[p])
                      for p in path if p in alias]
    assert not found, "\n".join(sorted(set(found)))


def test_every_role_depends_on_the_settings_role():
    def dependencies(role):
        return load(os.path.join(ROOT, "roles", role, "meta", "main.yml")).get("dependencies") or []

    missing = [role for role in roles() if {"role": "gpuserve.sglang.gpuserve"} not in dependencies(role)]
    assert not missing, "add gpuserve.sglang.gpuserve to meta/main.yml dependencies of: %s" % ", ".join(missing)


def test_nothing_reads_a_role_file_by_path():
    found = []
    for top in ("playbooks", "roles", "molecule"):
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith((".yml", ".yaml", ".j2")):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        for n, line in enumerate(f, 1):
                            if re.search(r"/[a-z_]+/(defaults|vars)/main\.yml|lookup\(.*\broles\b", line):
                                found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), n, line.strip()))
    assert not found, "use the variable (roles/gpuserve), not the file:\n" + "\n".join(found)


def test_argument_spec_defaults_mirror_the_role_defaults():
    mismatched = []
    for role in os.listdir(os.path.join(ROOT, "roles")):
        defaults = load(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) or {}
        specs = load(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))["argument_specs"]
        for entry, spec in specs.items():
            for name, opt in (spec.get("options") or {}).items():
                if "default" in opt and name in defaults and opt["default"] != defaults[name]:
                    mismatched.append("%s %s %s: spec %r, defaults %r"
                                      % (role, entry, name, opt["default"], defaults[name]))
    assert not mismatched, "\n".join(mismatched)


# The health reads that refuse nothing (the audit's, the benchmark's after each run): every check of the gate's
# health stage at warn, each role's list derived from _gpu_health.CHECKS (filter gpuserve.sglang.health_checks).
# role: (the file that holds the read's checks, the name of the variable in it)
HEALTH_READS = {"sglang_server": ("tasks/audit.yml", "__sglang_server_health_checks"),
                "sglang_benchmark": ("vars/main.yml", "__sglang_benchmark_health_checks")}


def defined(data, name):
    """The value of the variable name wherever data (a vars file, or a task list and its tasks' vars) sets it."""
    if isinstance(data, dict):
        if name in data:
            return data[name]
        data = list(data.values())
    for item in data if isinstance(data, list) else []:
        value = defined(item, name)
        if value is not None:
            return value
    return None


def rendered(value):
    """A role variable's value as Ansible renders it, with this collection's health_checks filter."""
    from jinja2.nativetypes import NativeEnvironment
    from ansible_collections.gpuserve.sglang.plugins.filter.gpu_health import health_checks
    env = NativeEnvironment()
    env.filters["gpuserve.sglang.health_checks"] = health_checks
    return env.from_string(value).render() if isinstance(value, str) else value


@pytest.mark.parametrize("role", sorted(HEALTH_READS))
def test_the_warn_only_health_reads_read_every_gate_check(role):
    from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_health import CHECKS
    path, name = HEALTH_READS[role]
    value = defined(load(os.path.join(ROOT, "roles", role, path)) or {}, name)
    assert value is not None, "roles/%s/%s no longer defines %s: update HEALTH_READS" % (role, path, name)
    assert rendered(value) == dict((check, "warn") for check in CHECKS), (
        "roles/%s/%s %s must be every check of _gpu_health.CHECKS at warn: set it to "
        "\"{{ 'warn' | gpuserve.sglang.health_checks }}\"" % (role, path, name))


def test_the_health_check_comparison_sees_a_missing_check():
    from ansible_collections.gpuserve.sglang.plugins.module_utils._gpu_health import CHECKS
    hand = dict((check, "warn") for check in CHECKS[:-1])
    assert rendered(hand) != dict((check, "warn") for check in CHECKS)
    assert rendered("{{ 'warn' | gpuserve.sglang.health_checks }}") == dict((check, "warn") for check in CHECKS)


def test_the_checker_sees_each_kind_of_repeat():
    data = {"a_python": "/opt/sglang/venv/bin/python", "a_unit_file": "/etc/systemd/system/sglang.service",
            "a_url": "http://127.0.0.1:30000", "a_port": 30000, "a_gpu_count": 8, "args": {"tp_size": 8},
            "an_env": {"NCCL_PROTO": "LL"}, "a_pin": "eaeec662aedac01d0934eefa0eb20aba0781315d",
            "an_env_file": "/etc/gpuserve/nccl.env", "a_src": "/opt/sglang/src",
            "a_repo": "https://github.com/sgl-project/sglang.git"}
    found = repeats(data, "x")
    assert len(found) == len(data), found
    fine = {"a_python": "{{ gpuserve_venv }}/bin/python", "an_other_venv": "/opt/sglang/venv2",
            "a_timeout": 300000, "a_bench_gpu_count": 0, "a_count": 8, "a_url": "http://127.0.0.1:{{ gpuserve_port }}",
            "a_lab_flag": True}
    assert repeats(fine, "x") == []


PLAYBOOK = """
- name: roles
  hosts: localhost
  gather_facts: false
  roles: [probe]
- name: import_role, include_role, include_role with tasks_from
  hosts: localhost
  gather_facts: false
  tasks:
    - {ansible.builtin.import_role: {name: probe}}
    - {ansible.builtin.include_role: {name: probe}}
    - {ansible.builtin.include_role: {name: probe, tasks_from: other}}
- name: the inventory or the play overrides the shared default
  hosts: localhost
  gather_facts: false
  vars: {gpuserve_venv: /srv/venv}
  tasks:
    - {ansible.builtin.include_role: {name: probe, tasks_from: other}}
"""


@pytest.mark.foreign_python  # ansible-playbook runs the collection in another process (pytest.ini)
def test_a_dependent_role_sees_the_shared_defaults_however_it_is_run(tmp_path, collections_path):
    """The playbooks run roles with roles:, import_role and include_role (tasks_from too, as audit, restart and
    molecule's verify do): a role depending on gpuserve.sglang.gpuserve resolves its defaults from it each way."""
    role = tmp_path / "roles" / "probe"
    for part in ("defaults", "meta", "tasks"):
        (role / part).mkdir(parents=True)
    (role / "defaults" / "main.yml").write_text('probe_python: "{{ gpuserve_venv }}/bin/python"\n')
    (role / "meta" / "main.yml").write_text("dependencies: [{role: gpuserve.sglang.gpuserve}]\n")
    for entry in ("main", "other"):
        (role / "tasks" / (entry + ".yml")).write_text(
            "- ansible.builtin.debug: {msg: 'PROBE %s {{ probe_python }} {{ gpuserve_port }}'}\n" % entry)
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(HERE, "ansible.cfg"),
               ANSIBLE_ROLES_PATH=str(tmp_path / "roles"), ANSIBLE_COLLECTIONS_PATH=collections_path,
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    playbook = shutil.which("ansible-playbook") or os.path.join(os.path.dirname(sys.executable),
                                                                "ansible-playbook")
    out = subprocess.run([playbook, "-i", "localhost,", "-c", "local", str(tmp_path / "pb.yml")], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    probes = re.findall(r"PROBE \w+ \S+ \d+", out.stdout)
    assert probes == ["PROBE main /opt/sglang/venv/bin/python 30000"] * 3 + [
        "PROBE other /opt/sglang/venv/bin/python 30000", "PROBE other /srv/venv/bin/python 30000"], out.stdout
