"""_setting_types: a setting of the wrong type said in the user's words (the setting, what was given, what it must be,
an example), one test per kind of mistake; and what ansible-core accepts is accepted."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _setting_types as st

ARGS = {"type": "dict", "description": ["'Site launch settings: SGLang ServerArgs field names to values. More.'"]}
ENTRY = {"type": "list", "elements": "str", "description": "Program and leading arguments of the server; more."}
PORT = {"type": "int", "description": "Port the server listens on (C(--port)) and the client talks to.", "default": 30000}
SPECS = {"sglang_server_args": ARGS, "sglang_server_entrypoint": ENTRY, "gpuserve_port": PORT,
         "gpuserve_gpus": {"type": "list", "elements": "int"}, "method": {"type": "str", "choices": ["api", "pct"]},
         "enabled": {"type": "bool"}, "ratio": {"type": "float"}, "path": {"type": "path"}}


@pytest.mark.parametrize("name, value", [
    ("sglang_server_args", {"tp_size": 8}), ("sglang_server_entrypoint", ["python3", "-m", "x"]),
    ("gpuserve_port", 30000), ("gpuserve_port", "30000"), ("gpuserve_gpus", [0, "1"]), ("method", "pct"),
    ("enabled", "yes"), ("ratio", "0.5"), ("ratio", 1), ("path", "/opt/x"),
])
def test_what_ansible_core_accepts_is_accepted(name, value):
    assert st.problems(SPECS, {name: value}) == []


def test_a_list_where_a_mapping_goes_names_both_and_shows_an_example():
    assert st.problems(SPECS, {"sglang_server_args": ["model_path", "/m"]}) == [
        "sglang_server_args is a list ([model_path, /m]): it must be a mapping, e.g. {model_path: /models/Kimi-K2.5, "
        "tp_size: 8} ('Site launch settings: SGLang ServerArgs field names to values)."]


def test_a_string_where_a_list_goes_is_refused_though_ansible_core_would_split_it():
    said = st.problems(SPECS, {"sglang_server_entrypoint": "python -m sglang.launch_server"},
                       lambda name: ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"])
    assert said == [
        'sglang_server_entrypoint is a string ("python -m sglang.launch_server"): it must be a list of strings, '
        'e.g. [/opt/sglang/venv/bin/python, -m, sglang.launch_server] (Program and leading arguments of the '
        "server; more). On the command line give it as JSON, which keeps its type: -e "
        '\'{"sglang_server_entrypoint": ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"]}\'.']


def test_a_word_where_a_number_goes_shows_the_default():
    assert st.problems(SPECS, {"gpuserve_port": "http"}, lambda name: 30000) == [
        'gpuserve_port is a string ("http"): it must be a whole number, e.g. 30000 (Port the server listens on '
        "(--port) and the client talks to). On the command line give it as JSON, which keeps its type: "
        "-e '{\"gpuserve_port\": 30000}'."]


def test_an_element_of_the_wrong_type():
    assert st.problems(SPECS, {"gpuserve_gpus": [0, "one"]}) == [
        "gpuserve_gpus is a list ([0, one]): it must be a list of whole numbers, e.g. [0, 1, 2, 3]."]


def test_a_value_outside_the_choices():
    assert st.problems(SPECS, {"method": "ssh"}) == ['method is a string ("ssh"): it must be one of api, pct, e.g. api.']


def test_a_boolean_a_number_and_a_mapping_elsewhere():
    said = st.problems(SPECS, {"enabled": "maybe", "ratio": [1], "path": {"a": 1}})
    assert said[0].startswith('enabled is a string ("maybe"): it must be true or false, e.g. true.')
    assert said[1] == "path is a mapping ({a: 1}): it must be a path (a string), e.g. /opt/example."
    assert said[2] == "ratio is a list ([1]): it must be a number, e.g. 0.5."
    assert st.flow(["-m", "- x", "a: b", "", None, 1.5]) == '[-m, "- x", "a: b", "", null, 1.5]'


def test_no_python_class_name_and_only_declared_settings():
    said = " ".join(st.problems(SPECS, {"sglang_server_args": [1], "gpuserve_port": [1], "other": [1]}))
    assert "class" not in said and "<" not in said and "other" not in said


def test_a_long_value_is_cut():
    said = st.problems(SPECS, {"gpuserve_port": "x" * 500})[0]
    assert '("' + "x" * 20 in said and "..." in said and len(said) < 400


def test_the_first_sentence_without_markup():
    assert st.first_sentence(["The C(unit) of O(x). More"]) == "The unit of x"
    assert st.first_sentence(None) == ""
    assert len(st.first_sentence("a" * 300)) == 160
