"""nccl_env filters: one dict, validated, quoted for systemd; missing-variable reports."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.nccl_env import (
    FilterModule, nccl_env_missing, nccl_env_normalize, systemd_env_quote)


def test_registered():
    assert set(FilterModule().filters()) == {"nccl_env_normalize", "systemd_env_quote", "nccl_env_missing"}


def test_normalize_sorts_and_stringifies():
    out = nccl_env_normalize({"NCCL_PROTO": "LL", "NCCL_NVLS_ENABLE": 0, "A_FLOAT": 1.5})
    assert list(out) == ["A_FLOAT", "NCCL_NVLS_ENABLE", "NCCL_PROTO"]
    assert out == {"A_FLOAT": "1.5", "NCCL_NVLS_ENABLE": "0", "NCCL_PROTO": "LL"}


@pytest.mark.parametrize("env", [
    {"NCCL_DEBUG": True}, {"NCCL_DEBUG": None}, {"1BAD": "x"}, {"BAD-NAME": "x"}, {"X": "a\nb"},
    {"X": ["list"]}, ["NCCL_PROTO=LL"],
    # an EnvironmentFile line ends at \r or \n and cannot carry NUL: each would cut or split the value
    {"X": "a\rb"}, {"X": "LL\r"}, {"X": "LL\r\n"}, {"X": "a\0b"},
])
def test_normalize_refuses(env):
    with pytest.raises(AnsibleFilterError):
        nccl_env_normalize(env)


@pytest.mark.parametrize("value", ["LL\r", "a\rb", "a\0b"])
def test_missing_refuses_control_characters_in_expected(value):
    # nccl_env_missing validates `expected` too: a value no EnvironmentFile can carry is never "proven"
    with pytest.raises(AnsibleFilterError, match="newline or NUL"):
        nccl_env_missing({"NCCL_PROTO": value}, {"NCCL_PROTO": value})


@pytest.mark.parametrize("value,want", [
    ("LL", '"LL"'),
    ("allreduce:tree", '"allreduce:tree"'),
    ('a"b', '"a\\"b"'),
    ("$HOME", '"\\$HOME"'),
    ("back\\slash", '"back\\\\slash"'),
    ("`x`", '"\\`x\\`"'),
    ("with space", '"with space"'),
])
def test_systemd_quote(value, want):
    assert systemd_env_quote(value) == want


def test_missing_from_env_output_and_results():
    expected = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "0"}
    env_out = "PATH=/usr/bin\nNCCL_PROTO=LL\nNCCL_ALGO=Tree\n"
    problems = nccl_env_missing(expected, env_out)
    assert problems == ["NCCL_ALGO='Tree' (expected 'Ring')", "NCCL_NVLS_ENABLE missing (expected '0')"]
    assert nccl_env_missing(expected, {"stdout": env_out, "rc": 0}) == problems
    assert nccl_env_missing(expected, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "0"}) == []


@pytest.mark.parametrize("env,msg", [
    (["NCCL_PROTO=LL"], "expected a dict of environment variables, got list"),
    ("NCCL_PROTO=LL", "expected a dict of environment variables, got str"),
    ({"1BAD": "x"}, "'1BAD' is not a valid environment variable name"),
    ({1: "x"}, "1 is not a valid environment variable name"),
    ({"NCCL_DEBUG": True}, 'NCCL_DEBUG: value True is ambiguous; quote the string NCCL expects, e.g. "0" or "1"'),
    ({"NCCL_DEBUG": None}, 'NCCL_DEBUG: value None is ambiguous; quote the string NCCL expects, e.g. "0" or "1"'),
    ({"NCCL_PROTO": ["LL"]}, "NCCL_PROTO: value must be a string or number, got list"),
    ({"NCCL_PROTO": {"a": 1}}, "NCCL_PROTO: value must be a string or number, got dict"),
    ({"NCCL_PROTO": "LL\n"}, "NCCL_PROTO: value contains a newline or NUL byte"),
])
def test_normalize_refusals_name_the_variable_and_the_problem(env, msg):
    with pytest.raises(AnsibleFilterError) as err:
        nccl_env_normalize(env)
    assert str(err.value) == msg


def test_systemd_quote_stringifies_and_escapes_the_backslash_first():
    assert systemd_env_quote(5) == '"5"'
    # the backslash is escaped before the others, so their escapes are not escaped again
    assert systemd_env_quote('\\"$`') == '"\\\\\\"\\$\\`"'


def test_missing_keeps_everything_after_the_first_equals_sign():
    # `env` prints NAME=VALUE; a value may itself hold "=" (NCCL_IB_HCA=^=mlx5_1, NCCL_ALGO=allreduce:tree=x)
    env_out = "NCCL_IB_HCA=^=mlx5_1\nNCCL_ALGO=a=b=c\nnot a variable line\n"
    assert nccl_env_missing({"NCCL_IB_HCA": "^=mlx5_1", "NCCL_ALGO": "a=b=c"}, env_out) == []
    assert nccl_env_missing({"NCCL_ALGO": "a"}, env_out) == ["NCCL_ALGO='a=b=c' (expected 'a')"]


def test_missing_from_a_dict_compares_as_strings_and_from_nothing_reports_all():
    assert nccl_env_missing({"NCCL_NVLS_ENABLE": 0}, {"NCCL_NVLS_ENABLE": 0}) == []
    # a registered result whose stdout is empty or absent: every variable is missing
    want = ["NCCL_PROTO missing (expected 'LL')"]
    assert nccl_env_missing({"NCCL_PROTO": "LL"}, {"stdout": "", "rc": 1}) == want
    assert nccl_env_missing({"NCCL_PROTO": "LL"}, {"stdout": None, "rc": 1}) == want
    assert nccl_env_missing({"NCCL_PROTO": "LL"}, None) == want
    assert nccl_env_missing({"NCCL_PROTO": "LL"}, "") == want
    # a dict of strings is an environment, even with a variable named stdout
    assert nccl_env_missing({"NCCL_PROTO": "LL"}, {"stdout": "x", "NCCL_PROTO": "LL"}) == []
