"""Writes roles/<role>/README.md from the role's meta/argument_specs.yml, the one source of its options (Galaxy
wants a README per role). `python scripts/role_readmes.py` rewrites them; `--check` exits 1 when one is stale
(tests/unit/test_packaging.py runs it)."""
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKUP = re.compile(r"\b([OVCRI]|RV)\(([^)]*)\)")


def text(value):
    """Ansible doc markup (O(), V(), C(), RV(), I()) as Markdown code, list of paragraphs joined."""
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n\n".join(text(v) for v in value)
    return MARKUP.sub(lambda m: "`%s`" % m.group(2), str(value)).replace("|", "\\|")


def cell(value):
    return text(value).replace("\n\n", "<br>").replace("\n", " ")


def default(spec):
    if "default" not in spec:
        return "**required**" if spec.get("required") else ""
    value = spec["default"]
    rendered = yaml.safe_dump(value, default_flow_style=True, width=10000).strip()
    rendered = rendered[:-4] if rendered.endswith("\n...") else rendered
    return "`%s`" % rendered.replace("|", "\\|")


def render(role):
    """The README: the role, its entry points (each with how to call it and which options it takes) and one table of
    every option, each once (an option several entry points share is the same YAML anchor in the spec)."""
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as f:
        specs = yaml.safe_load(f)["argument_specs"]
    main = specs.get("main", next(iter(specs.values())))
    out = ["# gpuserve.sglang.%s" % role, "",
           "<!-- Generated from meta/argument_specs.yml by scripts/role_readmes.py: edit that file, not this one. -->",
           "", text(main.get("short_description")), "", text(main.get("description")), ""]
    options, takers = {}, {}
    for entry, spec in specs.items():
        for name, opt in (spec.get("options") or {}).items():
            options.setdefault(name, opt)
            takers.setdefault(name, []).append(entry)
    for entry, spec in specs.items():
        out += ["## Entry point `%s`" % entry, ""]
        if entry != "main":
            out += [text(spec.get("short_description")), ""]
        out += ["```yaml", "- ansible.builtin.import_role:", "    name: gpuserve.sglang.%s" % role]
        if entry != "main":
            out.append("    tasks_from: %s" % entry)
        mine = list(spec.get("options") or {})
        others = [name for name in options if name not in mine]
        if not options:
            takes = "none"
        elif not others:
            takes = "every one"
        elif len(others) < len(mine):
            takes = "every one but %s" % ", ".join("`%s`" % name for name in others)
        else:
            takes = ", ".join("`%s`" % name for name in mine) or "none"
        out += ["```", ""] + (["Options (see [Options](#options)): %s." % takes, ""] if len(specs) > 1 else [])
    if len(specs) > 1:
        out += ["## Options", "", "| option | type | default | entry points | description |", "|---|---|---|---|---|"]
    else:
        out += ["| option | type | default | description |", "|---|---|---|---|"]
    for name, opt in options.items():
        where = ("%s | " % ", ".join("`%s`" % e for e in takers[name])) if len(specs) > 1 else ""
        out.append("| `%s` | %s | %s | %s%s |" % (name, opt.get("type", "str"), default(opt), where,
                                                 cell(opt.get("description"))))
    return "\n".join(out).rstrip("\n") + "\n"


def roles():
    return sorted(r for r in os.listdir(os.path.join(ROOT, "roles"))
                  if os.path.exists(os.path.join(ROOT, "roles", r, "meta", "argument_specs.yml")))


def main(argv):
    stale = []
    for role in roles():
        path = os.path.join(ROOT, "roles", role, "README.md")
        want = render(role)
        have = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if have != want:
            stale.append(path)
            if "--check" not in argv:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(want)
    if "--check" in argv and stale:
        print("stale (run python scripts/role_readmes.py): %s" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
