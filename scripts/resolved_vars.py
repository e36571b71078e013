"""Prints, as JSON, the value every role variable resolves to for each host of an inventory, as a play that
lists every role would see it (defaults, vars, dependencies, inventory). Nothing runs on a host.

    python scripts/resolved_vars.py [--root DIR] [--inventory PATH] > vars.json

--root is a checkout of this repository (default: this one), so the same script dumps an older tree too: a
settings refactoring shows its resolved values unchanged with `diff <(old) <(new)` (paths inside the checkout
read <root>). Names come from every
roles/*/defaults/main.yml and roles/*/vars/main.yml of that root. Values that name a password, secret, token or
credentials are replaced by a hash; a value that cannot be resolved without the target shows its error."""
import argparse
import hashlib
import json
import os
import sys

import yaml

SECRET_WORDS = ("password", "secret", "token", "credentials")


def role_names(root):
    roles = sorted(r for r in os.listdir(os.path.join(root, "roles")) if not r.startswith("."))
    names = set()
    for role in roles:
        for part in ("defaults", "vars"):
            path = os.path.join(root, "roles", role, part, "main.yml")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    names.update((yaml.safe_load(f) or {}).keys())
    return roles, sorted(names)


def plain(value, root):
    """The resolved value as JSON-able plain data (Ansible's tagged strings and dicts become str/dict), the
    checkout's own path written <root> so two checkouts compare."""
    return json.loads(json.dumps(value, default=str, sort_keys=True).replace(json.dumps(root)[1:-1], "<root>"))


def dump(root, inventory, pattern):
    os.chdir(root)
    os.environ["ANSIBLE_CONFIG"] = os.path.join(root, "ansible.cfg")
    from ansible import context
    from ansible.inventory.manager import InventoryManager
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.play import Play
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    context.CLIARGS = ImmutableDict(check=False, diff=False, verbosity=0)
    init_plugin_loader([os.path.join(root, "collections")])
    roles, names = role_names(root)
    loader = DataLoader()
    loader.set_basedir(os.path.join(root, "playbooks"))
    inv = InventoryManager(loader=loader, sources=[inventory])
    vm = VariableManager(loader=loader, inventory=inv)
    play = Play().load(dict(name="resolved", hosts=pattern, gather_facts=False,
                            roles=[dict(role="gpuserve.sglang." + r) for r in roles]),
                       variable_manager=vm, loader=loader)
    out = {}
    for host in inv.get_hosts(pattern):
        all_vars = vm.get_vars(play=play, host=host)
        templar = Templar(loader=loader, variables=all_vars)
        values = {}
        for name in names:
            if name not in all_vars:
                values[name] = "<undefined>"
                continue
            try:
                value = plain(templar.template(all_vars[name]), root)
            except Exception as exc:  # noqa: BLE001 - a value needing the target is reported, not fatal
                value = "<error %s: %s>" % (type(exc).__name__, str(exc).splitlines()[0][:160])
            if any(word in name for word in SECRET_WORDS):
                value = "<sha1 %s>" % hashlib.sha1(json.dumps(value).encode()).hexdigest()[:12]
            values[name] = value
        out[host.name] = values
    return out


def main(argv):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=here)
    parser.add_argument("--inventory", default=None, help="default: <root>/inventory/lab")
    parser.add_argument("--hosts", default="sglang")
    opts = parser.parse_args(argv)
    root = os.path.abspath(opts.root)
    inventory = os.path.abspath(opts.inventory or os.path.join(root, "inventory", "lab"))
    json.dump(dump(root, inventory, opts.hosts), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
