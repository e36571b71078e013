"""Each role option is written once in its meta/argument_specs.yml: entry points that share options share one
block through YAML anchors (roles/sglang_server), so the copies cannot drift apart. And each role variable is
described once, there: defaults/main.yml holds values only, under a short header that points to the spec and names
the options it leaves without a default, and every variable it sets has a described spec option."""
import bisect
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(r for r in os.listdir(os.path.join(ROOT, "roles"))
               if os.path.exists(os.path.join(ROOT, "roles", r, "meta", "argument_specs.yml")))


def spec_text(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("role", ROLES)
def test_each_option_is_written_once(role):
    specs = yaml.safe_load(spec_text(role))["argument_specs"]
    names = {name for spec in specs.values() for name in (spec.get("options") or {})}
    written = {name: len(re.findall(r"^\s+%s:\s*$" % re.escape(name), spec_text(role), re.M)) for name in names}
    assert {name: n for name, n in written.items() if n != 1} == {}, "use a YAML anchor for a shared options block"


def test_sglang_server_entry_points_share_the_options():
    specs = yaml.safe_load(spec_text("sglang_server"))["argument_specs"]
    options = {entry: spec["options"] for entry, spec in specs.items()}
    assert options["restart"] == options["verify"]
    assert options["main"] == options["audit"]
    launch = set(options["main"]) - set(options["restart"])
    assert launch == {"sglang_server_args", "sglang_server_base_args", "sglang_server_enabled",
                      "sglang_server_force_restart"}
    assert {k: v for k, v in options["main"].items() if k not in launch} == options["restart"]


def defaults_text(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as f:
        return f.read()


def comments(text):
    """(line number, comment) of each YAML comment of text: a '#' outside every token the YAML scanner reads (a
    comment is the one thing it skips), so one inside a quoted, plain or block scalar is not one."""
    spans = sorted((t.start_mark.index, t.end_mark.index) for t in yaml.scan(text))
    starts = [start for start, _ in spans]
    found = []
    for m in re.finditer("#", text):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and spans[i][0] <= m.start() < spans[i][1]:
            continue
        if found and found[-1][0] == text.count("\n", 0, m.start()) + 1:
            continue  # a '#' inside a comment already found
        found.append((text.count("\n", 0, m.start()) + 1, text[m.start():].split("\n", 1)[0]))
    return found


HEADER = 2  # lines: the role and the pointer to the spec; the options without a default


def header_problems(role, text, unset):
    """What is wrong with the comments of a role's defaults text, whose spec options `unset` it leaves unset."""
    where = "roles/%s/defaults/main.yml" % role
    lines = text.split("\n")
    first = 1 if lines[0].strip() == "---" else 0
    header = 0
    while first + header < len(lines) and lines[first + header].startswith("#"):
        header += 1
    problems = ["%s:%d: a comment outside the header (describe the variable in meta/argument_specs.yml): %s"
                % (where, n, c) for n, c in comments(text) if not first < n <= first + header]
    if header > HEADER:
        problems.append("%s: a header of %d comment lines, at most %d" % (where, header, HEADER))
    head = lines[first:first + header]
    if not head or "gpuserve.sglang.%s" % role not in head[0] or "meta/argument_specs.yml" not in head[0]:
        problems.append("%s:%d: the header's first line names gpuserve.sglang.%s and meta/argument_specs.yml"
                        % (where, first + 1, role))
    named = set()
    for line in head[1:]:
        if line.startswith("# No default: "):
            named |= set(re.findall(r"[a-z_]+", line[len("# No default: "):]))
    if named != set(unset):
        problems.append("%s: the header's '# No default: ...' line names %s, the spec options it leaves unset are %s"
                        % (where, sorted(named), sorted(unset)))
    return problems


def options(role):
    specs = yaml.safe_load(spec_text(role))["argument_specs"]
    return {name: opt for spec in specs.values() for name, opt in (spec.get("options") or {}).items()}


@pytest.mark.parametrize("role", ROLES)
def test_defaults_hold_values_only_under_a_short_header(role):
    unset = set(options(role)) - set(yaml.safe_load(defaults_text(role)) or {})
    assert header_problems(role, defaults_text(role), unset) == []


def described(opt):
    text = opt.get("description") if isinstance(opt, dict) else None
    parts = text if isinstance(text, list) else [text]
    return bool(parts) and all(isinstance(p, str) and p.strip() for p in parts)


@pytest.mark.parametrize("role", ROLES)
def test_each_default_is_a_described_spec_option(role):
    opts = options(role)
    names = yaml.safe_load(defaults_text(role)) or {}
    missing = [name for name in names if name not in opts]
    undescribed = [name for name in names if name in opts and not described(opts[name])]
    assert (missing, undescribed) == ([], []), (
        "roles/%s/defaults/main.yml: variables without a spec option %s, with an empty description %s; describe "
        "each in meta/argument_specs.yml" % (role, missing, undescribed))


def test_the_checker_sees_each_kind_of_comment():
    text = ("---\n# gpuserve.sglang.r defaults: see meta/argument_specs.yml.\n# No default: r_key.\n"
            "r_url: https://example.com/a#b\nr_quoted: \"x # y\"\nr_single: 'x # y'\n"
            "r_folded: >-\n  {{ a }} # kept\n  # kept too\nr_dict:\n  # why this key\n  k: v  # inline\n"
            "r_list:\n  - a\n# trailing\n")
    found = header_problems("r", text, {"r_key"})
    assert [p.split(":")[1] for p in found] == ["11", "12", "15"], found
    assert header_problems("r", text.replace("No default: r_key", "No default: r_other"), {"r_key"})[-1].startswith(
        "roles/r/defaults/main.yml: the header's")
    assert header_problems("r", "---\nr_a: 1\n", set()) == [
        "roles/r/defaults/main.yml:2: the header's first line names gpuserve.sglang.r and meta/argument_specs.yml"]
    assert described({"description": ["a", "b"]}) and not described({"description": ""})
    assert not described({"type": "str"}) and not described({"description": ["a", " "]})
