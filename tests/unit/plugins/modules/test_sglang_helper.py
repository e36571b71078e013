"""sglang_helper through its entry point: the container helper's package and its launcher installed into temporary
folders, each file with its source, only what differs written, nothing in check mode; then the installed launcher
runs commands under a Python without ansible (`python -I -S`), which proves the package needs only the standard
library: the usage line, `lock` (acquire, status, release: its holder runs the installed package again), `source`
on a git tree and `gate` against a stand-in nvidia-smi."""
import json
import os
import stat
import subprocess
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.module_utils import _helper_cli
from ansible_collections.gpuserve.sglang.plugins.modules import sglang_helper
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import PACKAGE, gpus, stand_in_smi

# the module makes its files root's, as the container's helper must be (systemd runs it as root)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the module makes its files root's: run as root")


def run_module(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exc:
        sglang_helper.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


@pytest.fixture
def where(tmp_path):
    """The module's options into tmp_path, and the paths it writes, package first, launcher last."""
    lib, path = tmp_path / "lib", tmp_path / "sbin" / "gpuserve-sglang"
    folder = lib / "ansible_collections" / "gpuserve" / "sglang" / "plugins" / "module_utils"
    options = dict(lib=str(lib), path=str(path), python=sys.executable)
    return options, [folder / name for name in _helper_cli.PACKAGE] + [path]


def source(name):
    with open(sys.modules[PACKAGE + "." + name[:-len(".py")]].__file__, encoding="utf-8") as handle:
        return handle.read()


def test_installs_every_package_file_with_its_source_and_the_launcher(capsys, where):
    options, paths = where
    code, out = run_module(capsys, **options)
    assert code == 0 and out["changed"] is True and out["changed_files"] == [str(p) for p in paths]
    for name, path in zip(_helper_cli.PACKAGE, paths):
        assert path.read_text(encoding="utf-8") == source(name), name
        assert mode(path) == 0o644 and os.stat(str(path)).st_uid == 0 and os.stat(str(path)).st_gid == 0
    launcher = paths[-1]
    assert launcher.read_text() == _helper_cli.launcher(sys.executable, options["lib"]) and mode(launcher) == 0o755
    assert mode(paths[0].parent) == 0o755 and mode(launcher.parent) == 0o755  # the folders it made
    assert sorted(p.name for p in paths[0].parent.iterdir()) == sorted(_helper_cli.PACKAGE)  # nothing else


def test_a_second_run_changes_nothing(capsys, where):
    options, paths = where
    run_module(capsys, **options)
    inodes = [os.stat(str(p)).st_ino for p in paths]
    code, out = run_module(capsys, **options)
    assert code == 0 and out["changed"] is False and out["changed_files"] == []
    assert [os.stat(str(p)).st_ino for p in paths] == inodes  # untouched, not rewritten
    assert sorted(os.listdir(str(paths[-1].parent))) == ["gpuserve-sglang"]  # no temporary file left


def test_check_mode_names_what_would_change_and_writes_nothing(capsys, where, tmp_path):
    options, paths = where
    code, out = run_module(capsys, _ansible_check_mode=True, **options)
    assert code == 0 and out["changed"] is True and out["changed_files"] == [str(p) for p in paths]
    assert os.listdir(str(tmp_path)) == []
    run_module(capsys, **options)
    paths[3].write_text("# edited by hand\n")
    os.chmod(str(paths[-1]), 0o700)
    code, out = run_module(capsys, _ansible_check_mode=True, **options)
    assert out["changed_files"] == [str(paths[3]), str(paths[-1])]
    assert paths[3].read_text() == "# edited by hand\n" and mode(paths[-1]) == 0o700


def test_only_a_file_whose_content_or_mode_differs_is_written(capsys, where):
    options, paths = where
    run_module(capsys, **options)
    paths[8].write_text(source(_helper_cli.PACKAGE[8]) + "# a local change\n")
    os.chmod(str(paths[2]), 0o666)
    inodes = {p: os.stat(str(p)).st_ino for p in paths}
    code, out = run_module(capsys, **options)
    assert code == 0 and out["changed"] is True and out["changed_files"] == [str(paths[2]), str(paths[8])]
    assert paths[8].read_text() == source(_helper_cli.PACKAGE[8]) and mode(paths[2]) == 0o644
    assert [p for p in paths if os.stat(str(p)).st_ino != inodes[p]] == [paths[8]]  # rewritten, the others not


def test_the_launcher_names_its_interpreter_and_its_lib(capsys, where):
    options, paths = where
    run_module(capsys, **dict(options, python="/opt/python3.11/bin/python3"))
    assert paths[-1].read_text().startswith("#!/opt/python3.11/bin/python3\n")
    assert "sys.path.insert(0, %r)\n" % options["lib"] in paths[-1].read_text()


def test_defaults_are_where_the_role_installs_the_helper(monkeypatch):
    seen = {}

    def fake(argument_spec, **kwargs):
        seen.update(argument_spec)
        raise SystemExit(0)

    monkeypatch.setattr(sglang_helper, "AnsibleModule", fake)
    with pytest.raises(SystemExit):
        sglang_helper.main()
    assert {k: v["default"] for k, v in seen.items()} == {
        "lib": "/usr/local/lib/gpuserve-sglang", "path": "/usr/local/sbin/gpuserve-sglang", "python": "/usr/bin/python3"}


def test_a_relative_path_fails_before_anything_is_written(capsys, tmp_path):
    code, out = run_module(capsys, lib=str(tmp_path / "lib"), path="sbin/gpuserve-sglang")
    assert code == 1 and out["msg"] == "sglang_helper: path must be absolute, got 'sbin/gpuserve-sglang'"
    assert os.listdir(str(tmp_path)) == []


def test_an_os_error_fails_with_its_reason(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out = run_module(capsys, lib=str(blocker), path=str(tmp_path / "gpuserve-sglang"))
    assert code == 1 and out["msg"].startswith("sglang_helper: ") and "Not a directory" in out["msg"]


# ------------------------------------------------------------------------------- the installed helper, run alone

def run(helper, *argv):
    # -I: no site-packages (no ansible), no PYTHONPATH, no current directory; -S: no site module
    return subprocess.run([sys.executable, "-I", "-S", helper] + list(argv), capture_output=True, text=True,
                          check=False, timeout=60)


@pytest.fixture
def helper(capsys, where):
    options, paths = where
    assert run_module(capsys, **options)[0] == 0
    return str(paths[-1])


@pytest.mark.foreign_python
def test_the_installed_helper_runs_without_ansible(helper):
    out = run(helper)
    assert out.returncode == 64 and out.stderr == (
        "usage: gpuserve-sglang {exec,gate,config,lock,validate-args,env-proof,worker-env,source,wait-ready,state,stop,start} ...\n")
    # executed, as the benchmark runs it: its interpreter line
    out = subprocess.run([helper, "lock", "status", "--path", "/nonexistent/lock"], capture_output=True, text=True,
                         check=False, timeout=60)
    assert (out.returncode, json.loads(out.stdout)) == (0, {"held": False, "owner": {}})


@pytest.mark.foreign_python
def test_the_installed_lock_hands_the_lock_to_a_holder_that_runs_the_installed_package(helper, tmp_path):
    path = str(tmp_path / "run" / "lock")
    taken = run(helper, "lock", "acquire", "--path", path, "--owner-json", '{"pid": 1}', "--ttl", "60")
    assert taken.returncode == 0, taken.stderr
    owner = json.loads(taken.stdout)["owner"]
    try:
        with open("/proc/%d/cmdline" % owner["holder_pid"], "rb") as handle:
            argv = handle.read().split(b"\0")
        root = os.path.dirname(os.path.dirname(helper)) + "/lib"
        assert argv[1] == b"-c" and repr(root).encode() in argv[2] and argv[3:5] == [b"lock", b"hold"]
        status = run(helper, "lock", "status", "--path", path)
        assert json.loads(status.stdout) == {"held": True, "owner": owner}
    finally:
        released = run(helper, "lock", "release", "--path", path, "--token", owner["token"])
    assert json.loads(released.stdout) == {"released": True, "owner": owner}
    assert json.loads(run(helper, "lock", "status", "--path", path).stdout) == {"held": False, "owner": {}}


@pytest.mark.foreign_python
def test_the_installed_helper_reads_a_tree(helper, tmp_path):
    src = tmp_path / "src"
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "one"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (src / "new.py").write_text("")
    out = run(helper, "source", "--src", str(src))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"rc": 0, "error": "", "commit": head, "changes": ["?? new.py"], "dirty": True}


@pytest.mark.foreign_python
def test_the_installed_helper_gates_on_the_gpus_memory(helper, tmp_path):
    smi = stand_in_smi(tmp_path)
    fake = smi([{"out": gpus({3: 4096})}, {"out": gpus()}])
    out = run(helper, "gate", "--expected-count", "8", "--nvidia-smi", fake, "--poll-interval", "0.01")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["polls"] == 2 and out.stderr.startswith("gpuserve-sglang gate: 8 GPU(s) at or under")
    smi([{"out": gpus({3: 4096})}], apps="")
    out = run(helper, "gate", "--expected-count", "8", "--nvidia-smi", fake, "--poll-interval", "0.01",
              "--timeout", "0.1")
    assert out.returncode == 1 and json.loads(out.stdout)["passed"] is False
    assert out.stderr.startswith("gpuserve-sglang gate: not starting, gate timed out after ")
