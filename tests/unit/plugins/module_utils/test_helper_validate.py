"""gpuserve-sglang validate-args (plugins/module_utils/_helper_validate.py), in-process: SGLang's parser and full
flag names, the values SGLang checks only once it runs, its start checks for any model (resolve_once on a dummy
model), the speculative algorithm's name, the model directories, the record that lets an unchanged argument check
skip SGLang (issue 30), the listen check that binds the server's host before anything is stopped (issue 30), and
the draft's architecture read against the speculative algorithm.

SGLang is a small fake in sys.modules: the tiny one of tests/support/sglang_helper.py (install_sglang: a parser
only), or FakeSGLang below with SGLang 0.5.23's seams (prepare_server_args returning a record with resolve_once,
SpeculativeAlgorithm.from_string, hf_transformers_utils.get_config). The record's inputs are real: a git tree, a
venv directory whose python answers the install probe from a file, model directories on disk.
"""
import json
import os
import socket
import subprocess
import sys
import types

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_cli, _helper_validate, _speculative
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    args_file, install, install_sglang, run_json)
from ansible_collections.gpuserve.sglang.tests.support.git_tree import commit_tree


def validate(monkeypatch, capsys, argv, *extra):
    return run_json(monkeypatch, capsys, "validate-args", "--argv-json", json.dumps(argv), *extra)


# ---------------------------------------------------------------------------------------------- SGLang's parser

GOOD = ["--model-path=/models/qwen=v2", "--tp-size", "2", "--cuda-graph-max-bs=256", "--cuda-graph-bs", "1", "8"]
# what runs on an SGLang whose parser makes its checks (no resolve_once, no speculative algorithm set)
PARSER_CHECKS = ["parser", "full flag names", "values SGLang checks only once it runs"]
# the listen check of an argv without --host: SGLang's default, which binds everywhere
DEFAULT_LISTEN = {"host": "127.0.0.1", "addresses": ["127.0.0.1"], "ok": True, "error": None}


def test_validate_args_accepts_full_flags_and_keeps_sglangs_warnings(monkeypatch, capsys):
    calls = install_sglang(monkeypatch, say=[
        ("err", "\x1b[33mWARNING\x1b[0m: cuda graph batch sizes padded"),
        ("out", "   --disable-radix-cache is Deprecated, use --disable-prefix-cache   "),
        ("err", "INFO: loading config"),
        ("err", "prewarnings and nowarningsx are not warnings"),
        ("out", "warnings: none here either"),
    ])
    rc, out, err = validate(monkeypatch, capsys, GOOD)
    assert calls == [GOOD]
    assert rc == 0 and err == ""  # nothing SGLang printed leaks to the helper's stdout or stderr
    assert out == {"ok": True, "sglang_version": "0.5.22", "argv": GOOD, "error": None, "warnings": [
        "WARNING: cuda graph batch sizes padded",
        "--disable-radix-cache is Deprecated, use --disable-prefix-cache",
    ], "checks": PARSER_CHECKS, "cached_since": None, "listen": DEFAULT_LISTEN}


def test_validate_args_reads_an_args_file(monkeypatch, capsys, tmp_path):
    install_sglang(monkeypatch, version=None)
    path = args_file(tmp_path, {"argv": ["--model-path", "/models/qwen-é", "--tp", "2"]})
    rc, out, err = run_json(monkeypatch, capsys, "validate-args", "--args-file", path)
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
def test_validate_args_refuses_abbreviated_flags(monkeypatch, capsys, argv, error, hint):
    install_sglang(monkeypatch, say=[("err", "WARNING: something deprecated")])
    rc, out, err = validate(monkeypatch, capsys, argv)
    message = "%s is not a full SGLang flag name; abbreviations are refused%s" % (error, hint)
    assert rc == 2
    assert out == {"ok": False, "sglang_version": "0.5.22", "argv": argv, "error": message,
                   "warnings": ["WARNING: something deprecated"], "checks": ["parser"], "cached_since": None, "listen": DEFAULT_LISTEN}
    assert err == "SGLang 0.5.22 rejected the arguments: %s\n" % message


def test_validate_args_reports_sglangs_own_parse_error(monkeypatch, capsys):
    install_sglang(monkeypatch, say=[("err", "WARNING: never printed")])
    rc, out, err = validate(monkeypatch, capsys, ["--model-path", "m", "--tp-size", "two"])
    message = "sglang: error: argument --tp-size/--tp: invalid int value: 'two'"
    assert rc == 2
    assert out == {"ok": False, "sglang_version": "0.5.22", "argv": ["--model-path", "m", "--tp-size", "two"],
                   "warnings": [], "error": message, "checks": [], "cached_since": None, "listen": DEFAULT_LISTEN}
    assert err == "SGLang 0.5.22 rejected the arguments: %s\n" % message


def test_validate_args_reports_a_bad_combination_raised_by_server_args(monkeypatch, capsys):
    install_sglang(monkeypatch, say=[("err", "WARNING: printed before the check")])
    rc, out, err = validate(monkeypatch, capsys, ["--model-path", "m", "--tp-size", "3"])
    assert rc == 2 and out["ok"] is False and out["warnings"] == []
    assert out["error"] == "ValueError: tp_size 3 does not divide the 8 attention heads"
    assert err == "SGLang 0.5.22 rejected the arguments: ValueError: tp_size 3 does not divide the 8 attention heads\n"


def test_validate_args_names_a_silent_exit_of_sglangs_parser(monkeypatch, capsys):
    install_sglang(monkeypatch, raise_exc=SystemExit(2))
    rc, out, err = validate(monkeypatch, capsys, ["--model-path", "m"])
    assert (rc, out["ok"], out["error"]) == (2, False, "SystemExit: 2")
    assert err == "SGLang 0.5.22 rejected the arguments: SystemExit: 2\n"


@pytest.mark.parametrize("code", [0, None])
def test_validate_args_takes_a_clean_exit_of_sglangs_parser_as_success(monkeypatch, capsys, code):
    install_sglang(monkeypatch, say=[("err", "warning: exiting")], raise_exc=SystemExit(code))
    rc, out, err = validate(monkeypatch, capsys, ["--model-path", "m"])
    assert (rc, err) == (0, "")
    assert out == {"ok": True, "sglang_version": "0.5.22", "argv": ["--model-path", "m"], "warnings": ["warning: exiting"],
                   "error": None, "checks": ["parser", "full flag names"], "cached_since": None, "listen": DEFAULT_LISTEN}


def test_validate_args_takes_sglangs_last_line_when_it_exits_without_an_error_line(monkeypatch, capsys):
    install_sglang(monkeypatch, say=[("err", "first"), ("out", "  the last words  "), ("err", "")],
                   raise_exc=SystemExit(1))
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", "m"])
    assert rc == 2 and out["error"] == "the last words"


@pytest.mark.parametrize("text, exc, message", [
    ("usage: sglang [-h]\nsglang: error: one\n  sglang: error: two  \nnote: see --help\n", SystemExit(2),
     "sglang: error: two"),
    ("usage: sglang [-h]\nsglang: error: only\nnote: see --help\n", SystemExit(2), "sglang: error: only"),
    ("\n  first line \n second line  \n third line\n\n", SystemExit(1), "third line"),
    ("", SystemExit(2), "SystemExit: 2"),
    (" \n\t\n", RuntimeError("boom"), "RuntimeError: boom"),
])
def test_sglang_message_picks_the_last_error_line(text, exc, message):
    assert _helper_validate._sglang_message(text, exc) == message


@pytest.mark.parametrize("source, error", [
    (["--argv-json", '{"argv": ["--tp-size", "2"]}'], "cannot read the arguments: argv must be a list of strings"),
    (["--argv-json", '["--tp-size", 2]'], "cannot read the arguments: argv must be a list of strings"),
    (["--argv-json", "[--tp-size"], "cannot read the arguments: Expecting value: line 1 column 2 (char 1)"),
])
def test_validate_args_refuses_unreadable_arguments(monkeypatch, capsys, source, error):
    calls = install_sglang(monkeypatch)
    rc, out, err = run_json(monkeypatch, capsys, "validate-args", *source)
    assert (rc, err, calls) == (2, "", [])
    assert out == {"ok": False, "sglang_version": None, "argv": None, "warnings": [], "error": error, "checks": [],
                   "cached_since": None}


def test_validate_args_refuses_an_args_file_it_cannot_read_or_without_argv(monkeypatch, capsys, tmp_path):
    install_sglang(monkeypatch)
    missing = str(tmp_path / "missing.json")
    rc, out, _err = run_json(monkeypatch, capsys, "validate-args", "--args-file", missing)
    assert rc == 2 and out["error"] == "cannot read the arguments: [Errno 2] No such file or directory: %r" % missing
    path = args_file(tmp_path, {"args": []})
    rc, out, _err = run_json(monkeypatch, capsys, "validate-args", "--args-file", path)
    assert rc == 2 and out["error"] == "cannot read the arguments: argv must be a list of strings"


def test_validate_args_exits_3_when_sglang_cannot_be_imported(monkeypatch, capsys):
    install_sglang(monkeypatch, with_prepare=False)
    rc, out, err = validate(monkeypatch, capsys, ["--model-path", "m"])
    assert (rc, err) == (3, "")
    assert out["ok"] is False and out["sglang_version"] is None and out["argv"] == ["--model-path", "m"]
    assert out["error"].startswith(
        "cannot import sglang.srt.server_args: ImportError: cannot import name 'prepare_server_args'")
    monkeypatch.setitem(sys.modules, "sglang", None)
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", "m"])
    assert rc == 3 and out["error"].startswith("cannot import sglang.srt.server_args: ModuleNotFoundError: ")


@pytest.mark.parametrize("argv, message", [
    ([], "error: one of the arguments --args-file --argv-json is required"),
    (["--args-file", "a", "--argv-json", "[]"], "error: argument --argv-json: not allowed with argument --args-file"),
])
def test_validate_args_needs_exactly_one_source(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "validate-args"] + argv)
    with pytest.raises(SystemExit) as exc:
        _helper_cli.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert " ".join(err.split()) == ("usage: gpuserve-sglang validate-args [-h] (--args-file ARGS_FILE | --argv-json ARGV_JSON) "
                                     "[--check-model] [--env-file ENV_FILE] [--record RECORD] [--record-read-only] "
                                     "[--src SRC] [--venv VENV] gpuserve-sglang validate-args: " + message)


ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "NGRAM")
ARGV = ["--model-path", "/m", "--tp-size", "2", "--speculative-algorithm", "EAGLE3", "--mem-fraction-static", "0.85"]
ALL_CHECKS = ["parser", "full flag names", "values SGLang checks only once it runs",
              "SGLang's start checks for any model", "speculative algorithm"]


class FakeSGLang:
    """What the helper sees of SGLang; counts what ran."""

    def __init__(self, monkeypatch):
        self.parsed, self.resolved, self.configs = [], [], []
        self.resolve_error = None
        self.config_error = None
        self.say = None  # a line SGLang prints while it parses
        self.seen_env = []
        fake = self

        class Record:
            def __init__(self, ns):
                self.__dict__.update(vars(ns))

            def resolve_once(self):
                fake.resolved.append(self.model_path)
                if fake.resolve_error is not None:
                    raise fake.resolve_error

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path")
                parser.add_argument("--speculative-draft-model-path", "--speculative-draft-model")
                parser.add_argument("--host", default="127.0.0.1")
                parser.add_argument("--tp-size", type=int, default=1)
                parser.add_argument("--port", type=int, default=30000)
                parser.add_argument("--mem-fraction-static", type=float)
                parser.add_argument("--max-running-requests", type=int)
                parser.add_argument("--speculative-algorithm")
                parser.add_argument("--speculative-num-steps", type=int)
                parser.add_argument("--trust-remote-code", action="store_true")

        def prepare_server_args(argv):
            import argparse
            fake.parsed.append(list(argv))
            fake.seen_env.append(os.environ.get("SGLANG_PROBE"))
            if fake.say:
                print(fake.say, file=sys.stderr)
            parser = argparse.ArgumentParser(prog="sglang serve", allow_abbrev=False)
            ServerArgs.add_cli_args(parser)
            return Record(parser.parse_args(argv))

        class SpeculativeAlgorithm:
            @staticmethod
            def from_string(name):
                if name.upper() not in ALGORITHMS:
                    raise ValueError("Unknown speculative algorithm name: %s" % name)
                return name.upper()

        def get_config(path, trust_remote_code):
            fake.configs.append((path, trust_remote_code))
            if fake.config_error is not None:
                raise fake.config_error
            return types.SimpleNamespace(architectures=["X"])

        modules = {
            "sglang": {"__version__": "0.5.23"},
            "sglang.srt": {},
            "sglang.srt.server_args": {"ServerArgs": ServerArgs, "prepare_server_args": prepare_server_args},
            "sglang.srt.speculative": {},
            "sglang.srt.speculative.spec_info": {"SpeculativeAlgorithm": SpeculativeAlgorithm},
            "sglang.srt.utils": {},
            "sglang.srt.utils.hf_transformers_utils": {"get_config": get_config},
        }
        for name, attrs in modules.items():
            mod = types.ModuleType(name)
            mod.__path__ = []  # a package, so its submodules import
            mod.__dict__.update(attrs)
            monkeypatch.setitem(sys.modules, name, mod)

    @staticmethod
    def unimportable(monkeypatch):
        """From here on `import sglang` fails: a run that still passes did not import it."""
        monkeypatch.setitem(sys.modules, "sglang", None)


@pytest.fixture
def sglang(monkeypatch):
    return FakeSGLang(monkeypatch)


# ------------------------------------------------------------------------------------------------- the checks

def test_every_check_runs_in_order_and_the_start_checks_run_on_a_dummy_model(monkeypatch, capsys, sglang):
    rc, out, err = validate(monkeypatch, capsys, ARGV)
    assert (rc, err) == (0, "")
    assert out == {"ok": True, "sglang_version": "0.5.23", "argv": ARGV, "warnings": [], "error": None,
                   "checks": ALL_CHECKS, "cached_since": None,
                   "listen": {"host": "127.0.0.1", "addresses": ["127.0.0.1"], "ok": True, "error": None}}
    assert sglang.parsed == [ARGV, ARGV]  # the record, then the copy that resolves
    assert sglang.resolved == ["dummy"]  # SGLang's checks for any model, never the model's own
    assert sglang.configs == []  # no model check unless asked


def test_sglangs_start_checks_refuse_with_sglangs_message(monkeypatch, capsys, sglang):
    sglang.resolve_error = ValueError("--prefill-decode-interval must be positive")
    rc, out, err = validate(monkeypatch, capsys, ARGV)
    message = ("ValueError: --prefill-decode-interval must be positive (SGLang's checks at start that hold for any "
               "model)")
    assert (rc, out["ok"], out["error"]) == (2, False, message)
    assert out["checks"] == ALL_CHECKS[:3]
    assert err == "SGLang 0.5.23 rejected the arguments: %s\n" % message


def test_an_exit_inside_sglangs_start_checks_is_a_refusal(monkeypatch, capsys, sglang):
    sglang.resolve_error = SystemExit(1)
    rc, out, _err = validate(monkeypatch, capsys, ARGV)
    assert rc == 2 and out["error"] == "SystemExit: 1 (SGLang's checks at start that hold for any model)"


def test_an_sglang_without_resolve_once_checks_in_its_parser_only(monkeypatch, capsys, sglang):
    del sys.modules["sglang.srt.speculative.spec_info"].SpeculativeAlgorithm
    record_class = sys.modules["sglang.srt.server_args"].prepare_server_args([]).__class__
    sglang.parsed.clear()
    monkeypatch.delattr(record_class, "resolve_once")
    rc, out, _err = validate(monkeypatch, capsys, ARGV)
    assert rc == 0 and out["checks"] == ALL_CHECKS[:3] and sglang.parsed == [ARGV]


@pytest.mark.parametrize("name", ["EAGLE9", "eagle-3", "MEDUSA"])
def test_an_algorithm_sglang_does_not_have_is_refused_naming_the_setting(monkeypatch, capsys, sglang, name):
    argv = ["--model-path", "/m", "--speculative-algorithm", name]
    rc, out, err = validate(monkeypatch, capsys, argv)
    message = ("speculative_algorithm (--speculative-algorithm) is %r: SGLang refuses it at start (Unknown "
               "speculative algorithm name: %s)" % (name, name))
    assert (rc, out["error"]) == (2, message) and err == "SGLang 0.5.23 rejected the arguments: %s\n" % message


@pytest.mark.parametrize("name", ["eagle3", "NGRAM"])
def test_a_known_algorithm_in_any_case_passes(monkeypatch, capsys, sglang, name):
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", "/m", "--speculative-algorithm", name])
    assert rc == 0 and out["checks"][-1] == "speculative algorithm"


def test_no_algorithm_is_not_checked(monkeypatch, capsys, sglang):
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", "/m"])
    assert rc == 0 and out["checks"] == ALL_CHECKS[:4]


@pytest.mark.parametrize("flag, value, message", [
    ("--port", "70000", "port (--port) is 70000: it must be a whole number at least 1 and at most 65535 (the TCP "
                        "port the server binds, once its weights are loaded)"),
    ("--port", "0", "port (--port) is 0: it must be a whole number at least 1 and at most 65535 (the TCP port the "
                    "server binds, once its weights are loaded)"),
    ("--mem-fraction-static", "1.5",
     "mem_fraction_static (--mem-fraction-static) is 1.5: it must be a number above 0 and below 1 (the share of each "
     "GPU's memory for the weights and the KV cache; SGLang sizes its pools with it once the weights are loaded, and "
     "the rest of the memory is what activations and CUDA graphs run in)"),
    ("--mem-fraction-static", "1", None),
    ("--mem-fraction-static", "0", None),
    ("--mem-fraction-static", "-0.1", None),
    ("--mem-fraction-static", "nan", "mem_fraction_static (--mem-fraction-static) is nan: it must be a number above 0 "
                                     "and below 1 (the share of each GPU's memory for the weights and the KV cache; "
                                     "SGLang sizes its pools with it once the weights are loaded, and the rest of the "
                                     "memory is what activations and CUDA graphs run in)"),
    ("--mem-fraction-static", "inf", None),
    ("--tp-size", "0", "tp_size (--tp-size) is 0: it must be a whole number at least 1 (tensor-parallel GPUs)"),
    ("--max-running-requests", "0", "max_running_requests (--max-running-requests) is 0: it must be a whole number "
                                    "at least 1 (requests in a batch)"),
    ("--speculative-num-steps", "0", None),
])
def test_values_sglang_checks_only_once_it_runs_are_refused_before(monkeypatch, capsys, sglang, flag, value,
                                                                   message):
    field = flag[2:].replace("-", "_")
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", "/m", flag, value])
    assert rc == 2 and out["error"].startswith("%s (%s) is " % (field, flag))
    if message:
        assert out["error"] == message
    assert sglang.resolved == []  # refused before SGLang's slower checks


@pytest.mark.parametrize("flag, value", [("--port", "1"), ("--port", "65535"), ("--mem-fraction-static", "0.999"),
                                         ("--mem-fraction-static", "0.01"), ("--tp-size", "1")])
def test_values_at_the_edges_pass(monkeypatch, capsys, sglang, flag, value):
    assert validate(monkeypatch, capsys, ["--model-path", "/m", flag, value])[0] == 0


@pytest.mark.parametrize("value, problem", [
    (True, "True"), ("8", "'8'"), (2.5, "2.5"), (None, None), (3.0, None), (1, None),
])
def test_range_problem_refuses_what_is_not_a_number_of_its_kind(value, problem):
    got = _helper_validate._range_problem("tp_size", value, 1, False, None, False, True, "GPUs")
    assert got == (None if problem is None else
                   "tp_size (--tp-size) is %s: it must be a whole number at least 1 (GPUs)" % problem)


@pytest.mark.parametrize("value, ok", [(0, False), (0.5, True), (1, True), (1.01, False)])
def test_range_problem_with_an_included_top_and_an_excluded_bottom(value, ok):
    got = _helper_validate._range_problem("f", value, 0, True, 1, False, False, "a share")
    assert (got is None) == ok
    if not ok:
        assert got == "f (--f) is %r: it must be a number above 0 and at most 1 (a share)" % value


# ------------------------------------------------------------------------------------------------- the models

def model_dir(tmp_path, name, config='{"architectures": ["LlamaForCausalLM"]}', code=None):
    path = tmp_path / name
    path.mkdir()
    if config is not None:
        (path / "config.json").write_text(config)
    if code is not None:
        (path / "configuration_x.py").write_text(code)
    return str(path)


def test_the_model_check_loads_each_model_config_with_sglangs_loader(monkeypatch, capsys, sglang, tmp_path):
    model, draft = model_dir(tmp_path, "model"), model_dir(tmp_path, "draft")
    argv = ["--model-path", model, "--speculative-draft-model-path", draft, "--trust-remote-code"]
    rc, out, _err = validate(monkeypatch, capsys, argv, "--check-model")
    assert rc == 0 and out["checks"][-1] == "model config"
    assert out["model"] == {"model_path": model, "speculative_draft_model_path": draft}
    assert sglang.configs == [(model, True), (draft, True)]


@pytest.mark.parametrize("case, problem", [
    ("missing", "{path} is not a directory in this container"),
    ("no config", "cannot read {path}/config.json: No such file or directory"),
    ("not json", "{path}/config.json is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
                 "(char 1)"),
    ("no architectures", "{path}/config.json names no architectures (SGLang picks the model class by its first)"),
    ("empty architectures", "{path}/config.json names no architectures (SGLang picks the model class by its first)"),
])
def test_a_missing_or_unreadable_model_directory_is_refused_naming_the_setting(monkeypatch, capsys, sglang,
                                                                               tmp_path, case, problem):
    configs = {"no config": None, "not json": "{", "no architectures": "{}", "empty architectures":
               '{"architectures": []}'}
    path = str(tmp_path / "gone") if case == "missing" else model_dir(tmp_path, "m", configs[case])
    rc, out, err = validate(monkeypatch, capsys, ["--model-path", path], "--check-model")
    message = "model_path (--model-path): " + problem.format(path=path)
    assert (rc, out["error"]) == (2, message) and "model" not in out
    assert sglang.configs == [] and err.endswith(message + "\n")


def test_the_draft_model_is_checked_too(monkeypatch, capsys, sglang, tmp_path):
    argv = ["--model-path", model_dir(tmp_path, "m"), "--speculative-draft-model-path", str(tmp_path / "no-draft")]
    rc, out, _err = validate(monkeypatch, capsys, argv, "--check-model")
    assert rc == 2 and out["error"] == ("speculative_draft_model_path (--speculative-draft-model-path): %s is not a "
                                        "directory in this container" % (tmp_path / "no-draft"))


def test_a_config_sglangs_loader_refuses_is_refused_with_its_first_line(monkeypatch, capsys, sglang, tmp_path):
    sglang.config_error = ValueError("model type `nope` is not recognised\n\nYou can update Transformers ...")
    path = model_dir(tmp_path, "m")
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", path], "--check-model")
    assert rc == 2 and out["error"] == ("model_path (--model-path): SGLang cannot load the model config in %s: "
                                        "ValueError: model type `nope` is not recognised" % path)


def test_without_the_model_check_a_missing_model_passes(monkeypatch, capsys, sglang, tmp_path):
    rc, _out, _err = validate(monkeypatch, capsys, ["--model-path", str(tmp_path / "gone")])
    assert rc == 0 and sglang.configs == []


def test_the_env_file_reaches_sglangs_checks(monkeypatch, capsys, sglang, tmp_path):
    monkeypatch.setattr(os, "environ", dict(os.environ))  # the helper sets the file's variables in its own env
    env = tmp_path / "nccl.env"
    env.write_text("NCCL_PROTO=LL\nSGLANG_PROBE=from-the-file\n")
    assert validate(monkeypatch, capsys, ARGV, "--env-file", str(env))[0] == 0
    assert sglang.seen_env == ["from-the-file", "from-the-file"] and os.environ["NCCL_PROTO"] == "LL"
    assert validate(monkeypatch, capsys, ARGV, "--env-file", str(tmp_path / "none-yet"))[0] == 0


# --------------------------------------------------------------------------------------------- the listen host
# TEST-NET-1 (RFC 5737): never an address of this machine, as of no container, so its bind always fails.
UNASSIGNED = "192.0.2.1"


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_a_host_this_machine_has_passes_the_listen_check(monkeypatch, capsys, sglang, host):
    rc, out, err = validate(monkeypatch, capsys, ARGV + ["--host", host])
    assert (rc, err, out["ok"], out["error"]) == (0, "", True, None)
    assert out["listen"] == {"host": host, "addresses": [host], "ok": True, "error": None}


def test_an_address_this_container_lacks_is_refused_after_sglangs_checks_pass(monkeypatch, capsys, sglang):
    rc, out, err = validate(monkeypatch, capsys, ARGV + ["--host=" + UNASSIGNED])
    problem = "cannot bind 192.0.2.1 (port 0) in this container: [Errno 99] Cannot assign requested address"
    assert (rc, out["ok"], out["checks"]) == (2, False, ALL_CHECKS)  # SGLang accepts it: only the bind refuses
    assert out["listen"] == {"host": UNASSIGNED, "addresses": [], "ok": False, "error": problem}
    assert out["error"] == "--host 192.0.2.1: " + problem
    assert err == "gpuserve-sglang validate-args: the server could not listen: %s\n" % problem


def test_sglangs_own_refusal_keeps_its_message_beside_a_failed_listen_check(monkeypatch, capsys, sglang):
    argv = ["--model-path", "/m", "--host", UNASSIGNED, "--speculative-algorithm", "EAGLE9"]
    rc, out, err = validate(monkeypatch, capsys, argv)
    assert rc == 2 and out["error"].startswith("speculative_algorithm (--speculative-algorithm) is 'EAGLE9'")
    assert out["listen"]["ok"] is False and err.count("\n") == 2  # both said


def test_an_sglang_that_does_not_import_still_gets_the_listen_check(monkeypatch, capsys):
    FakeSGLang.unimportable(monkeypatch)
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", "/m", "--host", UNASSIGNED])
    assert rc == 3 and out["error"].startswith("cannot import sglang") and out["listen"]["ok"] is False


def test_unreadable_arguments_have_no_listen_check(monkeypatch, capsys, sglang):
    rc, out, _err = run_json(monkeypatch, capsys, "validate-args", "--argv-json", "[1]")
    assert rc == 2 and "listen" not in out


@pytest.mark.parametrize("argv, host", [
    ([], "127.0.0.1"),  # SGLang's default
    (["--host", "10.0.0.5", "--port", "30000"], "10.0.0.5"),
    (["--host=::1"], "::1"),
    (["--host=a=b"], "a=b"),  # argparse splits at the first '=' only
    (["--host", "a", "--host", "b"], "b"),  # argparse keeps the last
    (["--host"], "127.0.0.1"),  # no value: SGLang's parser refuses it
    (["--hostname", "x", "--model-path", "--host"], "127.0.0.1"),
])
def test_the_listen_host_is_the_argvs_last_host_else_sglangs_default(argv, host):
    assert _helper_validate._listen_host(argv) == host


# --------------------------------------------------------------------------------------------- the draft

EAGLE3_HEAD = '{"architectures": ["LlamaForCausalLMEagle3"]}'
EAGLE_HEAD = '{"architectures": ["LlamaForCausalLMEagle"]}'


def test_eagle_with_an_eagle3_draft_is_refused_naming_both_after_sglangs_checks_pass(
        monkeypatch, capsys, sglang, tmp_path):
    draft = model_dir(tmp_path, "draft", EAGLE3_HEAD)
    argv = ["--model-path", "/m", "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", draft]
    rc, out, err = validate(monkeypatch, capsys, argv)
    problem = _speculative.draft_problem("EAGLE", ["LlamaForCausalLMEagle3"], draft)
    assert problem.startswith("speculative_algorithm is EAGLE, but the draft %s is an EAGLE-3 head "
                              "(LlamaForCausalLMEagle3): SGLang serves that pair without an error at accept length "
                              "1.00" % draft)
    assert (rc, out["ok"], out["error"], out["checks"]) == (2, False, problem, ALL_CHECKS)  # SGLang accepts it
    assert out["draft"] == {"algorithm": "EAGLE", "path": draft, "architectures": ["LlamaForCausalLMEagle3"],
                            "ok": False, "error": problem, "unread": None}
    assert err == "gpuserve-sglang validate-args: the draft does not fit: %s\n" % problem


def test_eagle3_with_an_eagle_draft_is_refused_by_the_alias_flag_too(monkeypatch, capsys, sglang, tmp_path):
    draft = model_dir(tmp_path, "draft", EAGLE_HEAD)
    argv = ["--model-path", "/m", "--speculative-algorithm=EAGLE3", "--speculative-draft-model=" + draft]
    rc, out, _err = validate(monkeypatch, capsys, argv)
    assert rc == 2 and out["draft"]["ok"] is False
    assert out["error"] == _speculative.draft_problem("EAGLE3", ["LlamaForCausalLMEagle"], draft)


def test_a_draft_config_in_utf_16_is_read_as_json_reads_it(monkeypatch, capsys, sglang, tmp_path):
    draft = model_dir(tmp_path, "draft", None)
    with open(os.path.join(draft, "config.json"), "wb") as handle:
        handle.write('{"architectures": ["LlamaForCausalLMEagle3"], "name": "é"}'.encode("utf-16"))
    rc, out, _err = validate(monkeypatch, capsys, ARGV + ["--speculative-draft-model-path", draft])
    assert (rc, out["draft"]["architectures"]) == (0, ["LlamaForCausalLMEagle3"])


def test_a_draft_that_fits_its_algorithm_passes(monkeypatch, capsys, sglang, tmp_path):
    draft = model_dir(tmp_path, "draft", EAGLE3_HEAD)
    argv = ARGV + ["--speculative-draft-model-path", draft]
    rc, out, err = validate(monkeypatch, capsys, argv)
    assert (rc, err, out["error"]) == (0, "", None)
    assert out["draft"] == {"algorithm": "EAGLE3", "path": draft, "architectures": ["LlamaForCausalLMEagle3"],
                            "ok": True, "error": None, "unread": None}


@pytest.mark.parametrize("config, unread", [
    (None, "cannot read {path}/config.json: No such file or directory"),
    ("{", "cannot read {path}/config.json: Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1)"),
    ("[]", "{path}/config.json names no architectures"),
    ('{"architectures": "LlamaForCausalLMEagle3"}', "{path}/config.json names no architectures"),  # a name, no list
    ('{"architectures": ["X", ""]}', "{path}/config.json names no architectures"),
])
def test_a_draft_config_that_cannot_be_read_here_is_not_judged(monkeypatch, capsys, sglang, tmp_path, config,
                                                               unread):
    # a hub id, or a directory that is not there with the model check off: the model check refuses what it needs
    draft = model_dir(tmp_path, "draft", config)
    rc, out, _err = validate(monkeypatch, capsys, ARGV + ["--speculative-draft-model-path", draft])
    assert (rc, out["draft"]["ok"], out["draft"]["architectures"]) == (0, True, None)
    assert out["draft"]["unread"] == unread.format(path=draft)


@pytest.mark.parametrize("argv", [
    ["--model-path", "/m", "--speculative-draft-model-path", "/d"],  # no algorithm: SGLang serves no draft
    ["--model-path", "/m", "--speculative-algorithm", "EAGLE"],  # no draft to read
])
def test_without_an_algorithm_and_a_draft_there_is_no_draft_check(monkeypatch, capsys, sglang, argv):
    rc, out, _err = validate(monkeypatch, capsys, argv)
    assert rc == 0 and "draft" not in out


def test_a_cached_pass_still_reads_the_draft(monkeypatch, capsys, sglang, world, tmp_path):
    draft = model_dir(tmp_path, "draft", EAGLE3_HEAD)
    argv = ["--model-path", "/m", "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", draft]
    rc, first, _err = validate(monkeypatch, capsys, argv, *world.opts)
    assert (rc, first["draft"]["ok"]) == (2, False)
    entry, = json.loads(world.record.read_text())["passed"]  # SGLang's checks passed: kept for the next run
    FakeSGLang.unimportable(monkeypatch)
    rc, again, _err = validate(monkeypatch, capsys, argv, *world.opts)
    assert (rc, again["cached_since"], again["draft"]) == (2, entry["proven_at"], first["draft"])
    with open(os.path.join(draft, "config.json"), "w") as handle:
        handle.write(EAGLE_HEAD)  # the draft changed under the same argv: read again, not taken from the record
    rc, fixed, _err = validate(monkeypatch, capsys, argv, *world.opts)
    assert (rc, fixed["draft"]["ok"], fixed["draft"]["architectures"]) == (0, True, ["LlamaForCausalLMEagle"])


@pytest.mark.parametrize("argv, value", [
    ([], None),
    (["--speculative-draft-model-path", "/a", "--speculative-draft-model", "/b"], "/b"),  # the last, either name
    (["--speculative-draft-model=/a=b"], "/a=b"),
    (["--speculative-draft-model-path"], None),  # no value: SGLang's parser refuses it
    (["--speculative-draft-model-paths", "/x", "--speculative-draft-model-pathx=/y"], None),
])
def test_the_draft_path_is_the_argvs_last_draft_flag(argv, value):
    assert _helper_validate._argv_value(argv, _helper_validate.DRAFT_FLAGS) == value


class FakeSocket:
    """Records what was bound; refuses the addresses in `refuse`."""

    def __init__(self, bound, refuse, family, kind):
        self.bound, self.refuse, self.family, self.closed = bound, refuse, family, False
        assert kind == socket.SOCK_STREAM

    def bind(self, address):
        if address[0] in self.refuse:
            raise OSError(99, "Cannot assign requested address")
        self.bound.append((self.family, address))

    def close(self):
        self.closed = True


def fake_sockets(refuse=(), missing_families=()):
    bound = []

    def make(family, kind, _proto):
        if family in missing_families:
            raise OSError(97, "Address family not supported by protocol")
        make.made.append(FakeSocket(bound, refuse, family, kind))
        return make.made[-1]
    make.made = []
    return bound, make


def resolver(answers):
    def resolve(host, port, family, kind, proto, flags):
        assert (port, family, kind, flags) == (0, socket.AF_UNSPEC, socket.SOCK_STREAM, socket.AI_PASSIVE)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(fam, socket.SOCK_STREAM, 6, "", addr) for fam, addr in answers[host]]
    return resolve


V4, V6 = socket.AF_INET, socket.AF_INET6


def test_a_name_that_does_not_resolve_here_fails():
    out = _helper_validate._listen_check("sglang-head.invalid", resolve=resolver({}))
    assert out == {"host": "sglang-head.invalid", "addresses": [], "ok": False,
                   "error": "'sglang-head.invalid' does not resolve in this container: Name or service not known"}


def test_a_name_the_resolver_cannot_encode_fails_with_the_reason():
    def resolve(*_args):
        raise UnicodeError("encoding with 'idna' codec failed (UnicodeError: label too long)")
    out = _helper_validate._listen_check("x" * 64 + ".lab", resolve=resolve)
    assert out["ok"] is False and out["error"] == (
        "'%s' does not resolve in this container: encoding with 'idna' codec failed (UnicodeError: label too long)"
        % ("x" * 64 + ".lab"))


def test_a_name_binds_every_address_it_resolves_to_each_in_its_family():
    bound, make = fake_sockets()
    # the repeat comes before another address: it is skipped, the rest still bound
    answers = {"head": [(V4, ("10.66.0.104", 0)), (V4, ("10.66.0.104", 0)), (V6, ("fd00::104", 0, 0, 0))]}
    out = _helper_validate._listen_check("head", resolve=resolver(answers), make_socket=make)
    assert out == {"host": "head", "addresses": ["10.66.0.104", "fd00::104"], "ok": True, "error": None}
    assert bound == [(V4, ("10.66.0.104", 0)), (V6, ("fd00::104", 0, 0, 0))]  # once each, port 0, v6 scope kept


def test_one_address_of_a_name_that_cannot_be_bound_fails_it():
    bound, make = fake_sockets(refuse=("192.0.2.1",))
    answers = {"head": [(V4, ("127.0.0.1", 0)), (V4, ("192.0.2.1", 0))]}
    out = _helper_validate._listen_check("head", resolve=resolver(answers), make_socket=make)
    assert (out["ok"], out["addresses"]) == (False, ["127.0.0.1"])
    assert out["error"] == "cannot bind 192.0.2.1 (port 0) in this container: [Errno 99] Cannot assign requested address"
    assert [sock.closed for sock in make.made] == [True, True]  # the refused one too


def test_a_family_the_kernel_lacks_is_skipped_but_something_must_bind():
    bound, make = fake_sockets(missing_families=(V6,))
    # the lacking family first: the next address is still tried
    out = _helper_validate._listen_check("", resolve=resolver({None: [(V6, ("::", 0, 0, 0)), (V4, ("0.0.0.0", 0))]}),
                                         make_socket=make)
    assert (out["ok"], out["addresses"], bound) == (True, ["0.0.0.0"], [(V4, ("0.0.0.0", 0))])
    out = _helper_validate._listen_check("::1", resolve=resolver({"::1": [(V6, ("::1", 0, 0, 0))]}), make_socket=make)
    assert out == {"host": "::1", "addresses": [], "ok": False,
                   "error": "'::1' resolves to no address this container can open a socket for"}


def test_literal_addresses_resolve_to_themselves_in_their_own_family():
    bound, make = fake_sockets()
    assert _helper_validate._listen_check("::1", make_socket=make)["ok"] and bound[-1][0] == V6
    assert _helper_validate._listen_check("127.0.0.1", make_socket=make)["ok"] and bound[-1] == (V4, ("127.0.0.1", 0))


def test_the_real_bind_of_an_unassigned_address_fails_and_of_loopback_passes():
    assert _helper_validate._listen_check(UNASSIGNED)["ok"] is False
    assert _helper_validate._listen_check("127.0.0.1")["ok"] is True and _helper_validate._listen_check("0.0.0.0")["ok"] is True


# ------------------------------------------------------------------------------------------------- the record

@pytest.fixture
def world(tmp_path, monkeypatch):
    """A clean SGLang tree, a venv whose python answers the install probe from probe.json, a record path."""
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if not k.upper().startswith(("SGLANG_", "SGL_"))})
    src = tmp_path / "src"
    git, _head = commit_tree(src, {"README": "sglang\n"})
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    probe = tmp_path / "probe.json"
    probe.write_text('{"python": "3.11.2", "dists": [["sglang", "0.5.23"]]}\n')
    (venv / "bin" / "python").write_text("#!/bin/sh\ncat %s\n" % probe)
    (venv / "bin" / "python").chmod(0o755)
    models = tmp_path / "models"
    models.mkdir()
    w = types.SimpleNamespace(src=src, venv=venv, probe=probe, git=git, record=tmp_path / "state" / "args.json",
                              model=model_dir(models, "model"))
    w.opts = ["--record", str(w.record), "--src", str(src), "--venv", str(venv)]
    return w


def test_a_passed_check_is_recorded_and_the_same_inputs_never_import_sglang_again(
        monkeypatch, capsys, sglang, world):
    rc, first, _err = validate(monkeypatch, capsys, ARGV, *world.opts)
    assert rc == 0 and first["cached_since"] is None and len(sglang.parsed) == 2
    entry, = json.loads(world.record.read_text())["passed"]
    assert len(entry["key"]) == 64 and entry["proven_at"] and entry["checks"] == ALL_CHECKS
    FakeSGLang.unimportable(monkeypatch)
    rc, again, err = validate(monkeypatch, capsys, ARGV, *world.opts)
    assert (rc, err) == (0, "")
    assert again == dict(first, cached_since=entry["proven_at"])  # the same answer, SGLang not imported
    assert os.listdir(str(world.record.parent)) == ["args.json"]  # no temporary file left


def test_a_cached_pass_still_binds_and_a_failed_bind_keeps_sglangs_record(monkeypatch, capsys, sglang, world):
    argv = ARGV + ["--host", UNASSIGNED]
    rc, first, _err = validate(monkeypatch, capsys, argv, *world.opts)
    assert (rc, first["listen"]["ok"]) == (2, False)
    entry, = json.loads(world.record.read_text())["passed"]  # SGLang's checks passed: kept for the next run
    FakeSGLang.unimportable(monkeypatch)
    rc, again, _err = validate(monkeypatch, capsys, argv, *world.opts)
    assert (rc, again["cached_since"], again["listen"]["ok"]) == (2, entry["proven_at"], False)
    assert json.loads(world.record.read_text())["passed"] == [entry]


def test_a_record_that_cannot_be_written_is_a_note_not_a_failure(monkeypatch, capsys, sglang, world):
    world.record.parent.parent.mkdir(exist_ok=True)
    world.record.parent.write_text("a file where the record's directory should be")
    rc, out, _err = validate(monkeypatch, capsys, ARGV, *world.opts)
    assert rc == 0 and out["record"].startswith("not recorded: [Errno 17] File exists: ")
    assert validate(monkeypatch, capsys, ARGV + ["--port", "0"], *world.opts)[0] == 2  # nothing to remove


def change(world, monkeypatch, tmp_path, what):
    """Changes one input of the argument check; returns the argv to check."""
    argv = list(ARGV)
    if what == "argv":
        argv[argv.index("--tp-size") + 1] = "4"
    elif what == "commit":
        (world.src / "README").write_text("two\n")
        subprocess.run(world.git + ["commit", "-q", "-am", "two"], check=True)
    elif what == "pyvenv.cfg":
        (world.venv / "pyvenv.cfg").write_text("home = /opt/python3.12/bin\n")
    elif what == "a distribution":
        world.probe.write_text('{"python": "3.11.2", "dists": [["sglang", "0.5.23"], ["torch", "2.14.1"]]}\n')
    elif what == "the python":
        world.probe.write_text('{"python": "3.11.9", "dists": [["sglang", "0.5.23"]]}\n')
    elif what == "the helper":
        copy = tmp_path / "gpuserve-sglang"
        copy.write_text(open(_helper_validate.__file__).read() + "\n# a newer helper\n")
        monkeypatch.setattr(_helper_validate, "__file__", str(copy))
    elif what == "an SGLANG_ variable":
        os.environ["SGLANG_ENABLE_TORCH_COMPILE"] = "1"
    elif what == "an SGL_ variable":
        os.environ["SGL_CHUNKED_PREFIX_CACHE_THRESHOLD"] = "1"
    else:
        raise AssertionError(what)
    return argv


INPUTS = ["argv", "commit", "pyvenv.cfg", "a distribution", "the python", "the helper", "an SGLANG_ variable",
          "an SGL_ variable"]


@pytest.mark.parametrize("what", INPUTS)
def test_any_single_changed_input_runs_sglang_again(monkeypatch, capsys, sglang, world, tmp_path, what):
    assert validate(monkeypatch, capsys, ARGV, *world.opts)[0] == 0
    argv = change(world, monkeypatch, tmp_path, what)
    rc, out, _err = validate(monkeypatch, capsys, argv, *world.opts)
    assert rc == 0 and out["cached_since"] is None and len(sglang.parsed) == 4  # SGLang ran again
    assert len(json.loads(world.record.read_text())["passed"]) == 2  # both sets are kept


@pytest.mark.parametrize("what", ["config.json", "remote code added", "remote code changed", "model gone"])
def test_a_changed_model_directory_runs_the_check_again(monkeypatch, capsys, sglang, world, what):
    config, code = os.path.join(world.model, "config.json"), os.path.join(world.model, "configuration_x.py")
    if what == "remote code changed":
        with open(code, "w") as handle:
            handle.write("A = 1\n")
    argv = ["--model-path", world.model]
    for _run in range(2):  # the second is the record's
        assert validate(monkeypatch, capsys, argv, "--check-model", *world.opts)[0] == 0
    assert len(sglang.configs) == 1
    if what == "config.json":
        with open(config, "w") as handle:
            handle.write('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2}')
    elif what in ("remote code added", "remote code changed"):
        with open(code, "w") as handle:
            handle.write("A = 2\n")
    else:
        os.unlink(config)
    rc, out, _err = validate(monkeypatch, capsys, argv, "--check-model", *world.opts)
    assert out["cached_since"] is None
    if what == "model gone":
        assert rc == 2 and out["error"].startswith("model_path (--model-path): cannot read ")
        assert not world.record.exists()
    else:
        assert rc == 0 and len(sglang.configs) == 2


def test_checking_the_models_or_not_are_two_answers(monkeypatch, capsys, sglang, world):
    argv = ["--model-path", world.model]
    assert validate(monkeypatch, capsys, argv, *world.opts)[0] == 0
    rc, out, _err = validate(monkeypatch, capsys, argv, "--check-model", *world.opts)
    assert rc == 0 and out["cached_since"] is None and out["checks"][-1] == "model config"


@pytest.mark.parametrize("dirt", ["untracked file", "modified file"])
def test_a_dirty_tree_runs_sglang_every_time(monkeypatch, capsys, sglang, world, dirt):
    (world.src / ("patch.py" if dirt == "untracked file" else "README")).write_text("x = 1\n")
    for runs in (2, 4):
        rc, out, _err = validate(monkeypatch, capsys, ARGV, *world.opts)
        assert rc == 0 and out["cached_since"] is None and len(sglang.parsed) == runs
    assert not world.record.exists()


def test_a_venv_whose_python_does_not_answer_runs_sglang_every_time(monkeypatch, capsys, sglang, world):
    (world.venv / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")
    for runs in (2, 4):
        assert validate(monkeypatch, capsys, ARGV, *world.opts)[1]["cached_since"] is None
        assert len(sglang.parsed) == runs


@pytest.mark.parametrize("failure", ["refused", "unimportable", "unreadable"])
def test_a_failed_check_removes_the_record(monkeypatch, capsys, sglang, world, failure):
    assert validate(monkeypatch, capsys, ARGV, *world.opts)[0] == 0 and world.record.exists()
    if failure == "refused":
        rc = validate(monkeypatch, capsys, ARGV + ["--port", "70000"], *world.opts)[0]
    elif failure == "unimportable":
        FakeSGLang.unimportable(monkeypatch)
        rc = validate(monkeypatch, capsys, ARGV + ["--port", "8000"], *world.opts)[0]
    else:
        rc = run_json(monkeypatch, capsys, "validate-args", "--argv-json", "[1]", *world.opts)[0]
    assert rc in (2, 3) and not world.record.exists()
    # the set that passed before is checked by SGLang again
    sys.modules.pop("sglang") if sys.modules.get("sglang") is None else None
    FakeSGLang(monkeypatch)
    assert validate(monkeypatch, capsys, ARGV, *world.opts)[1]["cached_since"] is None


def test_read_only_uses_the_record_and_never_writes_or_removes_it(monkeypatch, capsys, sglang, world):
    read_only = world.opts + ["--record-read-only"]
    assert validate(monkeypatch, capsys, ARGV, *read_only)[0] == 0 and not world.record.exists()
    assert validate(monkeypatch, capsys, ARGV, *world.opts)[0] == 0
    before = world.record.read_text()
    rc, out, _err = validate(monkeypatch, capsys, ARGV, *read_only)
    assert rc == 0 and out["cached_since"] and len(sglang.parsed) == 4
    assert validate(monkeypatch, capsys, ARGV + ["--port", "0"], *read_only)[0] == 2
    assert world.record.read_text() == before


def test_the_record_keeps_the_last_16_sets(monkeypatch, capsys, sglang, world):
    for port in range(8000, 8018):
        assert validate(monkeypatch, capsys, ARGV + ["--port", str(port)], *world.opts)[0] == 0
    passed = json.loads(world.record.read_text())["passed"]
    assert len(passed) == 16
    assert validate(monkeypatch, capsys, ARGV + ["--port", "8017"], *world.opts)[1]["cached_since"]
    assert validate(monkeypatch, capsys, ARGV + ["--port", "8001"], *world.opts)[1]["cached_since"] is None


@pytest.mark.parametrize("content", ["{", "[]", '{"passed": "x"}', '{"passed": [1, {"no": "key"}]}'])
def test_an_unreadable_record_is_no_record(monkeypatch, capsys, sglang, world, content):
    world.record.parent.mkdir()
    world.record.write_text(content)
    rc, out, _err = validate(monkeypatch, capsys, ARGV, *world.opts)
    assert rc == 0 and out["cached_since"] is None
    assert len(json.loads(world.record.read_text())["passed"]) == 1


def test_a_record_needs_the_tree(monkeypatch, capsys, sglang):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "validate-args", "--argv-json", "[]", "--record", "/r"])
    with pytest.raises(SystemExit) as exc:
        _helper_cli.main()
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().endswith(
        "error: --record needs --src (the SGLang tree the install fingerprint reads)")


@pytest.mark.foreign_python  # the helper in a process of its own, as in the container (pytest.ini)
def test_the_record_holds_across_processes_with_only_the_installed_package(tmp_path):
    """What the container has: the package under its lib folder and the launcher (no ansible), a venv whose python
    finds an SGLang. The second run finds an SGLang that cannot even be imported, and passes from the record; a
    changed argv then has to import it, and fails."""
    helper_file = install(tmp_path / "installed")
    site = tmp_path / "site"
    for name, text in {"sglang/__init__.py": '__version__ = "0.5.23"\n', "sglang/srt/__init__.py": "",
                       "sglang/srt/server_args.py": FAKE_SERVER_ARGS}.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text('#!/bin/sh\nPYTHONPATH=%s exec %s -S "$@"\n' % (site, sys.executable))
    python.chmod(0o755)
    src = tmp_path / "src"
    git = ["git", "-C", str(src), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    src.mkdir()
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "pin"], check=True)

    def check(argv):
        out = subprocess.run([str(python), helper_file, "validate-args", "--argv-json", json.dumps(argv), "--record",
                              str(tmp_path / "cache" / "args.json"), "--src", str(src), "--venv", str(venv)],
                             capture_output=True, text=True, check=False)
        return out.returncode, json.loads(out.stdout)

    rc, first = check(["--model-path", "/m", "--tp-size", "2"])
    assert rc == 0 and first["cached_since"] is None and first["checks"][-1] == "SGLang's start checks for any model"
    (site / "sglang" / "__init__.py").write_text("raise ImportError('this SGLang is broken')\n")
    rc, again = check(["--model-path", "/m", "--tp-size", "2"])
    assert rc == 0 and again["cached_since"] and again["checks"] == first["checks"]
    rc, changed = check(["--model-path", "/m", "--tp-size", "4"])
    assert rc == 3 and changed["error"] == "cannot import sglang.srt.server_args: ImportError: this SGLang is broken"
    assert not (tmp_path / "cache" / "args.json").exists()


FAKE_SERVER_ARGS = '''
import argparse


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path")
        parser.add_argument("--tp-size", type=int)


class Record(argparse.Namespace):
    def resolve_once(self):
        pass


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve", allow_abbrev=False)
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv, namespace=Record())
'''


# ------------------------------------------------------------------------------ the record's key and its entries

def test_the_key_is_the_inputs_named_and_sorted(monkeypatch, capsys, sglang, world):
    """The key is sha256 of exactly these inputs: the install as _install_fingerprint takes it (for this module), the
    argv, the model check, the SGLANG_/SGL_ variables, the checks' own file (_helper_validate.py). Computed here
    from the parts."""
    import hashlib
    from ansible_collections.gpuserve.sglang.plugins.module_utils import _git_tree, _install_fingerprint as fp
    os.environ.update(SGLANG_A="1", SGL_B="2", sglang_c="lower case is not SGLang's")
    seen = []
    real_source = _helper_validate._git_source
    monkeypatch.setattr(_helper_validate, "_git_source", lambda src: seen.append(("tree", src)) or real_source(src))
    opts = types.SimpleNamespace(src=str(world.src), venv=str(world.venv), check_model=True)
    key = _helper_validate._args_key(opts, ARGV)
    assert seen == [("tree", str(world.src))]
    git = subprocess.run(_git_tree.status_argv(str(world.src)), capture_output=True, text=True, check=True)
    install = fp.install_fingerprint(_git_tree.parse_status(0, git.stdout, git.stderr), 0, world.probe.read_text(),
                                     fp.pyvenv_cfg_digest(str(world.venv)), "sglang.srt.server_args")
    with open(_helper_validate.__file__, "rb") as handle:
        own = hashlib.sha256(handle.read()).hexdigest()
    inputs = {"install": install, "argv": ARGV, "check_model": True, "env": {"SGLANG_A": "1", "SGL_B": "2"},
              "helper": own}
    assert key == hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def test_the_record_holds_each_pass_with_its_answer(monkeypatch, capsys, sglang, world):
    monkeypatch.setattr(_helper_validate, "time", types.SimpleNamespace(strftime=__import__("time").strftime,
                                                                        gmtime=lambda: __import__("time").gmtime(0)))
    sglang.say = "WARNING: --enable-foo is deprecated"
    rc, first, _err = validate(monkeypatch, capsys, ARGV, *world.opts)
    assert rc == 0 and first["warnings"] == ["WARNING: --enable-foo is deprecated"]
    record = json.loads(world.record.read_text())
    assert record == {"schema": 1, "module": "sglang.srt.server_args", "passed": [{
        "key": record["passed"][0]["key"], "proven_at": "1970-01-01T00:00:00Z", "sglang_version": "0.5.23",
        "warnings": ["WARNING: --enable-foo is deprecated"], "checks": ALL_CHECKS, "model_dirs": {},
        "model_files": {}}]}
    rc, again, _err = validate(monkeypatch, capsys, ARGV, *world.opts)
    assert again == dict(first, cached_since="1970-01-01T00:00:00Z")  # the warnings too


def test_a_cached_model_check_answers_with_its_model_directories(monkeypatch, capsys, sglang, world):
    argv = ["--model-path", world.model]
    first = validate(monkeypatch, capsys, argv, "--check-model", *world.opts)[1]
    again = validate(monkeypatch, capsys, argv, "--check-model", *world.opts)[1]
    assert again["cached_since"] and again["model"] == first["model"] == {"model_path": world.model}
    entry, = json.loads(world.record.read_text())["passed"]
    assert entry["model_dirs"] == {"model_path": world.model}
    assert entry["model_files"] == {os.path.join(world.model, "config.json"): __import__("hashlib").sha256(
        open(os.path.join(world.model, "config.json"), "rb").read()).hexdigest()}


def test_files_of_the_model_beside_its_config_and_code_do_not_count(monkeypatch, capsys, sglang, world):
    """The weights are never read: a changed shard or tokenizer file does not run the check again."""
    argv = ["--model-path", world.model]
    assert validate(monkeypatch, capsys, argv, "--check-model", *world.opts)[0] == 0
    with open(os.path.join(world.model, "model-00001-of-00002.safetensors"), "w") as handle:
        handle.write("weights")
    assert validate(monkeypatch, capsys, argv, "--check-model", *world.opts)[1]["cached_since"]


def test_the_venv_defaults_to_the_python_the_helper_runs_under(monkeypatch, capsys, sglang, world):
    monkeypatch.setattr(sys, "prefix", str(world.venv))
    opts = [o for i, o in enumerate(world.opts) if o != "--venv" and world.opts[i - 1] != "--venv"]
    assert validate(monkeypatch, capsys, ARGV, *opts)[0] == 0 and world.record.exists()
    assert validate(monkeypatch, capsys, ARGV, *opts)[1]["cached_since"]


def test_the_install_and_the_tree_are_read_by_the_collections_own_readers(monkeypatch, capsys, sglang, world):
    """The record's key takes the install from _install_fingerprint and the tree from _helper_state._git_source
    (_git_tree): the package's files, imported by their names, as sglang_install reads the same facts."""
    from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_state, _install_fingerprint
    assert _helper_validate._install_fingerprint is _install_fingerprint
    assert _helper_validate._git_source is _helper_state._git_source
    seen = []

    def recorded(real):
        return lambda *args: seen.append(real.__name__) or real(*args)

    monkeypatch.setattr(_helper_validate, "_install_fingerprint", types.SimpleNamespace(**{
        name: recorded(getattr(_install_fingerprint, name))
        for name in ("probe_argv", "install_fingerprint", "pyvenv_cfg_digest")}))
    real_source = _helper_state._git_source
    monkeypatch.setattr(_helper_validate, "_git_source", lambda src: seen.append("_git_source") or real_source(src))
    assert validate(monkeypatch, capsys, ARGV, *world.opts)[0] == 0
    assert seen == ["_git_source", "probe_argv", "pyvenv_cfg_digest", "install_fingerprint"]


def test_a_record_path_without_a_directory_is_written_where_it_says(monkeypatch, capsys, sglang, world, tmp_path):
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    opts = ["--record", "args.json"] + world.opts[2:]
    assert validate(monkeypatch, capsys, ARGV, *opts)[0] == 0
    assert os.listdir(str(here)) == ["args.json"]


@pytest.mark.parametrize("path, kept", [("/m", True), ("dummy", False), ("Dummy", False), ("none", False),
                                        ("NONE", False), ("", False), (None, False), (7, False)])
def test_model_dirs_are_the_paths_sglang_reads_a_config_from(path, kept):
    record = types.SimpleNamespace(model_path=path)  # no speculative_draft_model_path: an SGLang without drafts
    assert _helper_validate._model_dirs(record) == ({"model_path": path} if kept else {})


def test_a_record_without_trust_remote_code_loads_without_it(monkeypatch, sglang, tmp_path):
    path = model_dir(tmp_path, "m")
    assert _helper_validate._check_model(types.SimpleNamespace(model_path=path), {})[0] is None
    assert sglang.configs == [(path, False)]


def test_without_sglangs_loader_every_directory_is_still_checked(monkeypatch, capsys, sglang, tmp_path):
    del sys.modules["sglang.srt.utils.hf_transformers_utils"].get_config
    argv = ["--model-path", model_dir(tmp_path, "m"), "--speculative-draft-model-path", str(tmp_path / "gone")]
    rc, out, _err = validate(monkeypatch, capsys, argv, "--check-model")
    assert rc == 2 and out["error"].startswith("speculative_draft_model_path (--speculative-draft-model-path): ")


def test_a_loader_error_without_words_is_named_by_its_type(monkeypatch, capsys, sglang, tmp_path):
    sglang.config_error = OSError("")
    path = model_dir(tmp_path, "m")
    rc, out, _err = validate(monkeypatch, capsys, ["--model-path", path], "--check-model")
    assert rc == 2 and out["error"] == ("model_path (--model-path): SGLang cannot load the model config in %s: "
                                        "OSError: " % path)


@pytest.mark.parametrize("config, ok", [('[]', False), ('{"architectures": [""]}', False),
                                        ('{"architectures": [7]}', False), ('{"architectures": "X"}', False),
                                        ('{"architectures": ["X", "Y"]}', True)])
def test_a_config_names_its_architectures(tmp_path, config, ok):
    path = model_dir(tmp_path, "m", config)
    if ok:
        assert list(_helper_validate._model_files(path)) == [os.path.join(path, "config.json")]
    else:
        with pytest.raises(ValueError) as exc:
            _helper_validate._model_files(path)
        assert str(exc.value) == "%s/config.json names no architectures (SGLang picks the model class by its first)" % path


def test_a_model_directory_that_cannot_be_listed_or_whose_code_cannot_be_read(monkeypatch, tmp_path):
    path = model_dir(tmp_path, "m", code="A = 1\n")

    def refused(*_args, **_kw):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(_helper_validate.os, "listdir", refused)
    with pytest.raises(ValueError) as exc:
        _helper_validate._model_files(path)
    assert str(exc.value) == "cannot list %s: Permission denied" % path
    monkeypatch.undo()
    real_open = open
    monkeypatch.setattr(_helper_validate, "open", lambda name, *a, **kw: refused() if name.endswith(".py") else real_open(name, *a, **kw),
                        raising=False)
    with pytest.raises(ValueError) as exc:
        _helper_validate._model_files(path)
    assert str(exc.value) == "cannot read %s/configuration_x.py: Permission denied" % path
