"""The NCCL proof (roles/nccl_tuning/files/nccl_env_proof.py) in-process: its judgement with made-up snapshots,
and main() with a real 'spawn' child of this interpreter. test_nccl_hook.py runs the whole script under `env -i`
in a venv with the real hook."""
import importlib
import importlib.machinery
import json
import multiprocessing
import os
import platform
import re
import sys
import types
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "roles", "nccl_tuning", "files", "nccl_env_proof.py")
PURELIB = "/opt/sglang/venv/lib/python3.11/site-packages"
EXPECTED = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}


@pytest.fixture(scope="module")
def proof():
    # imported by its place in the collection: the spawned child imports it by that name to run _child, and it is
    # the name scripts/mutation's mutmut keys its mutants by
    mod = importlib.import_module("ansible_collections.gpuserve.sglang.roles.nccl_tuning.files.nccl_env_proof")
    assert os.path.realpath(mod.__file__) == os.path.realpath(SCRIPT)
    return mod


def snap(env=None, hook=True):
    return {"pid": 1, "env": dict(EXPECTED if env is None else env), "hook_imported_at_start": hook}


def judge(proof, **kw):
    args = dict(expected=EXPECTED, module="gpuserve_nccl_env", parent=snap(), child=snap(), exitcode=0,
                origin=PURELIB + "/gpuserve_nccl_env.py", purelib=PURELIB, shadowed=[])
    args.update(kw)
    return proof.judge(**args)


def test_everything_in_place_holds(proof):
    assert judge(proof) == ([], [])


def test_each_variable_is_checked_by_value_in_name_order(proof):
    problems, missing = judge(proof, child=snap({"NCCL_PROTO": "Simple"}))
    assert missing == ["NCCL_ALGO", "NCCL_PROTO='Simple' (expected 'LL')"]
    assert problems == ["missing in the spawned child: NCCL_ALGO, NCCL_PROTO='Simple' (expected 'LL')"]


def test_the_parent_environment_does_not_count(proof):
    # the parent may carry the values (a shell export) while the spawned worker does not: only the child counts
    problems, missing = judge(proof, parent=snap(), child=snap({}))
    assert missing == ["NCCL_ALGO", "NCCL_PROTO"] and len(problems) == 1


@pytest.mark.parametrize("kw, needle", [
    (dict(parent=snap(hook=False)), "hook module gpuserve_nccl_env was not imported at interpreter start"),
    (dict(child=snap(hook=False)), "hook module was not imported at the spawned child's start"),
    (dict(origin=None), "import gpuserve_nccl_env resolves to None, not " + PURELIB),
    (dict(origin="/usr/lib/python3/dist-packages/gpuserve_nccl_env.py"), "resolves to /usr/lib/python3/dist-packages"),
    (dict(shadowed=["/root/gpuserve_nccl_env.py"]), "shadowed by earlier sys.path entries: /root/gpuserve_nccl_env.py"),
    (dict(child=None, exitcode=-9), "spawned child did not report (exit code -9)"),
])
def test_each_broken_link_is_a_problem_of_its_own(proof, kw, needle):
    problems, missing = judge(proof, **kw)
    assert len(problems) == 1 and needle in problems[0], problems
    assert missing == []


# ---- main(), with a real spawned child. The "hook" is the stdlib `types` module: imported early by every interpreter,
# in the parent and in the spawned child, from the stdlib directory, which stands in for the venv's purelib.

@pytest.fixture
def run_main(proof, monkeypatch, capsys):
    stdlib = os.path.dirname(os.path.realpath(types.__file__))
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *a, **kw: stdlib if name == "purelib" else real_get_path(name, *a, **kw))
    monkeypatch.setenv("NCCL_PROTO", "LL")
    monkeypatch.setenv("NCCL_ALGO", "Ring")

    def run(*argv):
        monkeypatch.setattr("sys.argv", ["nccl_env_proof.py"] + list(argv))
        rc = proof.main()
        out, err = capsys.readouterr()
        return rc, (json.loads(out) if out.strip() else None), err
    run.stdlib = stdlib
    return run


def test_main_proves_a_spawned_child_and_reports_every_field(run_main):
    rc, res, err = run_main("--expect", json.dumps(EXPECTED), "--module", "types")
    assert (rc, err) == (0, ""), res["problems"]
    assert res["ok"] is True and res["problems"] == [] and res["missing"] == [] and res["shadowed"] == []
    assert res["start_method"] == "spawn" and res["purelib"] == run_main.stdlib
    assert os.path.dirname(res["hook"]) == run_main.stdlib
    assert res["child"]["env"] == EXPECTED and res["parent"]["env"] == EXPECTED
    assert res["child"]["pid"] != res["parent"]["pid"] and res["child"]["hook_imported_at_start"]
    assert res["parent"]["hook_file"] and res["child"]["executable"] == res["parent"]["executable"]
    assert "NCCL_PROTO" not in res["inherited_env_keys"] and "PATH" in res["inherited_env_keys"]
    assert res["python"].count(".") == 2


def test_main_fails_with_the_wrong_value_on_stdout_and_stderr(run_main, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    rc, res, err = run_main("--expect", json.dumps(EXPECTED), "--module", "types")
    assert rc == 1 and res["ok"] is False
    assert res["missing"] == ["NCCL_ALGO='Tree' (expected 'Ring')"]
    assert err == "NCCL env proof FAILED: missing in the spawned child: NCCL_ALGO='Tree' (expected 'Ring')\n"


def test_main_reports_a_hook_that_resolves_elsewhere(run_main):
    # json is a package: `import json` resolves to json/__init__.py, a directory below the "purelib"
    rc, res, err = run_main("--expect", json.dumps(EXPECTED), "--module", "json")
    assert rc == 1 and res["ok"] is False and res["hook"].endswith("/json/__init__.py")
    assert "import json resolves to %s, not %s" % (res["hook"], run_main.stdlib) in res["problems"]
    assert err.startswith("NCCL env proof FAILED: ") and "import json resolves to" in err


@pytest.mark.parametrize("expect", ['{"NCCL_PROTO": 1}', "[]", "not json", '{"A": true}'])
def test_main_refuses_an_expectation_that_is_not_an_object_of_strings(run_main, expect):
    rc, res, err = run_main("--expect", expect)
    assert (rc, res) == (2, None) and err == "--expect must be a JSON object of strings\n"


def test_main_defaults_to_the_gpuserve_hook_module(run_main):
    rc, res, err = run_main("--expect", json.dumps(EXPECTED))
    assert rc == 1 and res["hook"] is None
    assert "hook module gpuserve_nccl_env was not imported at interpreter start (the .pth did not run)" in res["problems"]
    assert "import gpuserve_nccl_env resolves to None" in err


def test_candidates_finds_module_files_and_packages(proof, tmp_path):
    (tmp_path / "hook.py").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert proof._candidates("hook", str(tmp_path)) == [str(tmp_path / "hook.py")]
    assert proof._candidates("pkg", str(tmp_path)) == [str(tmp_path / "pkg" / "__init__.py")]
    assert proof._candidates("other", str(tmp_path)) == []
    assert proof._candidates("hook", str(tmp_path / "missing")) == [] and proof._candidates("hook", "") == []


# ---- exact messages, the child's own report, and the fields main() prints

def test_each_problem_message_is_exact(proof):
    assert judge(proof, shadowed=["/root/gpuserve_nccl_env.py", "/tmp/gpuserve_nccl_env.py"])[0] == [
        "shadowed by earlier sys.path entries: /root/gpuserve_nccl_env.py, /tmp/gpuserve_nccl_env.py"]
    assert judge(proof, child=None, exitcode=3)[0] == ["spawned child did not report (exit code 3)"]
    assert judge(proof, child=snap(hook=False))[0] == ["hook module was not imported at the spawned child's start"]


def test_child_sends_its_snapshot_and_closes_the_pipe(proof, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "LL")
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    recv, send = multiprocessing.Pipe(duplex=False)
    proof._child(send, ["NCCL_ALGO", "NCCL_PROTO"], "types")
    assert recv.recv() == {"pid": os.getpid(), "executable": sys.executable, "env": {"NCCL_ALGO": None, "NCCL_PROTO": "LL"},
                           "hook_imported_at_start": True, "hook_file": types.__file__}
    assert recv.poll(5)
    with pytest.raises(EOFError):
        recv.recv()


def dies_before_reporting(*_args):
    os._exit(3)  # pylint: disable=protected-access


def test_main_reports_a_child_that_died_before_reporting(proof, run_main, monkeypatch):
    monkeypatch.setattr(proof, "_child", dies_before_reporting)
    rc, res, err = run_main("--expect", json.dumps(EXPECTED), "--module", "types")
    assert rc == 1 and res["child"] is None
    assert res["problems"] == ["spawned child did not report (exit code 3)"]
    assert err == "NCCL env proof FAILED: spawned child did not report (exit code 3)\n"


def test_main_uses_spawn_not_fork(run_main, monkeypatch):
    # a module imported at run time in the parent is in a forked child's sys.modules, never in a spawned one's
    hook = types.ModuleType("gpuserve_runtime_only")
    hook.__spec__ = importlib.machinery.ModuleSpec("gpuserve_runtime_only", None)
    monkeypatch.setitem(sys.modules, "gpuserve_runtime_only", hook)
    rc, res, err = run_main("--expect", json.dumps(EXPECTED), "--module", "gpuserve_runtime_only")
    assert rc == 1 and res["parent"]["hook_imported_at_start"] is True and res["child"]["hook_imported_at_start"] is False
    assert "hook module was not imported at the spawned child's start" in res["problems"]
    assert err == "NCCL env proof FAILED: " + "; ".join(res["problems"]) + "\n" and len(res["problems"]) == 2


def test_main_lists_copies_shadowing_the_hook(run_main, monkeypatch, tmp_path):
    # a module name nothing else imports: the spawned child (which inherits sys.path) never loads these copies
    cwd, first = tmp_path / "cwd", tmp_path / "first"
    for directory in (cwd, first):
        directory.mkdir()
        (directory / "gpuserve_shadow_probe.py").write_text("")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", ["", str(first)] + sys.path + [str(first)])
    rc, res, err = run_main("--expect", json.dumps(EXPECTED), "--module", "gpuserve_shadow_probe")
    shadows = [os.path.realpath(str(d / "gpuserve_shadow_probe.py")) for d in (cwd, first)]
    assert rc == 1 and res["shadowed"] == shadows
    assert "shadowed by earlier sys.path entries: " + ", ".join(shadows) in res["problems"]
    assert "; shadowed by earlier sys.path entries: " + ", ".join(shadows) + ";" in err


@pytest.mark.usefixtures("run_main")  # purelib and the NCCL variables
def test_main_prints_sorted_json_with_one_space_indent_and_every_field(proof, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sitecustomize", types.SimpleNamespace(__file__="/opt/venv/sitecustomize.py"))
    monkeypatch.setattr("sys.argv", ["nccl_env_proof.py", "--expect", json.dumps(EXPECTED), "--module", "types"])
    assert proof.main() == 0
    out = capsys.readouterr().out
    res = json.loads(out)
    assert out == json.dumps(res, indent=1, sort_keys=True) + "\n"
    assert set(res) == {"ok", "problems", "missing", "inherited_env_keys", "python", "purelib", "hook", "shadowed",
                        "sitecustomize", "sys_path", "parent", "child", "start_method"}
    assert res["sitecustomize"] == "/opt/venv/sitecustomize.py" and res["sys_path"] == sys.path
    assert res["python"] == platform.python_version()
    assert res["parent"] == dict(pid=os.getpid(), executable=sys.executable, env=EXPECTED, hook_imported_at_start=True,
                                 hook_file=types.__file__)


def test_help_describes_the_proof_and_its_options(proof, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("sys.argv", ["nccl_env_proof.py", "--help"])
    with pytest.raises(SystemExit) as exc:
        proof.main()
    out = capsys.readouterr().out
    assert exc.value.code == 0
    description = re.search(r"\n\n(.*?)\n\n", out, re.S).group(1)
    assert description == "Proof that the NCCL variables reach a worker started the way SGLang starts its workers."
    assert "--expect EXPECT  JSON object: variable name -> expected value" in out
    assert "--module MODULE  hook module the .pth imports" in out


def test_expect_is_required(proof, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["nccl_env_proof.py", "--module", "types"])
    with pytest.raises(SystemExit) as exc:
        proof.main()
    assert exc.value.code == 2
    assert "the following arguments are required: --expect" in capsys.readouterr().err
