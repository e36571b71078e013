"""The container helper gpuserve-sglang (plugins/module_utils/_helper_*.py, the package _helper_cli.PACKAGE) as its
tests run it: in-process through main() with its command line, with its outside world faked (its runner's subprocess.run, an
args file, a tiny SGLang, a stand-in nvidia-smi), or installed into a folder and run by its launcher under another
Python (the tests marked foreign_python)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import types

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UTILS = os.path.join(ROOT, "plugins", "module_utils")
# the dotted name of the package's files: the name the tests import them by, and mutmut keys its mutants by
PACKAGE = "ansible_collections.gpuserve.sglang.plugins.module_utils"


def run_main(monkeypatch, capsys, *argv):
    """main() with `gpuserve-sglang ARGV...`: (exit status, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang"] + list(argv))
    rc = _helper_cli.main()
    out = capsys.readouterr()
    return rc, out.out, out.err


def run_json(monkeypatch, capsys, *argv):
    rc, out, err = run_main(monkeypatch, capsys, *argv)
    return rc, json.loads(out), err


def install(folder, python=None):
    """The helper as the container has it: every PACKAGE file copied from this checkout under folder/lib, and the
    launcher at folder/gpuserve-sglang. Returns the launcher's path."""
    lib = os.path.join(str(folder), "lib")
    dest = os.path.join(lib, *_helper_cli.PACKAGE_DIR.split("/"))
    os.makedirs(dest)
    for name in _helper_cli.PACKAGE:
        shutil.copy(os.path.join(UTILS, name), os.path.join(dest, name))
    launcher = os.path.join(str(folder), "gpuserve-sglang")
    with open(launcher, "w", encoding="utf-8") as handle:
        handle.write(_helper_cli.launcher(python or sys.executable, lib))
    os.chmod(launcher, 0o755)
    return launcher


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


def fake_commands(monkeypatch, calls, outputs):
    """Every command the helper runs (_helper_run.run, its one runner) answered by fake_run(calls, outputs)."""
    from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_run
    monkeypatch.setattr(_helper_run, "subprocess", types.SimpleNamespace(run=fake_run(calls, outputs),
                                                                         DEVNULL=subprocess.DEVNULL))


def run_kwargs():
    """How _helper_run.run calls subprocess.run: no stdin, text that keeps any byte, the C locale, no exception."""
    return {"stdin": subprocess.DEVNULL, "capture_output": True, "errors": "surrogateescape",
            "env": dict(os.environ, LC_ALL="C"), "check": False}


def completed(stdout="", stderr="", returncode=0):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


def args_file(tmp_path, content):
    path = tmp_path / "args.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


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


# ------------------------------------------------------------------------------------------- a stand-in nvidia-smi

UUIDS = ["GPU-553de4da-dd63-7f3a-8989-418ea85fc9f7"] + [
    "GPU-00000000-0000-0000-0000-00000000000%d" % i for i in range(1, 8)]

FAKE_SMI = r'''#!%(python)s
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "log.jsonl"), "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "lc_all": os.environ.get("LC_ALL"),
                          "stdin": os.readlink("/proc/self/fd/0")}) + "\n")
with open(os.path.join(here, "scenario.json")) as f:
    scenario = json.load(f)
if any(a.startswith("--query-compute-apps") for a in sys.argv):
    sys.stdout.write(scenario.get("apps", ""))
    sys.exit(0)
answers = scenario["gpus"]
count_file = os.path.join(here, "count")
n = int(open(count_file).read()) if os.path.exists(count_file) else 0
open(count_file, "w").write(str(n + 1))
answer = answers[min(n, len(answers) - 1)]
if answer.get("sleep"):
    import time
    time.sleep(answer["sleep"])
sys.stdout.write(answer.get("out", ""))
sys.stderr.write(answer.get("err", ""))
sys.exit(answer.get("rc", 0))
'''


def gpus(used=None, count=8):
    """The gate's CSV for `count` H200s, used = {index: MiB}."""
    used = used or {}
    return "".join("%d, %s, %d, 143771\n" % (i, UUIDS[i], used.get(i, 0)) for i in range(count))


def stand_in_smi(folder):
    """A stand-in nvidia-smi in folder (a pathlib.Path) that answers from a scenario file, one answer per gate query,
    and logs the argv, LC_ALL and its stdin of every call: smi(answers, apps='') writes the scenario and returns its
    path; smi.log() reads the calls."""
    path = folder / "nvidia-smi"
    path.write_text(FAKE_SMI % {"python": sys.executable})
    path.chmod(0o755)

    def make(answers, apps=""):
        (folder / "scenario.json").write_text(json.dumps({"gpus": answers, "apps": apps}))
        return str(path)

    def log():
        if not (folder / "log.jsonl").exists():
            return []
        return [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]

    make.log = log
    return make
