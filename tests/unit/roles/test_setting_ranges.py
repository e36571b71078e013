"""Every role setting that is a number has a range rule: argument specs check types only, so each role's
vars/main.yml lists its settings with a rule of gpuserve.sglang.setting_problems, and its preflight refuses before
anything changes. Architecture rules in the manner of test_shared_settings.py: the message names what to fix."""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(r for r in os.listdir(os.path.join(ROOT, "roles"))
               if os.path.exists(os.path.join(ROOT, "roles", r, "meta", "argument_specs.yml")))
# Number settings with no rule of their own, and why.
EXEMPT = {
    "proxmox_vmid": "a VMID: PVE's own range, proxmox_container's preflight checks it (it runs first in deploy)",
    "proxmox_container_vmid": "its preflight checks PVE's VMID range (100 to 999999999) by pattern",
    "nvidia_userspace_vmid": "proxmox_vmid by default, checked by proxmox_container's preflight",
    "gpuserve_gpu_count": "each role's own count defaults to it and has the rule (sglang_server_gpu_count, "
                          "proxmox_container_gpu_count, nvidia_userspace_gpu_count)",
    "gpuserve_gpus": "each role's own list defaults to it and has the rule (proxmox_container_gpus, "
                     "sglang_server_gate_minors); gpu_ownership_conflicts refuses what is not a minor",
}


def load(role, part):
    path = os.path.join(ROOT, "roles", role, part, "main.yml")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def rules():
    """{setting name: (role, rule entry)} over every role's __<role>_setting_rules."""
    found = {}
    for role in ROLES:
        for entry in load(role, "vars").get("__%s_setting_rules" % role, []):
            found[entry["name"]] = (role, entry)
    return found


def number_options(role):
    specs = yaml.safe_load(open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")))["argument_specs"]
    options = {name: opt for spec in specs.values() for name, opt in (spec.get("options") or {}).items()}
    return sorted(name for name, opt in options.items()
                  if opt.get("type") in ("int", "float") or (opt.get("type") == "list"
                                                             and opt.get("elements") in ("int", "float")))


@pytest.mark.parametrize("role", ROLES)
def test_every_number_setting_has_a_range_rule(role):
    have = rules()
    missing = [name for name in number_options(role) if name not in have and name not in EXEMPT]
    assert missing == [], ("roles/%s/meta/argument_specs.yml: %s have a number type but no range rule; add each to "
                           "its role's __<role>_setting_rules in vars/main.yml (or to EXEMPT here, with the reason)"
                           % (role, ", ".join(missing)))


def test_each_rule_reads_the_setting_it_names_and_uses_a_known_rule():
    from ansible_collections.gpuserve.sglang.plugins.filter.settings import RULES
    wrong = {name: entry["value"] for name, (_role, entry) in rules().items()
             if not re.search(r"\b%s\b" % re.escape(name), str(entry["value"]))}
    assert wrong == {}, "a rule's value must read the setting its name says"
    unknown = {name: entry["rule"] for name, (_role, entry) in rules().items() if entry["rule"].rstrip("[]") not in RULES}
    assert unknown == {}


@pytest.mark.parametrize("role", [r for r in ROLES if "__%s_setting_rules" % r in load(r, "vars")])
def test_the_preflight_checks_the_rules(role):
    with open(os.path.join(ROOT, "roles", role, "tasks", "preflight.yml" if role != "sglang_server" else "settings.yml"),
              encoding="utf-8") as handle:
        text = handle.read()
    assert "__%s_setting_rules | gpuserve.sglang.setting_problems" % role in text


@pytest.mark.foreign_python  # ansible-playbook renders the rules (pytest.ini)
def test_the_defaults_are_in_range(tmp_path, collections_path):
    """Every role's rules, rendered with its defaults (the shared ones too), find nothing: a default out of its range
    would refuse every run."""
    files = [os.path.join(ROOT, "roles", "gpuserve", "defaults", "main.yml")]
    tasks = []
    for role in ROLES:
        if "__%s_setting_rules" % role not in load(role, "vars"):
            continue
        files += [os.path.join(ROOT, "roles", role, part, "main.yml") for part in ("defaults", "vars")]
        tasks.append({"ansible.builtin.debug": {"msg": "%s {{ __%s_setting_rules | gpuserve.sglang.setting_problems "
                                                       "| to_json }}" % (role, role)}})
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"sglang_server_args": {"model_path": "/m"}, "proxmox_vmid": 101, "gpuserve_pve_host": "pve",
                      "groups": {"sglang": ["localhost"], "sglang_gateway": []}},
             "tasks": [{"ansible.builtin.include_vars": {"file": f}} for f in files] + tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                          "-c", "local", str(tmp_path / "play.yml")], capture_output=True, text=True, env=env, cwd=ROOT,
                         check=False)
    report = json.loads(out.stdout)
    msgs = [r["msg"] for t in report["plays"][0]["tasks"] for r in t["hosts"].values() if "msg" in r]
    assert out.returncode == 0, msgs or out.stderr
    assert sorted(m.split(" ", 1)[0] for m in msgs) == sorted(r for r in ROLES if "__%s_setting_rules" % r in load(r, "vars"))
    assert [m for m in msgs if not m.endswith(" []")] == []
