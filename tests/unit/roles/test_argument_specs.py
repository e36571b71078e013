"""Each role option is written once in its meta/argument_specs.yml: entry points that share options share one
block through YAML anchors (roles/sglang_server), so the copies cannot drift apart."""
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
