"""Every module's documented options, with its doc fragments merged in as ansible-doc merges them, agree with the
argument spec the module builds: names, types, elements, defaults, required and choices, suboptions included.

The gate's options are written twice (plugins/doc_fragments/_gate.py, module_utils/_gate.py GATE_ARGS); gpu_release's
O(gate) suboptions are the fragment's text again (its RELEASE section, built from the same string), so these tests
are what keeps the two in step (ansible-test's validate-modules checks the same on the built artifact, later).
It reads the repository's files, like the other packaging tests, so it stays out of the artifact (galaxy.yml
build_ignore: tests/unit/packaging)."""
import importlib
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODULES = sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", "modules"))
                 if name.endswith(".py") and not name.startswith("_"))
# a module file of an action plugin holds its docs only (as ansible.builtin.debug's): its options are the action's
ACTIONS = sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", "action")) if name.endswith(".py"))
PACKAGE = "ansible_collections.gpuserve.sglang.plugins"


class Built(Exception):
    """Raised by the fake AnsibleModule: carries the argument spec the module built."""


def built_spec(monkeypatch, name):
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))

    def fake(*args, **kwargs):
        raise Built(kwargs.get("argument_spec", args[0] if args else None))

    monkeypatch.setattr(module, "AnsibleModule", fake)
    with pytest.raises(Built) as built:
        module.main()
    return built.value.args[0]


def documented(name):
    """The module's options with this collection's doc fragments merged in, as ansible-doc does (a name in two
    places is an error there too). ansible.builtin fragments add attributes, never options."""
    module = importlib.import_module("%s.modules.%s" % (PACKAGE, name))
    doc = yaml.safe_load(module.DOCUMENTATION)
    options = dict(doc.get("options") or {})
    for fragment in doc.get("extends_documentation_fragment") or []:
        if fragment.startswith("ansible.builtin."):
            continue
        assert fragment.startswith("gpuserve.sglang."), fragment
        extra = fragment_options(*fragment.split(".")[2:])
        assert not set(extra) & set(options), (fragment, set(extra) & set(options))
        options.update(extra)
    return options


def from_spec(spec):
    return {name: dict(type=opt.get("type", "str"), elements=opt.get("elements"), default=opt.get("default"),
                       required=bool(opt.get("required", False)), choices=opt.get("choices"),
                       options=from_spec(opt["options"]) if opt.get("options") else None)
            for name, opt in spec.items()}


def from_doc(options):
    return {name: dict(type=opt.get("type", "str"), elements=opt.get("elements"), default=opt.get("default"),
                       required=bool(opt.get("required", False)), choices=opt.get("choices"),
                       options=from_doc(opt["suboptions"]) if opt.get("suboptions") else None)
            for name, opt in options.items()}


@pytest.mark.parametrize("name", [name for name in MODULES if name not in ACTIONS])
def test_module_docs_agree_with_the_argument_spec(monkeypatch, name):
    assert from_doc(documented(name)) == from_spec(built_spec(monkeypatch, name))


@pytest.mark.parametrize("name", ACTIONS)
def test_an_actions_docs_name_the_options_it_takes(name):
    action = importlib.import_module("%s.action.%s" % (PACKAGE, name))
    assert name in MODULES, "plugins/modules/%s.py documents the action" % name
    assert set(documented(name)) == set(action.ActionModule._VALID_ARGS)


def fragment_options(fragment, section="documentation"):
    module = importlib.import_module("%s.doc_fragments.%s" % (PACKAGE, fragment))
    return yaml.safe_load(getattr(module.ModuleDocFragment, section.upper()))["options"]


def test_the_gate_fragment_agrees_with_gate_args():
    from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS
    assert from_doc(fragment_options("_gate")) == from_spec(GATE_ARGS)


def test_the_target_fragment_agrees_with_target_args():
    from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import TARGET_ARGS
    assert from_doc(fragment_options("_target")) == from_spec(TARGET_ARGS)


def test_gpu_release_documents_the_gate_options_as_the_gate_module_does():
    gate = from_doc(documented("gpu_memory_gate"))
    sub = from_doc(documented("gpu_release"))["gate"]["options"]
    assert {k: v for k, v in sub.items() if k != "enabled"} == gate


def test_a_drifted_default_is_seen(monkeypatch):
    from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate
    monkeypatch.setitem(_gate.GATE_ARGS, "timeout", dict(type="float", default=60.0))
    assert from_doc(fragment_options("_gate")) != from_spec(_gate.GATE_ARGS)


def test_gpu_releases_gate_is_the_fragments_text_with_its_references_made_relative():
    """Each gate option is described once, in the fragment; gpu_release's gate takes the same words, each O() of the
    gate's own made O(gate.NAME)."""
    gate = fragment_options("_gate")
    sub = documented("gpu_release")["gate"]["suboptions"]
    assert sub["minors"]["description"][1] == (
        "Only with O(gate.target=local) (the PVE host). Not together with O(gate.gpus). Empty selects by O(gate.gpus).")
    for name, opt in gate.items():
        assert yaml.safe_dump(sub[name], width=1000).replace("O(gate.", "O(") == yaml.safe_dump(opt, width=1000), name
    assert "O(gpuserve.sglang.gpu_memory_gate#module:memory=false)" in yaml.safe_dump(sub["health"])


def test_every_module_takes_the_attributes_fragment():
    """check mode, diff and platform are described once (plugins/doc_fragments/_attributes.py); a module adds what
    its check mode does."""
    for name in MODULES:
        doc = yaml.safe_load(importlib.import_module("%s.modules.%s" % (PACKAGE, name)).DOCUMENTATION)
        assert "gpuserve.sglang._attributes" in doc["extends_documentation_fragment"], name
        assert "platform" not in (doc.get("attributes") or {}), name
