"""gpuserve-sglang exec (plugins/module_utils/_helper_exec.py), sglang.service's ExecStart, in-process: os.execv is
captured, so nothing is exec'd."""
import json

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_exec
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import args_file, run_main

EXEC_USAGE = "usage: gpuserve-sglang exec ARGS_FILE -- ENTRYPOINT [ARGS...]\n"


@pytest.fixture
def execv(monkeypatch):
    calls = []
    monkeypatch.setattr(_helper_exec.os, "execv", lambda path, args: calls.append((path, list(args))))
    return calls


def test_exec_execs_the_entrypoint_with_the_argv_of_the_args_file(monkeypatch, capsys, tmp_path, execv):
    args = ["--model-path", "/models/Qwen3 8B", "--tp-size", "2", "--served-model-name", "qwen-é"]
    path = args_file(tmp_path, {"argv": args, "comment": "ignored"})
    entry = ["/opt/sglang/venv/bin/python3", "-m", "sglang.launch_server"]
    rc, out, err = run_main(monkeypatch, capsys, "exec", path, "--", *entry)
    # no shell: the entrypoint's argv is followed by the file's argv verbatim (spaces and all)
    assert execv == [("/opt/sglang/venv/bin/python3", entry + args)]
    assert err == "gpuserve-sglang exec: exec %s\n" % json.dumps(entry + args)
    assert out == "" and rc == 127  # 127 only if os.execv ever returned


def test_exec_with_a_bare_entrypoint_and_an_empty_argv(monkeypatch, capsys, tmp_path, execv):
    path = args_file(tmp_path, {"argv": []})
    rc, _out, err = run_main(monkeypatch, capsys, "exec", path, "--", "/usr/bin/sglang")
    assert execv == [("/usr/bin/sglang", ["/usr/bin/sglang"])]
    assert err == 'gpuserve-sglang exec: exec ["/usr/bin/sglang"]\n' and rc == 127


@pytest.mark.parametrize("argv", [
    ["exec"],
    ["exec", "ARGS"],
    ["exec", "ARGS", "--"],                      # no entrypoint
    ["exec", "ARGS", "-x", "/usr/bin/sglang"],   # no '--' separator
    ["exec", "--", "ARGS", "/usr/bin/sglang"],
])
def test_exec_refuses_a_malformed_command_line(monkeypatch, capsys, tmp_path, execv, argv):
    args_file(tmp_path, {"argv": []})
    argv = [str(tmp_path / "args.json") if a == "ARGS" else a for a in argv]
    assert run_main(monkeypatch, capsys, *argv) == (64, "", EXEC_USAGE)
    assert execv == []


@pytest.mark.parametrize("content", [
    {"args": ["--tp-size", "2"]},           # no 'argv'
    {"argv": "--tp-size 2"},                # a string would need word splitting
    {"argv": ["--tp-size", 2]},             # not only strings
    {"argv": {"--tp-size": "2"}},
])
def test_exec_refuses_an_args_file_without_a_list_of_strings(monkeypatch, capsys, tmp_path, execv, content):
    path = args_file(tmp_path, content)
    rc, out, err = run_main(monkeypatch, capsys, "exec", path, "--", "/usr/bin/sglang")
    assert (rc, out) == (65, "") and execv == []
    assert err == "gpuserve-sglang exec: %s: 'argv' must be a list of strings\n" % path
