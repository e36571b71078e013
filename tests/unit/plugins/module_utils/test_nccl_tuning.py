"""_nccl_tuning: the nccl_tuning role's reads. state: the venv's Python and site-packages, systemd, the files (with
the hook's .py and .pth in site-packages) and directories; proof: each of the three proofs run as its own command
(the proof script under env -i with the venv's Python, systemd-run only where systemd runs, a clean login shell),
every result reported, never judged here."""
import hashlib
import json
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils import _nccl_tuning as nt
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result


class Run:
    """run(argv) -> Result with the answer given per argv[0]'s basename (or per the last argv item); records argvs."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, argv):
        self.calls.append(list(argv))
        rc, out, err = self.answers.get(os.path.basename(argv[0]), (0, "", ""))
        return Result(argv, rc, out, err)


def params(**kw):
    out = {name: spec.get("default") for name, spec in nt.INFO_ARGS.items()}
    out.update(hook_module="gpuserve_nccl_env", **kw)
    return out


def venv_with_python(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("#!/bin/sh\n")
    (venv / "bin" / "python").chmod(0o755)
    return venv


def test_state_reads_the_venv_files_hook_and_directories(tmp_path):
    venv = venv_with_python(tmp_path)
    purelib = tmp_path / "site"
    purelib.mkdir()
    (purelib / "gpuserve_nccl_env.py").write_text("hook\n")
    os.chmod(str(purelib / "gpuserve_nccl_env.py"), 0o644)
    env_file = tmp_path / "etc" / "nccl.env"
    env_file.parent.mkdir()
    env_file.write_text("NCCL_PROTO=LL\n")
    os.chmod(str(env_file), 0o640)
    systemd = tmp_path / "run-systemd"
    systemd.mkdir()
    run = Run({"python": (0, "%s\n" % purelib, "")})
    out = nt.read_state(run, params(read="state", venv=str(venv), files=[str(env_file)],
                                    dirs=[str(env_file.parent), str(tmp_path / "none")]), str(systemd))
    me = dict(uid=os.getuid(), gid=os.getgid())
    assert out == {
        "python_exists": True, "purelib": str(purelib), "systemd": True,
        "files": {str(env_file): dict(me, exists=True, isdir=False, mode="0640",
                                      sha1=hashlib.sha1(b"NCCL_PROTO=LL\n").hexdigest()),
                  str(purelib / "gpuserve_nccl_env.py"): dict(me, exists=True, isdir=False, mode="0644",
                                                              sha1=hashlib.sha1(b"hook\n").hexdigest()),
                  str(purelib / "gpuserve_nccl_env.pth"): {"exists": False}},
        "dirs": {str(env_file.parent): dict(me, exists=True, isdir=True, mode="%04o" % (
            os.stat(str(env_file.parent)).st_mode & 0o7777)), str(tmp_path / "none"): {"exists": False}}}
    assert run.calls == [[str(venv / "bin" / "python"), "-I", "-c", nt.PURELIB_PROBE]]


def test_state_without_the_venv_or_with_a_python_that_cannot_tell(tmp_path):
    out = nt.read_state(Run({}), params(read="state", venv=str(tmp_path / "none")), str(tmp_path / "none"))
    assert out == {"python_exists": False, "purelib": None, "files": {}, "dirs": {}, "systemd": False}
    venv = venv_with_python(tmp_path)
    out = nt.read_state(Run({"python": (1, "", "boom")}), params(read="state", venv=str(venv)), str(tmp_path))
    assert out["purelib"] is None and out["purelib_error"] == {"rc": 1, "stdout": "", "stderr": "boom"}
    assert out["files"] == {}


def test_the_proofs_run_as_their_own_commands_and_systemd_only_where_it_runs(tmp_path):
    run = Run({"env": (0, '{"ok": true}', "e" * 5000)})
    p = params(read="proof", venv="/opt/sglang/venv", proof_script="/usr/local/lib/gpuserve/nccl_env_proof.py",
               expect={"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}, env_file="/etc/gpuserve/nccl.env")
    out = nt.read_proof(run, p)
    assert sorted(out) == ["login", "spawn"]
    assert out["spawn"] == {"rc": 0, "stdout": '{"ok": true}', "stderr": "e" * 4000}
    assert run.calls == [
        ["/usr/bin/env", "-i", "/opt/sglang/venv/bin/python", "/usr/local/lib/gpuserve/nccl_env_proof.py",
         "--expect", json.dumps({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}), "--module", "gpuserve_nccl_env"],
        ["/usr/bin/env", "-i", "/bin/sh", "-l", "-c", "env"]]
    run = Run({"systemd-run": (1, "", "no bus")})
    out = nt.read_proof(run, dict(p, systemd=True))
    assert out["systemd_env"] == {"rc": 1, "stdout": "", "stderr": "no bus"}
    assert run.calls[-1] == ["systemd-run", "--quiet", "--wait", "--pipe", "--collect",
                             "--property=EnvironmentFile=/etc/gpuserve/nccl.env", "/usr/bin/env"]
