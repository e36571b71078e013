"""setting_problems: the range of each role setting, which argument specs cannot express."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.settings import FilterModule, setting_problems


def problems(value, rule, name="s", why=None):
    setting = {"name": name, "value": value, "rule": rule}
    if why:
        setting["why"] = why
    return setting_problems([setting])


@pytest.mark.parametrize("rule, good, bad", [
    ("port", [1, 65535, "30000", 30000.0], [0, 65536, 70000, -1, "70000", "http", 30000.5, True, [1], {}]),
    ("count", [1, 8, "2"], [0, -3, 1.5, "one", False, "", "nan"]),
    ("whole", [0, 7, "0"], [-1, 0.5, "x", True]),
    ("seconds", [0.1, 1, 1800, "300", "1e3"], [0, -5, "0", "5s", True, float("inf"), float("nan")]),
    ("seconds_or_zero", [0, 0.0, "0", 12.5], [-0.1, "-1", "soon", False]),
    ("percent", [0, 3.5, 100, "50"], [-1, 100.5, "lots"]),
    ("fraction", [0.01, 0.5, 1, "0.1"], [0, -0.1, 1.01, "half"]),
    ("accept_length", [1, 1.5, "2.6"], [0.99, 0, -1, "long"]),
])
def test_each_rule_takes_its_range_and_refuses_the_rest(rule, good, bad):
    assert [problems(v, rule) for v in good] == [[]] * len(good)
    assert [len(problems(v, rule)) for v in bad] == [1] * len(bad)


@pytest.mark.parametrize("value, rule, message", [
    (70000, "port", "gpuserve_port is 70000: it must be a TCP port, a whole number from 1 to 65535"),
    ("70000", "port", 'gpuserve_port is "70000": it must be a TCP port, a whole number from 1 to 65535'),
    (True, "count", "gpuserve_port is true: it must be a whole number, 1 or more"),
    (-1, "whole", "gpuserve_port is -1: it must be a whole number, 0 or more"),
    (0, "seconds", "gpuserve_port is 0: it must be a number of seconds above 0"),
    (-1, "seconds_or_zero", "gpuserve_port is -1: it must be a number of seconds, 0 or more"),
    (101, "percent", "gpuserve_port is 101: it must be a percentage from 0 to 100"),
    (0, "fraction", "gpuserve_port is 0: it must be a fraction above 0, at most 1"),
    (0.5, "accept_length", "gpuserve_port is 0.5: it must be tokens per verify step, 1 or more"),
])
def test_the_message_names_the_setting_its_value_and_its_rule(value, rule, message):
    assert problems(value, rule, name="gpuserve_port") == [message]


def test_a_reason_is_added_and_every_bad_setting_is_reported_in_order():
    got = setting_problems([
        {"name": "a", "value": 0, "rule": "count", "why": "GPUs"},
        {"name": "b", "value": 5, "rule": "count"},
        {"name": "c", "value": 0, "rule": "seconds"},
    ])
    assert got == ["a is 0: it must be a whole number, 1 or more (GPUs)", "c is 0: it must be a number of seconds above 0"]


def test_an_unset_setting_is_not_checked_and_no_settings_no_problems():
    assert setting_problems([{"name": "x", "rule": "port"}, {"name": "y", "value": None, "rule": "count"}]) == []
    assert setting_problems([]) == [] and setting_problems(None) == []


def test_a_list_rule_checks_every_item_and_names_it():
    assert problems([0, 3, 7], "whole[]") == []
    assert problems([0, -1, "x", 2], "whole[]", name="gpuserve_gpus") == [
        "gpuserve_gpus item 1 is -1: it must be a whole number, 0 or more",
        'gpuserve_gpus item 2 is "x": it must be a whole number, 0 or more']
    assert problems("0,1", "whole[]", name="g") == ['g is "0,1": it must be a list']
    assert problems([], "count[]") == []


def test_an_unknown_rule_is_a_mistake_in_the_role():
    with pytest.raises(AnsibleFilterError, match=r"^setting_problems: s has rule 'ports'; the rules are port, count, "):
        problems(1, "ports")


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"setting_problems": setting_problems}
