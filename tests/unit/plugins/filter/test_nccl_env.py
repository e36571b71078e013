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
])
def test_normalize_refuses(env):
    with pytest.raises(AnsibleFilterError):
        nccl_env_normalize(env)


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
