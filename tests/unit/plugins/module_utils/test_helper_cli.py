"""The container helper's command line (plugins/module_utils/_helper_cli.py): the usage line and the hand-over to
each command's parser, what every command refuses without its required options, files read as UTF-8 whatever the
locale (exec, validate-args, the env file, state), and what the installed helper is (PACKAGE, the launcher, files()).

Each command's own tests are in test_helper_<command>.py; the package installed and run by its launcher in
tests/unit/plugins/modules/test_sglang_helper.py.
"""
import json
import locale
import os
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import (
    _helper_cli, _helper_env, _helper_exec)
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import (
    args_file, completed, fake_commands, install_sglang, run_json, run_main)


# ---------------------------------------------------------------------------------------------------- main / usage

USAGE = "usage: gpuserve-sglang {exec,gate,config,lock,validate-args,env-proof,worker-env,source,wait-ready,state,stop,start} ...\n"


@pytest.mark.parametrize("argv", [[], ["restart"], ["EXEC"]])
def test_main_prints_the_usage_for_no_or_an_unknown_subcommand(monkeypatch, capsys, argv):
    assert run_main(monkeypatch, capsys, *argv) == (64, "", USAGE)


def test_main_hands_a_known_subcommand_to_its_parser(monkeypatch, capsys):
    # wait-ready alone is a known subcommand: its own parser refuses the missing --port (not the usage line)
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang", "wait-ready"])
    with pytest.raises(SystemExit) as exc:
        _helper_cli.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gpuserve-sglang wait-ready ")
    assert "error: the following arguments are required: --port" in err


# ------------------------------------------------------------------------------------------------- required options

@pytest.mark.parametrize("argv, usage, missing", [
    (["env-proof"], "usage: gpuserve-sglang env-proof [-h] --unit UNIT", "--unit"),
    (["state", "--src", "/opt/sglang/src"], "usage: gpuserve-sglang state [-h] --unit UNIT --src SRC", "--unit"),
    (["state", "--unit", "sglang.service"], "usage: gpuserve-sglang state [-h] --unit UNIT --src SRC", "--src"),
    (["worker-env"], "usage: gpuserve-sglang worker-env [-h] --unit UNIT", "--unit"),
    (["source"], "usage: gpuserve-sglang source [-h] --src SRC", "--src"),
])
def test_subcommands_refuse_a_missing_required_option(monkeypatch, capsys, argv, usage, missing):
    monkeypatch.setattr(sys, "argv", ["gpuserve-sglang"] + argv)
    with pytest.raises(SystemExit) as exc:
        _helper_cli.main()
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


def test_files_are_read_as_utf8_whatever_the_locale(monkeypatch, capsys, tmp_path, c_locale):
    execv = []
    monkeypatch.setattr(_helper_exec.os, "execv", lambda path, args: execv.append((path, list(args))))
    args = ["--model-path", "/models/模型-é", "--tp-size", "2"]
    path = args_file(tmp_path, json.dumps({"argv": args}, ensure_ascii=False))  # UTF-8 bytes, not \u escapes
    rc, _out, _err = run_main(monkeypatch, capsys, "exec", path, "--", "/usr/bin/sglang")
    assert rc == 127 and execv == [("/usr/bin/sglang", ["/usr/bin/sglang"] + args)]

    install_sglang(monkeypatch)
    rc, out, _err = run_json(monkeypatch, capsys, "validate-args", "--args-file", path)
    assert rc == 0 and out["argv"] == args

    env = tmp_path / "nccl.env"
    env.write_text("# réglages NCCL\nNCCL_DEBUG_SUBSYS=INIT\nGPUSERVE_NOTE=déjà\n", encoding="utf-8")
    assert _helper_env._env_file(str(env)) == {"NCCL_DEBUG_SUBSYS": "INIT", "GPUSERVE_NOTE": "déjà"}

    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"model": "qwen-é"}, ensure_ascii=False), encoding="utf-8")
    fake_commands(monkeypatch, [], {
        "git": completed(""), "systemctl": completed("")})
    rc, out, _err = run_json(monkeypatch, capsys, "state", "--unit", "sglang.service", "--src", str(tmp_path),
                             "--manifest", str(manifest))
    assert rc == 0 and out["manifest"] == {"model": "qwen-é"}


# ------------------------------------------------------------------------------------------- the installed helper

def test_the_package_is_the_helper_files_and_the_collection_code_they_run():
    assert _helper_cli.PACKAGE == (
        "_helper_cli.py", "_helper_config.py", "_helper_exec.py", "_helper_gate.py", "_helper_lock.py", "_helper_validate.py",
        "_helper_env.py", "_helper_ready.py", "_helper_state.py", "_helper_stop.py", "_helper_run.py",
        "_gate.py", "_gpu_health.py", "_gpu_map.py", "_nvidia_smi.py", "_nvidia_userspace.py", "_git_tree.py",
        "_startup_log.py",
        "_install_fingerprint.py", "_fingerprint_probe.py", "_python_script.py", "_speculative.py")
    assert _helper_cli.PACKAGE_DIR == "ansible_collections/gpuserve/sglang/plugins/module_utils"


def test_the_launcher_puts_the_package_first_and_runs_main():
    assert _helper_cli.launcher("/usr/bin/python3", "/usr/local/lib/gpuserve-sglang") == (
        "#!/usr/bin/python3\n"
        "# Managed by Ansible (gpuserve.sglang.sglang_helper). The container helper gpuserve-sglang: its code is the\n"
        "# collection's package under /usr/local/lib/gpuserve-sglang, installed with this file.\n"
        "import sys\n"
        "\n"
        "sys.path.insert(0, '/usr/local/lib/gpuserve-sglang')\n"
        "from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_cli import main  # noqa: E402\n"
        "\n"
        "sys.exit(main())\n")
    # a path that needs quoting is quoted as Python reads it
    assert "sys.path.insert(0, \"/o'dd\")\n" in _helper_cli.launcher("/x", "/o'dd")


def test_files_are_every_package_file_with_its_source_then_the_launcher():
    got = _helper_cli.files("/lib", "/sbin/gpuserve-sglang", "/venv/bin/python")
    assert [f["path"] for f in got] == (
        ["/lib/ansible_collections/gpuserve/sglang/plugins/module_utils/" + n for n in _helper_cli.PACKAGE]
        + ["/sbin/gpuserve-sglang"])
    assert [f["mode"] for f in got] == ["0644"] * len(_helper_cli.PACKAGE) + ["0755"]
    for name, item in zip(_helper_cli.PACKAGE, got):
        module = sys.modules["ansible_collections.gpuserve.sglang.plugins.module_utils." + name[:-3]]
        with open(module.__file__, encoding="utf-8") as handle:
            assert item["content"] == handle.read(), name
        assert os.path.basename(module.__file__) == name
    assert got[-1]["content"] == _helper_cli.launcher("/venv/bin/python", "/lib")
    assert set(got[0]) == {"path", "mode", "content"}


def test_files_takes_a_source_its_loader_gives_as_bytes_as_text(monkeypatch):
    """Ansible's collection loader (ansible-test units) answers get_source with bytes; the zip of a module's payload
    and a checkout with text. Either way the content is the file's text."""
    module = sys.modules["ansible_collections.gpuserve.sglang.plugins.module_utils._git_tree"]
    with open(module.__file__, encoding="utf-8") as handle:
        text = handle.read()

    class BytesLoader:
        @staticmethod
        def get_source(name):
            assert name == module.__name__
            return text.encode("utf-8") + "# é\n".encode("utf-8")

    monkeypatch.setattr(module, "__loader__", BytesLoader())
    got = {os.path.basename(f["path"]): f["content"] for f in _helper_cli.files("/lib", "/sbin/x", "/py")}
    assert got["_git_tree.py"] == text + "# é\n"
