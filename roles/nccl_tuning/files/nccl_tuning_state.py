"""The nccl_tuning role's reads in the container, one call each (sent on stdin: python3 - MODE ...). Stdlib only.

  state --venv DIR --module NAME --file PATH... --dir PATH...
      Whether the venv's python exists, its site-packages (purelib, as the venv's own sysconfig says), whether
      systemd runs (/run/systemd/system), and for each --file and the hook's .py/.pth in site-packages its sha1
      (as Ansible's stat computes it), mode and owner; for each --dir whether it is a directory, mode, owner.
  proof --venv DIR --script PATH --expect JSON --module NAME --env-file PATH [--systemd]
      Runs the three proofs, each exactly as its own command would: the spawn proof under `env -i` with the
      venv's python, the EnvironmentFile read by systemd (`systemd-run --property=EnvironmentFile=...
      /usr/bin/env`, only with --systemd) and a clean login shell's `env`. Reports rc, stdout, stderr of each.
Prints one JSON object; a command that cannot run is reported with rc 127, never raised.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys


def _run(argv, timeout=300):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": 127, "stdout": "", "stderr": str(exc)}
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:]}


def _stat(path, content=True):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {"exists": False}
    out = {"exists": True, "isdir": os.path.isdir(path), "mode": "%04o" % (st.st_mode & 0o7777),
           "uid": st.st_uid, "gid": st.st_gid}
    if content and not out["isdir"]:
        with open(path, "rb") as handle:
            out["sha1"] = hashlib.sha1(handle.read()).hexdigest()
    return out


def cmd_state(opts):
    python = os.path.join(opts.venv, "bin", "python")
    result = {"python_exists": os.access(python, os.X_OK), "purelib": None, "files": {}, "dirs": {},
              "systemd": os.path.isdir("/run/systemd/system")}
    if result["python_exists"]:
        res = _run([python, "-I", "-c", 'import sysconfig; print(sysconfig.get_path("purelib"))'])
        if res["rc"] == 0 and res["stdout"].strip():
            result["purelib"] = res["stdout"].strip()
        else:
            result["purelib_error"] = res
    paths = list(opts.file)
    if result["purelib"]:
        paths += [os.path.join(result["purelib"], opts.module + suffix) for suffix in (".py", ".pth")]
    for path in paths:
        result["files"][path] = _stat(path)
    for path in opts.dir:
        result["dirs"][path] = _stat(path, content=False)
    return result


def cmd_proof(opts):
    python = os.path.join(opts.venv, "bin", "python")
    result = {
        "spawn": _run(["/usr/bin/env", "-i", python, opts.script, "--expect", opts.expect, "--module", opts.module]),
        "login": _run(["/usr/bin/env", "-i", "/bin/sh", "-l", "-c", "env"]),
    }
    if opts.systemd:
        result["systemd"] = _run(["systemd-run", "--quiet", "--wait", "--pipe", "--collect",
                                  "--property=EnvironmentFile=" + opts.env_file, "/usr/bin/env"])
    return result


def main():
    parser = argparse.ArgumentParser(prog="nccl_tuning_state")
    sub = parser.add_subparsers(dest="mode", required=True)
    state = sub.add_parser("state")
    state.add_argument("--venv", required=True)
    state.add_argument("--module", required=True)
    state.add_argument("--file", action="append", default=[])
    state.add_argument("--dir", action="append", default=[])
    proof = sub.add_parser("proof")
    proof.add_argument("--venv", required=True)
    proof.add_argument("--script", required=True)
    proof.add_argument("--expect", required=True)
    proof.add_argument("--module", required=True)
    proof.add_argument("--env-file", required=True)
    proof.add_argument("--systemd", action="store_true")
    opts = parser.parse_args()
    print(json.dumps(cmd_state(opts) if opts.mode == "state" else cmd_proof(opts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
