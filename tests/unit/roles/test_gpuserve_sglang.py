"""The in-container helper gpuserve-sglang (roles/sglang_server/files/usr/local/sbin/gpuserve_sglang.py), in-process:
exec, validate-args, wait-ready, state, the usage line, and the parts of env-proof that
test_gpuserve_sglang_helper.py leaves out (the env file's syntax, systemctl and the cgroup roots, odd /proc content).

The outside world is faked at the helper's own seams: os.execv captured; SGLang is a tiny sglang.srt.server_args
module put in sys.modules; systemctl, git, the clock, the port and the HTTP probe are replaced on the helper's
module (its `subprocess`, `time`, `socket`, `urllib` names and its `_unit_state`/`_probe` functions).
"""
import argparse
import hashlib
import importlib
import json
import locale
import os
import subprocess
import sys
import types
import urllib.error

import pytest

from ansible_collections.gpuserve.sglang.tests.support.gpuserve_sglang import HELPER, ROOT, run_json, run_main

GROUP = "/system.slice/sglang.service"


def raising(exc):
    """A call that raises exc (for lambdas standing in for a failing function)."""
    raise exc


def fake_run(calls, outputs):
    """A subprocess.run stand-in: records (argv, kwargs), answers outputs[argv[0]] (a CompletedProcess or a
    callable of argv returning one)."""
    def run(argv, **kwargs):
        calls.append((list(argv), kwargs))
        answer = outputs[argv[0]]
        return answer(argv, **kwargs) if callable(answer) else answer
    return run


def completed(stdout="", stderr="", returncode=0):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


# ---------------------------------------------------------------------------------------------------- main / usage

USAGE = "usage: gpuserve-sglang {exec,gate,driver,lock,validate-args,env-proof,worker-env,source,wait-ready,state} ...\n"


@pytest.mark.parametrize("argv", [[], ["start"], ["EXEC"]])
def test_main_prints_the_usage_for_no_or_an_unknown_subcommand(helper, monkeypatch, capsys, argv):
    assert run_main(helper, monkeypatch, capsys, *argv) == (64, "", USAGE)


def test_main_hands_a_known_subcommand_to_its_parser(helper, monkeypatch, capsys):
    # wait-ready alone is a known subcommand: its own parser refuses the missing --port (not the usage line)
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "wait-ready"])
    with pytest.raises(SystemExit) as exc:
        helper.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gpuserve-sglang wait-ready ")
    assert "error: the following arguments are required: --port" in err


# ------------------------------------------------------------------------------------------------------------ exec

EXEC_USAGE = "usage: gpuserve-sglang exec ARGS_FILE -- ENTRYPOINT [ARGS...]\n"


@pytest.fixture
def execv(helper, monkeypatch):
    calls = []
    monkeypatch.setattr(helper.os, "execv", lambda path, args: calls.append((path, list(args))))
    return calls


def args_file(tmp_path, content):
    path = tmp_path / "args.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def test_exec_execs_the_entrypoint_with_the_argv_of_the_args_file(helper, monkeypatch, capsys, tmp_path, execv):
    args = ["--model-path", "/models/Qwen3 8B", "--tp-size", "2", "--served-model-name", "qwen-é"]
    path = args_file(tmp_path, {"argv": args, "comment": "ignored"})
    entry = ["/opt/sglang/venv/bin/python3", "-m", "sglang.launch_server"]
    rc, out, err = run_main(helper, monkeypatch, capsys, "exec", path, "--", *entry)
    # no shell: the entrypoint's argv is followed by the file's argv verbatim (spaces and all)
    assert execv == [("/opt/sglang/venv/bin/python3", entry + args)]
    assert err == "gpuserve-sglang exec: exec %s\n" % json.dumps(entry + args)
    assert out == "" and rc == 127  # 127 only if os.execv ever returned


def test_exec_with_a_bare_entrypoint_and_an_empty_argv(helper, monkeypatch, capsys, tmp_path, execv):
    path = args_file(tmp_path, {"argv": []})
    rc, _out, err = run_main(helper, monkeypatch, capsys, "exec", path, "--", "/usr/bin/sglang")
    assert execv == [("/usr/bin/sglang", ["/usr/bin/sglang"])]
    assert err == 'gpuserve-sglang exec: exec ["/usr/bin/sglang"]\n' and rc == 127


@pytest.mark.parametrize("argv", [
    ["exec"],
    ["exec", "ARGS"],
    ["exec", "ARGS", "--"],                      # no entrypoint
    ["exec", "ARGS", "-x", "/usr/bin/sglang"],   # no '--' separator
    ["exec", "--", "ARGS", "/usr/bin/sglang"],
])
def test_exec_refuses_a_malformed_command_line(helper, monkeypatch, capsys, tmp_path, execv, argv):
    args_file(tmp_path, {"argv": []})
    argv = [str(tmp_path / "args.json") if a == "ARGS" else a for a in argv]
    assert run_main(helper, monkeypatch, capsys, *argv) == (64, "", EXEC_USAGE)
    assert execv == []


@pytest.mark.parametrize("content", [
    {"args": ["--tp-size", "2"]},           # no 'argv'
    {"argv": "--tp-size 2"},                # a string would need word splitting
    {"argv": ["--tp-size", 2]},             # not only strings
    {"argv": {"--tp-size": "2"}},
])
def test_exec_refuses_an_args_file_without_a_list_of_strings(helper, monkeypatch, capsys, tmp_path, execv, content):
    path = args_file(tmp_path, content)
    rc, out, err = run_main(helper, monkeypatch, capsys, "exec", path, "--", "/usr/bin/sglang")
    assert (rc, out) == (65, "") and execv == []
    assert err == "gpuserve-sglang exec: %s: 'argv' must be a list of strings\n" % path


# --------------------------------------------------------------------------------------------------- validate-args

FLAGS = ["--model-path", "--tp-size", "--cuda-graph-max-bs", "--cuda-graph-max-tp", "--cuda-graph-max-ep",
         "--cuda-graph-max-dp", "--cuda-graph-bs", "--disable-cuda-graph", "--mem-fraction-static"]


def install_sglang(monkeypatch, version="0.5.22", say=(), raise_exc=None, with_prepare=True):
    """A tiny SGLang: ServerArgs.add_cli_args and prepare_server_args(argv), which parses argv with an argparse
    parser built from add_cli_args (abbreviations allowed, as SGLang's own), prints each (stream, text) of `say`
    and raises `raise_exc` if given, or ValueError for --tp-size 3 (as ServerArgs.__post_init__ does for a bad
    combination). Returns the list of argv it was called with."""
    calls = []

    class ServerArgs:
        @staticmethod
        def add_cli_args(parser):
            parser.add_argument("--model-path")
            parser.add_argument("--tp-size", "--tp", type=int, default=1)
            for flag in FLAGS[2:6]:
                parser.add_argument(flag, type=int)
            parser.add_argument("--cuda-graph-bs", type=int, nargs="+")
            parser.add_argument("--disable-cuda-graph", action="store_true")
            parser.add_argument("--mem-fraction-static", type=float)
            parser.add_argument("--version", action="version", version="sglang " + str(version))

    def prepare_server_args(argv):
        calls.append(argv)
        parser = argparse.ArgumentParser(prog="sglang")
        ServerArgs.add_cli_args(parser)
        namespace = parser.parse_args(argv)
        for stream, text in say:
            print(text, file=sys.stderr if stream == "err" else sys.stdout)
        if raise_exc is not None:
            raise raise_exc
        if namespace.tp_size == 3:
            raise ValueError("tp_size 3 does not divide the 8 attention heads")
        return namespace

    pkg = types.ModuleType("sglang")
    if version is not None:
        pkg.__version__ = version
    srt = types.ModuleType("sglang.srt")
    server_args = types.ModuleType("sglang.srt.server_args")
    server_args.ServerArgs = ServerArgs
    if with_prepare:
        server_args.prepare_server_args = prepare_server_args
    pkg.srt, srt.server_args = srt, server_args
    for name, mod in (("sglang", pkg), ("sglang.srt", srt), ("sglang.srt.server_args", server_args)):
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def validate(helper, monkeypatch, capsys, argv):
    return run_json(helper, monkeypatch, capsys, "validate-args", "--argv-json", json.dumps(argv))


GOOD = ["--model-path=/models/qwen=v2", "--tp-size", "2", "--cuda-graph-max-bs=256", "--cuda-graph-bs", "1", "8"]
# what runs on an SGLang whose parser makes its checks (no resolve_once, no speculative algorithm set)
PARSER_CHECKS = ["parser", "full flag names", "values SGLang checks only once it runs"]
# the listen check of an argv without --host: SGLang's default, which binds everywhere
DEFAULT_LISTEN = {"host": "127.0.0.1", "addresses": ["127.0.0.1"], "ok": True, "error": None}


def test_validate_args_accepts_full_flags_and_keeps_sglangs_warnings(helper, monkeypatch, capsys):
    calls = install_sglang(monkeypatch, say=[
        ("err", "\x1b[33mWARNING\x1b[0m: cuda graph batch sizes padded"),
        ("out", "   --disable-radix-cache is Deprecated, use --disable-prefix-cache   "),
        ("err", "INFO: loading config"),
        ("err", "prewarnings and nowarningsx are not warnings"),
        ("out", "warnings: none here either"),
    ])
    rc, out, err = validate(helper, monkeypatch, capsys, GOOD)
    assert calls == [GOOD]
    assert rc == 0 and err == ""  # nothing SGLang printed leaks to the helper's stdout or stderr
    assert out == {"ok": True, "sglang_version": "0.5.22", "argv": GOOD, "error": None, "warnings": [
        "WARNING: cuda graph batch sizes padded",
        "--disable-radix-cache is Deprecated, use --disable-prefix-cache",
    ], "checks": PARSER_CHECKS, "cached_since": None, "listen": DEFAULT_LISTEN}


def test_validate_args_reads_an_args_file(helper, monkeypatch, capsys, tmp_path):
    install_sglang(monkeypatch, version=None)
    path = args_file(tmp_path, {"argv": ["--model-path", "/models/qwen-é", "--tp", "2"]})
    rc, out, err = run_json(helper, monkeypatch, capsys, "validate-args", "--args-file", path)
    assert (rc, err) == (0, "")
    assert out == {"ok": True, "sglang_version": None, "argv": ["--model-path", "/models/qwen-é", "--tp", "2"],
                   "warnings": [], "error": None, "checks": PARSER_CHECKS, "cached_since": None, "listen": DEFAULT_LISTEN}


@pytest.mark.parametrize("argv, error, hint", [
    # argparse takes a unique prefix today; SGLang 0.5.22 made --cuda-graph-max ambiguous
    (["--model-path", "m", "--cuda-graph-max-b", "8"], "--cuda-graph-max-b",
     " (did you mean --cuda-graph-max-bs, --cuda-graph-max-tp, --cuda-graph-max-ep?)"),
    (["--model-path", "m", "--mem=0.8"], "--mem", ""),
    (["--model", "m", "--disable-cuda"], "--model", " (did you mean --model-path, --help?)"),  # the first one is reported
])
def test_validate_args_refuses_abbreviated_flags(helper, monkeypatch, capsys, argv, error, hint):
    install_sglang(monkeypatch, say=[("err", "WARNING: something deprecated")])
    rc, out, err = validate(helper, monkeypatch, capsys, argv)
    message = "%s is not a full SGLang flag name; abbreviations are refused%s" % (error, hint)
    assert rc == 2
    assert out == {"ok": False, "sglang_version": "0.5.22", "argv": argv, "error": message,
                   "warnings": ["WARNING: something deprecated"], "checks": ["parser"], "cached_since": None, "listen": DEFAULT_LISTEN}
    assert err == "SGLang 0.5.22 rejected the arguments: %s\n" % message


def test_validate_args_reports_sglangs_own_parse_error(helper, monkeypatch, capsys):
    install_sglang(monkeypatch, say=[("err", "WARNING: never printed")])
    rc, out, err = validate(helper, monkeypatch, capsys, ["--model-path", "m", "--tp-size", "two"])
    message = "sglang: error: argument --tp-size/--tp: invalid int value: 'two'"
    assert rc == 2
    assert out == {"ok": False, "sglang_version": "0.5.22", "argv": ["--model-path", "m", "--tp-size", "two"],
                   "warnings": [], "error": message, "checks": [], "cached_since": None, "listen": DEFAULT_LISTEN}
    assert err == "SGLang 0.5.22 rejected the arguments: %s\n" % message


def test_validate_args_reports_a_bad_combination_raised_by_server_args(helper, monkeypatch, capsys):
    install_sglang(monkeypatch, say=[("err", "WARNING: printed before the check")])
    rc, out, err = validate(helper, monkeypatch, capsys, ["--model-path", "m", "--tp-size", "3"])
    assert rc == 2 and out["ok"] is False and out["warnings"] == []
    assert out["error"] == "ValueError: tp_size 3 does not divide the 8 attention heads"
    assert err == "SGLang 0.5.22 rejected the arguments: ValueError: tp_size 3 does not divide the 8 attention heads\n"


def test_validate_args_names_a_silent_exit_of_sglangs_parser(helper, monkeypatch, capsys):
    install_sglang(monkeypatch, raise_exc=SystemExit(2))
    rc, out, err = validate(helper, monkeypatch, capsys, ["--model-path", "m"])
    assert (rc, out["ok"], out["error"]) == (2, False, "SystemExit: 2")
    assert err == "SGLang 0.5.22 rejected the arguments: SystemExit: 2\n"


@pytest.mark.parametrize("code", [0, None])
def test_validate_args_takes_a_clean_exit_of_sglangs_parser_as_success(helper, monkeypatch, capsys, code):
    install_sglang(monkeypatch, say=[("err", "warning: exiting")], raise_exc=SystemExit(code))
    rc, out, err = validate(helper, monkeypatch, capsys, ["--model-path", "m"])
    assert (rc, err) == (0, "")
    assert out == {"ok": True, "sglang_version": "0.5.22", "argv": ["--model-path", "m"], "warnings": ["warning: exiting"],
                   "error": None, "checks": ["parser", "full flag names"], "cached_since": None, "listen": DEFAULT_LISTEN}


def test_validate_args_takes_sglangs_last_line_when_it_exits_without_an_error_line(helper, monkeypatch, capsys):
    install_sglang(monkeypatch, say=[("err", "first"), ("out", "  the last words  "), ("err", "")],
                   raise_exc=SystemExit(1))
    rc, out, _err = validate(helper, monkeypatch, capsys, ["--model-path", "m"])
    assert rc == 2 and out["error"] == "the last words"


@pytest.mark.parametrize("text, exc, message", [
    ("usage: sglang [-h]\nsglang: error: one\n  sglang: error: two  \nnote: see --help\n", SystemExit(2),
     "sglang: error: two"),
    ("usage: sglang [-h]\nsglang: error: only\nnote: see --help\n", SystemExit(2), "sglang: error: only"),
    ("\n  first line \n second line  \n third line\n\n", SystemExit(1), "third line"),
    ("", SystemExit(2), "SystemExit: 2"),
    (" \n\t\n", RuntimeError("boom"), "RuntimeError: boom"),
])
def test_sglang_message_picks_the_last_error_line(helper, text, exc, message):
    assert helper._sglang_message(text, exc) == message


@pytest.mark.parametrize("source, error", [
    (["--argv-json", '{"argv": ["--tp-size", "2"]}'], "cannot read the arguments: argv must be a list of strings"),
    (["--argv-json", '["--tp-size", 2]'], "cannot read the arguments: argv must be a list of strings"),
    (["--argv-json", "[--tp-size"], "cannot read the arguments: Expecting value: line 1 column 2 (char 1)"),
])
def test_validate_args_refuses_unreadable_arguments(helper, monkeypatch, capsys, source, error):
    calls = install_sglang(monkeypatch)
    rc, out, err = run_json(helper, monkeypatch, capsys, "validate-args", *source)
    assert (rc, err, calls) == (2, "", [])
    assert out == {"ok": False, "sglang_version": None, "argv": None, "warnings": [], "error": error, "checks": [],
                   "cached_since": None}


def test_validate_args_refuses_an_args_file_it_cannot_read_or_without_argv(helper, monkeypatch, capsys, tmp_path):
    install_sglang(monkeypatch)
    missing = str(tmp_path / "missing.json")
    rc, out, _err = run_json(helper, monkeypatch, capsys, "validate-args", "--args-file", missing)
    assert rc == 2 and out["error"] == "cannot read the arguments: [Errno 2] No such file or directory: %r" % missing
    path = args_file(tmp_path, {"args": []})
    rc, out, _err = run_json(helper, monkeypatch, capsys, "validate-args", "--args-file", path)
    assert rc == 2 and out["error"] == "cannot read the arguments: argv must be a list of strings"


def test_validate_args_exits_3_when_sglang_cannot_be_imported(helper, monkeypatch, capsys):
    install_sglang(monkeypatch, with_prepare=False)
    rc, out, err = validate(helper, monkeypatch, capsys, ["--model-path", "m"])
    assert (rc, err) == (3, "")
    assert out["ok"] is False and out["sglang_version"] is None and out["argv"] == ["--model-path", "m"]
    assert out["error"].startswith(
        "cannot import sglang.srt.server_args: ImportError: cannot import name 'prepare_server_args'")
    monkeypatch.setitem(sys.modules, "sglang", None)
    rc, out, _err = validate(helper, monkeypatch, capsys, ["--model-path", "m"])
    assert rc == 3 and out["error"].startswith("cannot import sglang.srt.server_args: ModuleNotFoundError: ")


@pytest.mark.parametrize("argv, message", [
    ([], "error: one of the arguments --args-file --argv-json is required"),
    (["--args-file", "a", "--argv-json", "[]"], "error: argument --argv-json: not allowed with argument --args-file"),
])
def test_validate_args_needs_exactly_one_source(helper, monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "validate-args"] + argv)
    with pytest.raises(SystemExit) as exc:
        helper.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert " ".join(err.split()) == ("usage: gpuserve-sglang validate-args [-h] (--args-file ARGS_FILE | --argv-json ARGV_JSON) "
                                     "[--check-model] [--env-file ENV_FILE] [--record RECORD] [--record-read-only] "
                                     "[--src SRC] [--venv VENV] [--lib LIB] gpuserve-sglang validate-args: " + message)


# -------------------------------------------------------------------------------------------------------- env-proof

def test_env_file_syntax(helper, tmp_path):
    path = tmp_path / "nccl.env"
    path.write_text("\n".join([
        "# comment=1",
        "; comment=2",
        "   ",
        "garbage line",
        "  NCCL_PROTO = LL  ",
        "export   NCCL_ALGO=Ring",
        'QUOTED="a b"',
        "SINGLE='c d'",
        'EMPTY=""',
        'LONE="',
        "MIXED='x\"",
        "XMARK=XabcX",
        "PLAIN=ab",
        "EQUALS=a=b=c",
        "NCCL_PROTO=Simple",  # the last one wins
    ]) + "\n", encoding="utf-8")
    assert helper._env_file(str(path)) == {
        "NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring", "QUOTED": "a b", "SINGLE": "c d", "EMPTY": "", "LONE": '"',
        "MIXED": "'x\"", "XMARK": "XabcX", "PLAIN": "ab", "EQUALS": "a=b=c",
    }


def test_control_group_asks_systemctl(helper, monkeypatch):
    calls = []
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(
        run=fake_run(calls, {"systemctl": completed(GROUP + "\n")})))
    assert helper._control_group("sglang.service") == GROUP
    assert calls == [(["systemctl", "show", "--property=ControlGroup", "--value", "sglang.service"],
                      {"check": True, "capture_output": True, "text": True})]


@pytest.mark.parametrize("present, found", [
    ({"/sys/fs/cgroup/g/cgroup.procs", "/sys/fs/cgroup/unified/g/cgroup.procs"}, "/sys/fs/cgroup/g"),
    ({"/sys/fs/cgroup/unified/g/cgroup.procs", "/sys/fs/cgroup/systemd/g/cgroup.procs"}, "/sys/fs/cgroup/unified/g"),
    ({"/sys/fs/cgroup/systemd/g/cgroup.procs"}, "/sys/fs/cgroup/systemd/g"),
    (set(), None),
])
def test_cgroup_dir_tries_v2_then_the_v1_hierarchies(helper, monkeypatch, present, found):
    asked = []
    isfile = os.path.isfile

    def fake_isfile(path):
        if not str(path).startswith("/sys/fs/cgroup"):
            return isfile(path)
        asked.append(path)
        return path in present

    monkeypatch.setattr(helper.os.path, "isfile", fake_isfile)
    assert helper._cgroup_dir("/g") == found
    tried = ["/sys/fs/cgroup/g/cgroup.procs", "/sys/fs/cgroup/unified/g/cgroup.procs",
             "/sys/fs/cgroup/systemd/g/cgroup.procs"]
    assert asked == tried[:len(asked)] and asked[-1] == (found + "/cgroup.procs" if found else tried[-1])


def test_pids_walks_sub_groups_and_merges(helper, tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    (tmp_path / "cgroup.procs").write_text("30\n\n4\n")
    (tmp_path / "a" / "cgroup.procs").write_text("")
    (tmp_path / "a" / "b" / "cgroup.procs").write_text("4\n200\n  \n")
    (tmp_path / "a" / "b" / "other").write_text("99\n")
    assert helper._pids(str(tmp_path)) == [4, 30, 200]


def test_read_reads_proc(helper):
    with open("/proc/%d/cmdline" % os.getpid(), "rb") as handle:
        assert helper._read(os.getpid(), "cmdline") == handle.read()
    with pytest.raises(FileNotFoundError):
        helper._read(os.getpid(), "no-such-entry")


@pytest.fixture
def unit(helper, tmp_path, monkeypatch):
    """unit({pid: (environ bytes, cmdline bytes) or an exception}): the unit's control group, flat, with a fake
    /proc behind helper._read."""
    def make(procs, group=GROUP):
        cgroup = tmp_path / "cgroup"
        cgroup.mkdir()
        (cgroup / "cgroup.procs").write_text("".join("%d\n" % pid for pid in procs))

        def read(pid, name):
            entry = procs[pid]
            if isinstance(entry, Exception):
                raise entry
            return entry[0] if name == "environ" else entry[1]

        monkeypatch.setattr(helper, "_control_group", lambda name: group if name == "sglang.service" else "")
        monkeypatch.setattr(helper, "_cgroup_dir", lambda g: str(cgroup))
        monkeypatch.setattr(helper, "_read", read)
    return make


def env_proof(helper, monkeypatch, capsys, *args):
    rc, out, _err = run_json(helper, monkeypatch, capsys, "env-proof", "--unit", "sglang.service", *args)
    return rc, out


def test_env_proof_reads_odd_proc_content(helper, unit, monkeypatch, capsys):
    long_cmd = b"/opt/sglang/venv/bin/python3\0-m\0sglang.launch_server\0--model-path\0" + b"m" * 300 + b"\0"
    unit({
        7: (b"NCCL_PROTO=LL\0OPTS=a=b\0junk\0\xffKEY=\xfe\0", long_cmd),
        8: (b"NCCL_PROTO=LL\0", b"sglang::scheduler_TP0\0\xff\0"),
        3: ProcessLookupError(3, "No such process"),  # exited between listing and reading: skipped, the rest read
        10: FileNotFoundError(2, "No such file or directory"),
    })
    # an undecodable variable is compared with replacement characters
    expected = {"NCCL_PROTO": "LL", "OPTS": "a=b", "\ufffdKEY": "\ufffd"}
    rc, out = env_proof(helper, monkeypatch, capsys, "--expected-json", json.dumps(expected), "--min-schedulers", "1")
    assert rc == 1 and out["schedulers"] == 1 and out["min_schedulers"] == 1
    full = "/opt/sglang/venv/bin/python3 -m sglang.launch_server --model-path " + "m" * 300
    assert out["processes"] == [
        {"pid": 7, "cmd": full[:200], "ok": True, "mismatched": {}},
        {"pid": 8, "cmd": "sglang::scheduler_TP0 \ufffd", "ok": False,
         "mismatched": {"OPTS": {"want": "a=b", "got": None}, "\ufffdKEY": {"want": "\ufffd", "got": None}}},
    ]
    assert out["error"] == "1 of 2 processes lack the expected environment: PIDs [8]"


def test_env_proof_output_fields(helper, unit, monkeypatch, capsys):
    unit({5: (b"A=1\0B=2\0", b"sglang::scheduler_TP0\0"), 6: (b"A=1\0B=2\0", b"sglang::scheduler_TP1\0")})
    rc, out = env_proof(helper, monkeypatch, capsys, "--expected-json", '{"A": 1, "B": "2"}', "--min-schedulers", "2")
    assert rc == 0
    assert out == {"ok": True, "unit": "sglang.service", "control_group": GROUP, "expected": {"A": "1", "B": "2"},
                   "env_file_drift": {}, "processes": [
                       {"pid": 5, "cmd": "sglang::scheduler_TP0", "ok": True, "mismatched": {}},
                       {"pid": 6, "cmd": "sglang::scheduler_TP1", "ok": True, "mismatched": {}}],
                   "schedulers": 2, "min_schedulers": 2, "error": None, "hint": None}
    rc, out = env_proof(helper, monkeypatch, capsys, "--expected-json", '{"A": "1"}', "--min-schedulers", "3")
    assert rc == 1 and out["ok"] is False
    assert out["error"] == "2 scheduler workers (sglang::scheduler*) in %s, expected at least 3" % GROUP


def test_env_proof_with_no_process_left(helper, unit, monkeypatch, capsys):
    unit({9: ProcessLookupError(9, "No such process")})
    rc, out = env_proof(helper, monkeypatch, capsys, "--expected-json", '{"A": "1"}')
    assert rc == 1 and out["processes"] == [] and out["error"] == "no process in %s" % GROUP


def test_env_proof_env_file_drift_wins_and_desired_values_are_expected(helper, unit, monkeypatch, capsys, tmp_path):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("A=1\nB=old\n")
    unit({5: (b"A=1\0B=new\0C=3\0", b"sglang\0")})
    rc, out = env_proof(helper, monkeypatch, capsys, "--env-file", str(env_file), "--expected-json",
                        '{"B": "new", "C": "3"}')
    drift = {"B": {"want": "new", "file": "old"}, "C": {"want": "3", "file": None}}
    assert rc == 1 and out["expected"] == {"A": "1", "B": "new", "C": "3"}
    assert out["processes"][0]["ok"] is True and out["env_file_drift"] == drift
    assert out["error"] == "the environment file differs from the desired values: %s" % drift


def test_env_proof_with_an_env_file_that_agrees(helper, unit, monkeypatch, capsys, tmp_path):
    env_file = tmp_path / "nccl.env"
    env_file.write_text("A=1\nB=2\n")
    unit({5: (b"A=1\0B=2\0", b"sglang\0")})
    rc, out = env_proof(helper, monkeypatch, capsys, "--env-file", str(env_file), "--expected-json", '{"B": "2"}')
    assert (rc, out["ok"], out["error"], out["env_file_drift"]) == (0, True, None, {})
    assert out["expected"] == {"A": "1", "B": "2"}


def test_env_proof_refuses_to_prove_nothing(helper, unit, monkeypatch, capsys, tmp_path):
    unit({5: (b"A=1\0", b"sglang\0")})
    empty = tmp_path / "empty.env"
    empty.write_text("# nothing\n")
    rc, out = env_proof(helper, monkeypatch, capsys, "--env-file", str(empty))
    assert (rc, out["ok"], out["processes"], out["control_group"]) == (1, False, [], None)
    assert out["error"] == "no expected variables (empty env file and no --expected-json): nothing to prove"


def test_env_proof_refuses_an_unreadable_env_file(helper, unit, monkeypatch, capsys, tmp_path):
    unit({5: (b"A=1\0", b"sglang\0")})
    missing = str(tmp_path / "missing.env")
    rc, out = env_proof(helper, monkeypatch, capsys, "--env-file", missing, "--expected-json", '{"A": "1"}')
    assert rc == 1 and out["ok"] is False and out["processes"] == [] and out["expected"] == {}
    assert out["error"] == "cannot read %s: [Errno 2] No such file or directory: %r" % (missing, missing)


def test_env_proof_without_control_group(helper, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(helper, "_control_group", lambda name: "")
    monkeypatch.setattr(helper, "_cgroup_dir", lambda group: asked.append(group) or "/sys/fs/cgroup")
    rc, out = env_proof(helper, monkeypatch, capsys, "--expected-json", '{"A": "1"}')
    assert (rc, asked, out["ok"]) == (1, [], False)  # an empty ControlGroup is not the root of the hierarchy
    assert out["control_group"] == "" and out["error"] == "sglang.service has no control group (is it running?)"


# ------------------------------------------------------------------------------------------------------- worker-env
# The benchmark records what this reads (sglang_bench_run calls it): the story it guards is NCCL variables that
# reached the launcher but not the spawned workers.

def worker_env(helper, monkeypatch, capsys, *args):
    return run_json(helper, monkeypatch, capsys, "worker-env", "--unit", "sglang.service", *args)[:2]


# CUDA_HOME and OTHER share first letters with the prefixes: only whole prefixes select
TUNED = b"PATH=/usr/bin\0NCCL_PROTO=LL\0NCCL_ALGO=Ring\0TORCH_NCCL_X=1\0CUDA_HOME=/c\0OTHER=1\0junk\0"


def test_worker_env_reads_the_scheduler_workers_not_the_launcher(helper, unit, monkeypatch, capsys):
    # SGLang's launcher sets NCCL_CUMEM_ENABLE etc. for its children: its own environ (the start environment)
    # differs from the workers' by design and is not what NCCL runs with
    child = TUNED + b"NCCL_CUMEM_ENABLE=0\0"
    unit({100: (TUNED, b"/opt/sglang/venv/bin/python\0-m\0sglang.launch_server\0"),
          101: (child, b"sglang::scheduler_TP0\0"), 102: (child, b"sglang::scheduler_TP1\0"),
          103: (child, b"sglang::detokenizer\0"), 104: ProcessLookupError(104, "No such process")})
    rc, out = worker_env(helper, monkeypatch, capsys, "--prefix", "NCCL_", "--prefix=TORCH_NCCL")
    assert rc == 0
    assert out == {"ok": True, "unit": "sglang.service", "control_group": GROUP, "error": None,
                   "pids": [100, 101, 102, 103, 104], "worker_pids": [101, 102], "workers_titled": True,
                   "pids_with_vars": [100, 101, 102, 103], "consistent": True,
                   "env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "TORCH_NCCL_X": "1", "NCCL_CUMEM_ENABLE": "0"}}


def test_worker_env_names_the_worker_that_differs(helper, unit, monkeypatch, capsys):
    unit({101: (TUNED, b"sglang::scheduler_TP0\0"), 102: (b"NCCL_CUMEM_ENABLE=0\0PATH=/bin\0", b"sglang::scheduler_TP1\0"),
          103: (b"PATH=/bin\0", b"sglang::scheduler_TP2\0")})
    rc, out = worker_env(helper, monkeypatch, capsys, "--prefix", "NCCL_")
    assert rc == 0 and out["ok"] is True and out["consistent"] is False and out["env"] == {}
    assert out["per_pid"] == {"101": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, "102": {"NCCL_CUMEM_ENABLE": "0"},
                              "103": {}}
    assert out["pids_with_vars"] == [101, 102] and out["worker_pids"] == [101, 102, 103]


def test_worker_env_without_titled_workers_compares_every_process(helper, unit, monkeypatch, capsys):
    unit({10: (TUNED, b"python\0"), 11: (TUNED, b"python\0"), 12: FileNotFoundError(2, "gone")})
    rc, out = worker_env(helper, monkeypatch, capsys, "--prefix", "NCCL_")
    assert rc == 0 and out["workers_titled"] is False and out["consistent"] is True
    assert out["pids"] == [10, 11, 12] and out["worker_pids"] == [10, 11] and "per_pid" not in out
    assert out["env"] == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    # no prefix: nothing is recorded, and nobody carries a variable
    rc, out = worker_env(helper, monkeypatch, capsys)
    assert rc == 0 and out["env"] == {} and out["pids_with_vars"] == [] and out["consistent"] is True


def test_worker_env_with_every_process_gone_vouches_for_nothing(helper, unit, monkeypatch, capsys):
    unit({7: ProcessLookupError(7, "No such process")})
    rc, out = worker_env(helper, monkeypatch, capsys, "--prefix", "NCCL_")
    assert rc == 0 and out["consistent"] is False and out["worker_pids"] == [] and out["per_pid"] == {}


def test_worker_env_fails_without_a_process(helper, unit, monkeypatch, capsys):
    unit({})
    rc, out = worker_env(helper, monkeypatch, capsys)
    assert (rc, out) == (1, {"ok": False, "unit": "sglang.service", "control_group": GROUP,
                             "error": "unit sglang.service has no process"})


def test_worker_env_fails_without_a_control_group(helper, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(helper, "_control_group", lambda name: "/system.slice/sglang.service")
    monkeypatch.setattr(helper, "_cgroup_dir", lambda group: asked.append(group))
    rc, out = worker_env(helper, monkeypatch, capsys)
    assert rc == 1 and asked == ["/system.slice/sglang.service"] and out["control_group"] == GROUP
    assert out["error"] == ("unit sglang.service has no cgroup ('/system.slice/sglang.service' under any of "
                            "/sys/fs/cgroup, /sys/fs/cgroup/unified, /sys/fs/cgroup/systemd): is the server running?")
    monkeypatch.setattr(helper, "_control_group", lambda name: "")
    rc, out = worker_env(helper, monkeypatch, capsys)
    assert rc == 1 and asked == ["/system.slice/sglang.service"] and out["error"].startswith(
        "unit sglang.service has no cgroup ('' under")


def test_worker_env_reports_a_systemctl_failure(helper, monkeypatch, capsys):
    def fail(argv, **kwargs):
        raise subprocess.CalledProcessError(1, argv, output="", stderr="Failed to connect to bus\n")
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fail, CalledProcessError=subprocess.CalledProcessError))
    rc, out = worker_env(helper, monkeypatch, capsys)
    assert (rc, out) == (1, {"ok": False, "unit": "sglang.service", "control_group": None,
                             "error": "systemctl show sglang.service failed: Failed to connect to bus"})
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(
        run=lambda argv, **kw: raising(subprocess.CalledProcessError(4, argv, output=" no unit \n")),
        CalledProcessError=subprocess.CalledProcessError))
    assert worker_env(helper, monkeypatch, capsys)[1]["error"] == "systemctl show sglang.service failed: no unit"
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(
        run=lambda argv, **kw: raising(subprocess.CalledProcessError(1, argv, output="", stderr="")),
        CalledProcessError=subprocess.CalledProcessError))
    assert worker_env(helper, monkeypatch, capsys)[1]["error"] == "systemctl show sglang.service failed: "


def test_pids_skips_a_sub_group_removed_during_the_walk(helper, tmp_path, monkeypatch):
    (tmp_path / "cgroup.procs").write_text("5\n")
    for name, pid in (("a", 6), ("b", 7), ("c", 8)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cgroup.procs").write_text("%d\n" % pid)
    real_open, gone = open, []

    def fake_open(path, *args, **kwargs):
        # the first sub-group walked is removed before it is read; the walk goes on to the others
        if os.path.dirname(str(path)) != str(tmp_path) and not gone:
            gone.append(os.path.basename(os.path.dirname(str(path))))
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    left = {"a": 6, "b": 7, "c": 8}
    pids = helper._pids(str(tmp_path))
    assert len(gone) == 1 and pids == sorted([5] + [pid for name, pid in left.items() if name != gone[0]])


# ------------------------------------------------------------------------------------------------------- wait-ready

class Clock:
    """time.monotonic / time.sleep: sleeping moves the clock."""

    def __init__(self, now=1000.0):
        self.now, self.sleeps = now, []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def server(helper, monkeypatch):
    """server(states, answers, cost=0): the unit's successive states and the probe's successive answers
    (phase, status); the last of each repeats. Each probe takes `cost` seconds."""
    clock = Clock()
    seen = types.SimpleNamespace(clock=clock, units=[], probes=[])

    def make(states, answers, cost=0.0):
        def unit_state(unit):
            seen.units.append(unit)
            return states[min(len(seen.units), len(states)) - 1]

        def probe(host, port, path, timeout):
            seen.probes.append((host, port, path, timeout))
            clock.now += cost
            return answers[min(len(seen.probes), len(answers)) - 1]

        monkeypatch.setattr(helper, "time", clock)
        monkeypatch.setattr(helper, "_unit_state", unit_state)
        monkeypatch.setattr(helper, "_probe", probe)
        return seen
    return make


def wait_ready(helper, monkeypatch, capsys, *args):
    rc, out, _err = run_json(helper, monkeypatch, capsys, "wait-ready", *args)
    return rc, out


def test_wait_ready_returns_on_the_first_200(helper, server, monkeypatch, capsys):
    seen = server(["activating", "reloading", "active"], [("port closed", None), ("HTTP 503", 503), ("HTTP 200", 200)],
                  cost=0.1234)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--host", "10.0.0.5", "--path", "/health",
                         "--request-timeout", "5", "--interval", "1.5", "--unit", "sglang@a.service")
    assert rc == 0
    assert out == {"ready": True, "unit": "active", "phase": "HTTP 200", "status": 200, "waited_s": 3.4}
    assert seen.probes == [("10.0.0.5", 30000, "/health", 5.0)] * 3 and seen.clock.sleeps == [1.5, 1.5]
    assert seen.units == ["sglang@a.service"] * 3


def test_wait_ready_defaults(helper, server, monkeypatch, capsys):
    seen = server(["active"], [("HTTP 200", 200)], cost=0.06)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000")
    assert rc == 0 and out["waited_s"] == 0.1
    assert seen.probes == [("127.0.0.1", 30000, "/health_generate", 30)] and seen.units == ["sglang.service"]


def test_wait_ready_gives_up_before_the_budget_is_spent(helper, server, monkeypatch, capsys):
    seen = server(["activating"], [("port closed", None), ("HTTP 503", 503)])
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--budget", "10", "--interval", "2")
    # probes at 0, 2, 4, 6, 8 s: another 2 s sleep would reach the 10 s budget
    assert rc == 3 and len(seen.probes) == 5 and seen.clock.sleeps == [2, 2, 2, 2]
    assert out == {"ready": False, "unit": "activating", "phase": "HTTP 503", "status": 503, "waited_s": 8.0}


def test_wait_ready_default_budget_and_interval(helper, server, monkeypatch, capsys):
    seen = server(["active"], [("port open, /health_generate failed: timed out", None)])
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000")
    assert rc == 3 and len(seen.probes) == 30 and seen.clock.sleeps == [2] * 29
    assert out == {"ready": False, "unit": "active", "phase": "port open, /health_generate failed: timed out",
                   "status": None, "waited_s": 58.0}


def test_wait_ready_probes_once_when_the_budget_is_shorter_than_the_interval(helper, server, monkeypatch, capsys):
    seen = server(["active"], [("port closed", None)], cost=0.25)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "1", "--budget", "1", "--interval", "2")
    assert (rc, len(seen.probes), seen.clock.sleeps) == (3, 1, [])
    assert out == {"ready": False, "unit": "active", "phase": "port closed", "status": None, "waited_s": 0.2}


@pytest.mark.parametrize("state", ["failed", "inactive", "deactivating", "unknown"])
def test_wait_ready_stops_when_the_unit_is_not_running(helper, server, monkeypatch, capsys, state):
    seen = server(["activating", state], [("HTTP 503", 503)], cost=0.26)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--interval", "5")
    assert rc == 4 and len(seen.probes) == 1
    assert out == {"ready": False, "unit": state, "phase": "sglang.service is %s" % state, "status": 503,
                   "waited_s": 5.3}


def test_wait_ready_stops_at_once_for_a_stopped_unit(helper, server, monkeypatch, capsys):
    seen = server(["inactive"], [("HTTP 200", 200)])
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--unit", "x.service")
    assert rc == 4 and seen.probes == []
    assert out == {"ready": False, "unit": "inactive", "phase": "x.service is inactive", "status": None,
                   "waited_s": 0.0}


def listen_bound(helper, monkeypatch, started):
    """The unit's main process started at `started` on the fake clock (None: systemd has no time); the calls."""
    calls = []
    monkeypatch.setattr(helper, "_main_started", lambda unit: calls.append(unit) or started)
    return calls


def test_wait_ready_fails_when_nothing_listens_past_the_listen_timeout_from_the_servers_start(helper, server,
                                                                                              monkeypatch, capsys):
    seen = server(["active"], [("port closed", None)], cost=0.123)
    asked = listen_bound(helper, monkeypatch, started=seen.clock.now - 50)  # this call comes 50 s after the start
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--listen-timeout", "60", "--unit", "u")
    # probes at 50, 52.1, ... s after the start (each takes 0.123 s): the sixth finds the bound passed
    assert rc == 5 and len(seen.probes) == 6 and seen.clock.sleeps == [2] * 5 and asked == ["u"]
    assert out == {"ready": False, "unit": "active", "status": None, "waited_s": 10.7,
                   "phase": "nothing listens on 127.0.0.1:30000 61 s after the server started (listen timeout 60 s)"}


def test_wait_ready_ends_the_wait_when_the_listen_timeout_is_just_reached(helper, server, monkeypatch, capsys):
    seen = server(["active"], [("port closed", None)])
    listen_bound(helper, monkeypatch, started=seen.clock.now - 56)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--listen-timeout", "60")
    assert rc == 5 and len(seen.probes) == 3 and out["waited_s"] == 4.0  # at 56, 58 and 60 s: 60 is the bound


def test_wait_ready_does_not_bound_a_port_that_listens_or_a_unit_still_starting(helper, server, monkeypatch, capsys):
    seen = server(["activating", "activating", "active"], [("port closed", None), ("port closed", None),
                                                           ("HTTP 503", 503)])
    listen_bound(helper, monkeypatch, started=seen.clock.now - 3600)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--listen-timeout", "60", "--budget", "10")
    assert rc == 3 and out["phase"] == "HTTP 503"  # the gate (start-pre), then a port that listens: waited on


def test_wait_ready_without_the_servers_start_time_has_no_listen_bound(helper, server, monkeypatch, capsys):
    server(["active"], [("port closed", None)])
    asked = listen_bound(helper, monkeypatch, started=None)
    rc, out = wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--listen-timeout", "1", "--budget", "6")
    assert rc == 3 and out["phase"] == "port closed" and len(asked) == 3  # asked again each poll until it knows


def test_wait_ready_has_no_listen_bound_by_default(helper, server, monkeypatch, capsys):
    server(["active"], [("port closed", None)])
    asked = listen_bound(helper, monkeypatch, started=0.0)
    assert wait_ready(helper, monkeypatch, capsys, "--port", "30000", "--budget", "4")[0] == 3 and asked == []


@pytest.mark.parametrize("stdout, started", [("12345678\n", 12.345678), ("1\n", 1e-06), ("0\n", None), ("", None),
                                             ("[not set]\n", None)])
def test_main_started_reads_systemds_monotonic_time_of_the_main_process(helper, monkeypatch, stdout, started):
    calls = []
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run(calls, {"systemctl": completed(stdout)})))
    assert helper._main_started("sglang.service") == started
    assert calls == [(["systemctl", "show", "sglang.service", "--property=ExecMainStartTimestampMonotonic", "--value"],
                      {"capture_output": True, "text": True, "check": False})]


def test_unit_state_asks_systemctl(helper, monkeypatch):
    calls = []
    answers = iter([completed("active\n", returncode=0), completed("", returncode=4)])
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(
        run=fake_run(calls, {"systemctl": lambda argv, **kw: next(answers)})))
    assert helper._unit_state("sglang.service") == "active"
    assert helper._unit_state("gone.service") == "unknown"
    assert calls == [(["systemctl", "is-active", "sglang.service"], {"capture_output": True, "text": True, "check": False}),
                     (["systemctl", "is-active", "gone.service"], {"capture_output": True, "text": True, "check": False})]


class Connection:
    def __init__(self, calls, error=None):
        self.calls, self.error = calls, error

    def __call__(self, address, timeout=None):
        self.calls.append(("connect", address, timeout))
        if self.error:
            raise self.error
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.calls.append(("close",))
        return False


class Response:
    def __init__(self, status):
        self.status = status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def probe_with(helper, monkeypatch, connect_error=None, answer=None):
    calls = []

    def urlopen(url, timeout=None):
        calls.append(("get", url, timeout))
        if isinstance(answer, Exception):
            raise answer
        return Response(answer)

    monkeypatch.setattr(helper, "socket", types.SimpleNamespace(create_connection=Connection(calls, connect_error)))
    monkeypatch.setattr(helper, "urllib", types.SimpleNamespace(
        request=types.SimpleNamespace(urlopen=urlopen), error=urllib.error))
    return calls, helper._probe("10.0.0.5", 30000, "/health_generate", 7.5)


def test_probe_reports_a_closed_port_without_http(helper, monkeypatch):
    calls, result = probe_with(helper, monkeypatch, connect_error=ConnectionRefusedError(111, "refused"))
    assert result == ("port closed", None) and calls == [("connect", ("10.0.0.5", 30000), 2)]


@pytest.mark.parametrize("answer, result", [
    (200, ("HTTP 200", 200)),
    (urllib.error.HTTPError("u", 503, "Service Unavailable", {}, None), ("HTTP 503", 503)),
    (urllib.error.URLError("timed out"), ("port open, /health_generate failed: <urlopen error timed out>", None)),
    (ConnectionResetError(104, "reset"), ("port open, /health_generate failed: [Errno 104] reset", None)),
])
def test_probe_gets_the_health_path(helper, monkeypatch, answer, result):
    calls, got = probe_with(helper, monkeypatch, answer=answer)
    assert got == result
    assert calls == [("connect", ("10.0.0.5", 30000), 2), ("close",),
                     ("get", "http://10.0.0.5:30000/health_generate", 7.5)]


# ------------------------------------------------------------------------------------------------------------ state

SHOW = ("ActiveState=active\nSubState=running\nMainPID=4242\nActiveEnterTimestamp=Mon 2026-11-30 10:00:00 UTC\n"
        "UnitFileState=enabled\nLoadState=loaded\nExecStart={ path=/usr/local/sbin/gpuserve-sglang ; argv[]=a=b }\n"
        "no equals sign\n")
UNIT = {"ActiveState": "active", "SubState": "running", "MainPID": "4242",
        "ActiveEnterTimestamp": "Mon 2026-11-30 10:00:00 UTC", "UnitFileState": "enabled", "LoadState": "loaded",
        "ExecStart": "{ path=/usr/local/sbin/gpuserve-sglang ; argv[]=a=b }"}
SHOW_ARGV = ["systemctl", "show", "sglang.service",
             "--property=ActiveState,SubState,MainPID,ActiveEnterTimestamp,UnitFileState,LoadState"]


def test_state_collects_git_files_manifest_unit_and_python(helper, monkeypatch, capsys, tmp_path):
    porcelain = ("# branch.oid 0123456789abcdef0123456789abcdef01234567\n# branch.head main\n"
                 "1 .M N... 100644 100644 100644 aaaa bbbb python/sglang/srt/server_args.py\n"
                 "? python/sglang/new.py\n")
    calls = []
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run(calls, {
        "git": completed(porcelain, "  " + "0123456789" * 60 + "  \n"), "systemctl": completed(SHOW)})))
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 * (1 << 20) + 5))  # more than one 1 MiB block
    small = tmp_path / "args.json"
    small.write_text('{"argv": []}')
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"commit": "0123", "args_sha1": "abc"}')
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    rc, out, err = run_json(helper, monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", "/opt/sglang/src",
                            "--file", str(big), "--file", str(small), "--file", str(tmp_path / "gone"),
                            "--manifest", str(manifest), "--python", str(python))
    assert (rc, err) == (0, "")
    assert out == {
        "git": {"rc": 0, "error": "0123456789" * 50, "commit": "0123456789abcdef0123456789abcdef01234567",
                "changes": [" M python/sglang/srt/server_args.py", "?? python/sglang/new.py"], "dirty": True},
        "files": {str(big): {"exists": True, "sha1": hashlib.sha1(big.read_bytes()).hexdigest()},
                  str(small): {"exists": True, "sha1": hashlib.sha1(b'{"argv": []}').hexdigest()},
                  str(tmp_path / "gone"): {"exists": False, "sha1": ""}},
        "manifest": {"commit": "0123", "args_sha1": "abc"},
        "unit": UNIT,
        "python_exists": True,
    }
    assert calls == [
        (["git", "-c", "safe.directory=*", "-C", "/opt/sglang/src", "status", "--porcelain=v2", "--branch",
          "--untracked-files=all"], {"capture_output": True, "text": True, "check": False}),
        (SHOW_ARGV, {"capture_output": True, "text": True, "check": False}),
    ]


def test_state_without_a_repository_manifest_or_python(helper, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run([], {
        "git": completed("", "fatal: not a git repository (or any of the parent directories): .git\n", 128),
        "systemctl": completed("")})))
    rc, out, _err = run_json(helper, monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path),
                             "--manifest", str(tmp_path / "none.json"))
    assert rc == 0
    assert out == {"git": {"rc": 128, "error": "fatal: not a git repository (or any of the parent directories): .git",
                           "commit": None, "changes": [], "dirty": None},
                   "files": {}, "manifest": None, "unit": {}, "python_exists": None}


def test_state_reports_an_unreadable_manifest_and_a_python_that_cannot_run(helper, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run([], {
        "git": completed("# branch.oid (initial)\n# branch.head main\n"), "systemctl": completed(SHOW)})))
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{not json")
    python = tmp_path / "python3"
    python.write_text("")
    python.chmod(0o644)
    rc, out, _err = run_json(helper, monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path),
                             "--manifest", str(manifest), "--python", str(python))
    # a repository with no commit yet: no commit to name
    assert rc == 0 and out["git"] == {"rc": 0, "error": "", "commit": None, "changes": [], "dirty": False}
    assert out["manifest"] == {"_error": "unreadable manifest: Expecting property name enclosed in double quotes: "
                                         "line 1 column 2 (char 1)"}
    assert out["python_exists"] is False and out["unit"] == UNIT


def test_state_reads_a_real_git_tree(helper, monkeypatch, capsys, tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(git + ["init", "-q"], check=True)
    (tmp_path / "a.py").write_text("a = 1\n")
    subprocess.run(git + ["add", "a.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (tmp_path / "a.py").write_text("a = 2\n")
    (tmp_path / "new.py").write_text("")
    real_run = subprocess.run
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run([], {
        "git": lambda argv, **kw: real_run(argv, **kw), "systemctl": completed("")})))
    rc, out, _err = run_json(helper, monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path))
    assert rc == 0 and out["git"]["commit"] == head and out["git"]["rc"] == 0 and out["git"]["error"] == ""
    changes = out["git"]["changes"]
    assert changes == [" M a.py", "?? new.py"] and out["git"]["dirty"] is True
    # the benchmark's reader is the same function: `source` prints what `state` carries under "git"
    rc, source, _err = run_json(helper, monkeypatch, capsys, "source", "--src", str(tmp_path))
    assert rc == 0 and source == out["git"]
    (tmp_path / "new.py").unlink()
    subprocess.run(git + ["checkout", "-q", "a.py"], check=True)
    rc, source, _err = run_json(helper, monkeypatch, capsys, "source", "--src", str(tmp_path))
    assert (rc, source["commit"], source["changes"], source["dirty"]) == (0, head, [], False)


def test_source_reports_a_git_failure_and_exits_1(helper, monkeypatch, capsys, tmp_path):
    calls = []
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run(calls, {
        "git": completed("", "fatal: not a git repository\n", 128)})))
    rc, out, _err = run_json(helper, monkeypatch, capsys, "source", "--src", "/opt/sglang/src")
    assert rc == 1
    assert out == {"rc": 128, "error": "fatal: not a git repository", "commit": None, "changes": [], "dirty": None}
    assert calls == [(["git", "-c", "safe.directory=*", "-C", "/opt/sglang/src", "status", "--porcelain=v2",
                       "--branch", "--untracked-files=all"], {"capture_output": True, "text": True, "check": False})]


def test_source_counts_only_non_header_lines_as_changes(helper, monkeypatch, capsys):
    # a header line with a space in its value and an untracked file named like a header are told apart
    porcelain = "# branch.oid abc def\n# branch.head main\n? # odd name\n"
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run([], {"git": completed(porcelain)})))
    rc, out, _err = run_json(helper, monkeypatch, capsys, "source", "--src", "/s")
    assert rc == 0 and out["commit"] == "abc def" and out["changes"] == ['?? "# odd name"'] and out["dirty"] is True


@pytest.mark.parametrize("action", ["source", "state"])
@pytest.mark.parametrize("lib", [None, "/srv/lib"])
def test_the_tree_is_read_by_the_sent_collection_reader(helper, monkeypatch, capsys, action, lib):
    """`source` and `state` import _git_tree from --lib (default: where the role sends it) and run its command."""
    seen = []
    tree_module = importlib.import_module("ansible_collections.gpuserve.sglang.plugins.module_utils._git_tree")
    monkeypatch.setattr(helper, "_collection_module", lambda name, where: seen.append((name, where)) or tree_module)
    calls = []
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run(calls, {
        "git": completed("# branch.oid abc\n1 .M N... 1 2 3 a b x.py\n"), "systemctl": completed("")})))
    argv = [action, "--src", "/s"] + (["--unit", "u.service"] if action == "state" else [])
    argv += ["--lib", lib] if lib else []
    rc, out, _err = run_json(helper, monkeypatch, capsys, *argv)
    tree = out if action == "source" else out["git"]
    assert rc == 0 and tree == {"rc": 0, "error": "", "commit": "abc", "changes": [" M x.py"], "dirty": True}
    assert seen == [("_git_tree", lib or "/usr/local/lib/gpuserve-sglang")]
    assert calls[0][0] == ["git", "-c", "safe.directory=*", "-C", "/s", "status", "--porcelain=v2", "--branch",
                           "--untracked-files=all"]


@pytest.mark.foreign_python
def test_the_sent_tree_reader_is_all_source_needs_without_ansible(tmp_path):
    """What the container has: the helper and _git_tree.py under --lib, a Python without ansible."""
    dest = tmp_path / "lib" / "ansible_collections" / "gpuserve" / "sglang" / "plugins" / "module_utils"
    dest.mkdir(parents=True)
    (dest / "_git_tree.py").write_text(open(os.path.join(ROOT, "plugins", "module_utils", "_git_tree.py")).read())
    src = tmp_path / "src"
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    (src / "a.py").write_text("")
    subprocess.run(git + ["add", "a.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (src / "b.py").write_text("")
    out = subprocess.run([sys.executable, "-I", "-S", HELPER, "source", "--src", str(src), "--lib",
                          str(tmp_path / "lib")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"rc": 0, "error": "", "commit": head, "changes": ["?? b.py"], "dirty": True}


# ------------------------------------------------------------------------------------------------- required options

@pytest.mark.parametrize("argv, usage, missing", [
    (["env-proof"], "usage: gpuserve-sglang env-proof [-h] --unit UNIT", "--unit"),
    (["state", "--src", "/opt/sglang/src"], "usage: gpuserve-sglang state [-h] --unit UNIT --src SRC", "--unit"),
    (["state", "--unit", "sglang.service"], "usage: gpuserve-sglang state [-h] --unit UNIT --src SRC", "--src"),
    (["worker-env"], "usage: gpuserve-sglang worker-env [-h] --unit UNIT", "--unit"),
    (["source"], "usage: gpuserve-sglang source [-h] --src SRC", "--src"),
])
def test_subcommands_refuse_a_missing_required_option(helper, monkeypatch, capsys, argv, usage, missing):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang"] + argv)
    with pytest.raises(SystemExit) as exc:
        helper.main()
    err = " ".join(capsys.readouterr().err.split())
    assert exc.value.code == 2 and err.startswith(usage)
    assert err.endswith("%s: error: the following arguments are required: %s" % (usage.split(" [")[0][7:], missing))


# ----------------------------------------------------------------------------------------------------------- locale

@pytest.fixture
def c_locale():
    """An ASCII process locale (LC_CTYPE=C): open() without an encoding would then refuse UTF-8 bytes."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    yield
    locale.setlocale(locale.LC_CTYPE, before)


def test_files_are_read_as_utf8_whatever_the_locale(helper, monkeypatch, capsys, tmp_path, execv, c_locale):
    args = ["--model-path", "/models/模型-é", "--tp-size", "2"]
    path = args_file(tmp_path, json.dumps({"argv": args}, ensure_ascii=False))  # UTF-8 bytes, not \u escapes
    rc, _out, _err = run_main(helper, monkeypatch, capsys, "exec", path, "--", "/usr/bin/sglang")
    assert rc == 127 and execv == [("/usr/bin/sglang", ["/usr/bin/sglang"] + args)]

    install_sglang(monkeypatch)
    rc, out, _err = run_json(helper, monkeypatch, capsys, "validate-args", "--args-file", path)
    assert rc == 0 and out["argv"] == args

    env = tmp_path / "nccl.env"
    env.write_text("# réglages NCCL\nNCCL_DEBUG_SUBSYS=INIT\nGPUSERVE_NOTE=déjà\n", encoding="utf-8")
    assert helper._env_file(str(env)) == {"NCCL_DEBUG_SUBSYS": "INIT", "GPUSERVE_NOTE": "déjà"}

    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"model": "qwen-é"}, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(helper, "subprocess", types.SimpleNamespace(run=fake_run([], {
        "git": completed(""), "systemctl": completed("")})))
    rc, out, _err = run_json(helper, monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path),
                             "--manifest", str(manifest))
    assert rc == 0 and out["manifest"] == {"model": "qwen-é"}
