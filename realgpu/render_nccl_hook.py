#!/usr/bin/env python3
"""Render the nccl_tuning role's own templates outside Ansible, so a GPU machine checks the hook we ship.

Reads the NCCL dict from roles/gpuserve/defaults/main.yml (gpuserve_nccl_env, nccl_tuning_env's default),
applies --set NAME=VALUE / --unset NAME, and renders with Jinja2 the role's template files (same
trim_blocks/newline settings as ansible.builtin.template, the collection's own filter plugin) into OUTDIR:
  gpuserve_nccl_env.py, gpuserve_nccl_env.pth  (copy both into a venv's site-packages)
  nccl.env, gpuserve-nccl.sh                   (the EnvironmentFile and profile.d renderings, for reference)
  expected.json                                (the normalized dict, for nccl_env_proof.py --expect)
Needs jinja2 and PyYAML (ansible-core's own dependencies; put its wheels on PYTHONPATH).
"""
import argparse
import importlib.util
import json
import os
import shlex
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLE = os.path.join(ROOT, "roles", "nccl_tuning")
TEMPLATES = {
    "gpuserve_nccl_env.py": "opt/sglang/venv/site-packages/gpuserve_nccl_env.py.j2",
    "gpuserve_nccl_env.pth": "opt/sglang/venv/site-packages/gpuserve_nccl_env.pth.j2",
    "nccl.env": "etc/gpuserve/nccl.env.j2",
    "gpuserve-nccl.sh": "etc/profile.d/gpuserve-nccl.sh.j2",
}


def _load_filters():
    try:
        import ansible.errors  # noqa: F401  (real Ansible available: use it)
    except ImportError:  # a bare python3 with jinja2 + yaml: the plugin only needs the exception class
        errors = types.ModuleType("ansible.errors")
        errors.AnsibleFilterError = ValueError
        sys.modules.setdefault("ansible", types.ModuleType("ansible"))
        sys.modules["ansible.errors"] = errors
    spec = importlib.util.spec_from_file_location(
        "gpuserve_nccl_env_filter", os.path.join(ROOT, "plugins", "filter", "nccl_env.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()


def _comment(text):
    # ansible.builtin.comment with its defaults (style plain, decoration "# ", prefix/postfix "#")
    return "#\n" + "\n".join("# " + line if line else "#" for line in str(text).split("\n")) + "\n#"


def render(env_overrides=None, unset=()):
    import jinja2
    import yaml

    with open(os.path.join(ROLE, "defaults", "main.yml")) as fh:
        defaults = yaml.safe_load(fh)
    with open(os.path.join(ROOT, "roles", "gpuserve", "defaults", "main.yml")) as fh:
        env = dict(yaml.safe_load(fh)["gpuserve_nccl_env"])
    for name in unset:
        env.pop(name, None)
    env.update(env_overrides or {})
    filters = _load_filters()
    jenv = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")),
                              trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    jenv.filters.update({
        "comment": _comment,
        "to_json": json.dumps,
        "ansible.builtin.quote": shlex.quote,
        "gpuserve.sglang.nccl_env_normalize": filters["nccl_env_normalize"],
        "gpuserve.sglang.systemd_env_quote": filters["systemd_env_quote"],
    })
    context = dict(defaults, nccl_tuning_env=env, ansible_managed="Ansible managed")
    out = {name: jenv.get_template(src).render(context) for name, src in TEMPLATES.items()}
    out["expected.json"] = json.dumps(filters["nccl_env_normalize"](env), sort_keys=True) + "\n"
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("outdir")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--unset", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set)
    os.makedirs(args.outdir, exist_ok=True)
    for name, text in render(overrides, args.unset).items():
        with open(os.path.join(args.outdir, name), "w") as fh:
            fh.write(text)
    print(os.path.join(args.outdir, "expected.json"))


if __name__ == "__main__":
    main()
