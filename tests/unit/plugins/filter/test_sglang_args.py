"""sglang_argv: dict of SGLang settings -> argv list."""
import argparse
import enum

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.sglang_args import FilterModule, sglang_argv


def test_registered():
    assert FilterModule().filters()["sglang_argv"] is sglang_argv


def test_eagle3_settings_in_order():
    argv = sglang_argv({
        "model_path": "/models/Kimi-K2.5",
        "tp_size": 8,
        "trust_remote_code": True,
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "/models/Kimi-K2.5-eagle3",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "mem_fraction_static": 0.85,
    })
    assert argv == [
        "--model-path", "/models/Kimi-K2.5",
        "--tp-size", "8",
        "--trust-remote-code",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/Kimi-K2.5-eagle3",
        "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
        "--mem-fraction-static", "0.85",
    ]
    assert all(isinstance(a, str) for a in argv)


@pytest.mark.parametrize("value", [False, None, []])
def test_false_none_and_empty_list_are_omitted(value):
    assert sglang_argv({"enable_metrics": value, "port": 30000}) == ["--port", "30000"]


def test_list_is_one_flag_then_values():
    assert sglang_argv({"cuda_graph_bs_decode": [1, 2, 4, 8]}) == ["--cuda-graph-bs-decode", "1", "2", "4", "8"]


def test_list_round_trips_through_nargs_plus():
    # SGLang registers List[int] fields with nargs="+"; the filter's output must parse back to the list.
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda-graph-bs-decode", type=int, nargs="+")
    parser.add_argument("--port", type=int)
    ns = parser.parse_args(sglang_argv({"cuda_graph_bs_decode": [1, 2, 4], "port": 30000}))
    assert ns.cuda_graph_bs_decode == [1, 2, 4]
    assert ns.port == 30000


def test_dict_value_is_compact_json():
    assert sglang_argv({"json_model_override_args": {"b": 1, "a": "x"}}) == [
        "--json-model-override-args", '{"a":"x","b":1}'
    ]


def test_no_shell_quoting():
    argv = sglang_argv({"chat_template": "/path with spaces/t'pl.jinja", "served_model_name": "a;b $(x)"})
    assert argv == ["--chat-template", "/path with spaces/t'pl.jinja", "--served-model-name", "a;b $(x)"]


def test_value_starting_with_dash_is_attached():
    assert sglang_argv({"api_key": "-secret"}) == ["--api-key=-secret"]
    assert sglang_argv({"random_seed": -1}) == ["--random-seed", "-1"]


def test_dash_value_parses_as_value():
    parser = argparse.ArgumentParser()
    parser.add_argument("--api-key")
    assert parser.parse_args(sglang_argv({"api_key": "--x"})).api_key == "--x"


@pytest.mark.parametrize("key", ["--tp-size", "tp-size", "1tp", "tp size", "", "tp.size"])
def test_refuses_keys_that_are_not_identifiers(key):
    with pytest.raises(AnsibleFilterError, match="not a SGLang setting name"):
        sglang_argv({key: 1})


def test_refuses_non_string_key():
    with pytest.raises(AnsibleFilterError):
        sglang_argv({1: 1})


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\0b"])
def test_refuses_newline_and_nul(value):
    with pytest.raises(AnsibleFilterError, match="newline or NUL"):
        sglang_argv({"served_model_name": value})


def test_refuses_list_item_that_looks_like_a_flag():
    with pytest.raises(AnsibleFilterError, match="read as a flag"):
        sglang_argv({"lora_paths": ["a", "--b"]})
    assert sglang_argv({"x": [-1, 2]}) == ["--x", "-1", "2"]


def test_refuses_bool_inside_list_and_odd_types():
    with pytest.raises(AnsibleFilterError, match="booleans"):
        sglang_argv({"x": [True]})
    with pytest.raises(AnsibleFilterError, match="unsupported value type"):
        sglang_argv({"x": object()})


def test_refuses_non_dict():
    with pytest.raises(AnsibleFilterError, match="expected a dict"):
        sglang_argv(["--tp-size", "8"])


def test_float_keeps_precision():
    assert sglang_argv({"mem_fraction_static": 0.9}) == ["--mem-fraction-static", "0.9"]


@pytest.mark.parametrize("key, value, want", [
    ("random_seed", 0, ["--random-seed", "0"]),
    ("mem_fraction_static", 0.0, ["--mem-fraction-static", "0.0"]),
    ("chat_template", "", ["--chat-template", ""]),
    ("speculative_eagle_topk", [0], ["--speculative-eagle-topk", "0"]),
])
def test_falsy_but_meaningful_values_are_passed(key, value, want):
    # only None and False mean "leave the flag out": 0, 0.0 and '' are values SGLang must receive
    assert sglang_argv({key: value}) == want


def test_refusals_name_the_setting_and_the_type():
    with pytest.raises(AnsibleFilterError) as err:
        sglang_argv(("tp_size", 8))
    assert str(err.value) == "sglang_argv: expected a dict of SGLang settings, got tuple"
    with pytest.raises(AnsibleFilterError) as err:
        sglang_argv({"--tp-size": 8})
    assert str(err.value) == ("sglang_argv: '--tp-size' is not a SGLang setting name "
                              "(use the snake_case field name, e.g. tp_size, not --tp-size)")
    with pytest.raises(AnsibleFilterError) as err:
        sglang_argv({"chat_template": object()})
    assert str(err.value) == "sglang_argv: chat_template: unsupported value type object"
    with pytest.raises(AnsibleFilterError) as err:
        sglang_argv({"served_model_name": "a\nb"})
    assert str(err.value) == "sglang_argv: served_model_name: value contains a newline or NUL byte"
    with pytest.raises(AnsibleFilterError) as err:
        sglang_argv({"cuda_graph_bs": [1, True]})
    assert str(err.value) == "sglang_argv: cuda_graph_bs: booleans are only valid as a whole value"
    with pytest.raises(AnsibleFilterError) as err:
        sglang_argv({"lora_paths": ["a", None]})
    assert str(err.value) == "sglang_argv: lora_paths: unsupported value type NoneType"


def test_an_int_enum_passes_as_its_number():
    class Steps(enum.IntEnum):
        THREE = 3

    assert sglang_argv({"speculative_num_steps": Steps.THREE, "x": [Steps.THREE]}) == [
        "--speculative-num-steps", "3", "--x", "3"]
