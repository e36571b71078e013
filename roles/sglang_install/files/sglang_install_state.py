"""Read-only state of the SGLang install, in one call (sent on stdin: python3 - MODE ...). Stdlib only.

Sent ahead of it on the same stdin: the collection's plugins/module_utils/_git_tree.py, the one reader of the
tree's commit and changes, and _install_fingerprint.py, the one recipe of the install's fingerprint
(roles/sglang_install/vars/main.yml, __sglang_install_state_script); the server's helper reads the tree and
fingerprints the install with the same files.

  state --src DIR --venv DIR --pin REF --file PATH... --dpkg PKG... --packages JSON --constraints JSON
      What the role's decisions read: whether the system packages are installed (dpkg), the tree (.git, its
      commit and changes as _git_tree reads them, the pin resolved to a commit, origin's URL), the venv (python, pyvenv.cfg, the
      sglang distribution and its direct_url.json, whether every package of --packages and everything it
      requires is installed at a version its requirement and --constraints allow), and for each --file its
      sha1 (as Ansible's stat computes it), mode, owner and, when small, its text.
  facts --src DIR --venv DIR [--smoke [--record FILE]]
      The published facts after the install: the tree (_git_tree), the sglang version in the venv;
      with --smoke, the result of importing sglang.srt.server_args in the venv. With --record, an import that
      passed on a clean tree is recorded in FILE with a fingerprint of its inputs (the commit, pyvenv.cfg, the venv's
      Python and every distribution's name and version); while the fingerprint is unchanged the import is not
      repeated and the result says since when it holds (`cached_since`). A dirty tree or a failed import
      removes the record.
Prints one JSON object. Each command's rc, stdout and stderr are reported, never raised.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

# Runs in the venv (python -I): the closure of the requirements, checked as pip's resolver would see it.
_VENV_PROBE = r'''
import importlib.metadata as md, json, re, sys
out = {"dist": {}, "intact": {"ok": False, "problems": [], "checked": 0}}
try:
    d = md.distribution("sglang")
    out["dist"] = {"version": d.version, "direct_url": json.loads(d.read_text("direct_url.json") or "{}")}
except md.PackageNotFoundError:
    pass
packages, constraints = json.loads(sys.argv[1]), json.loads(sys.argv[2])
try:
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.version import Version
except ImportError:
    try:
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:
        Requirement = None
if Requirement is None:
    out["intact"]["problems"].append("neither pip nor packaging is importable in the venv")
else:
    norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
    problems = out["intact"]["problems"]
    pins = {}
    for line in constraints:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            pins.setdefault(norm(req.name), []).append(req)
    todo, seen = [Requirement(p) for p in packages], set()
    while todo:
        req = todo.pop()
        key = (norm(req.name), tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            problems.append("%s is not installed" % req)
            continue
        version = Version(dist.version)
        for want in [req] + pins.get(key[0], []):
            if not want.specifier.contains(version, prereleases=True):
                problems.append("%s %s does not satisfy %s" % (req.name, dist.version, want))
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in [""] + sorted(req.extras)):
                todo.append(sub)
    out["intact"].update(ok=not problems, checked=len(seen))
print(json.dumps(out))
'''


def _run(argv, timeout=600):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": 127, "stdout": "", "stderr": str(exc)}
    return {"rc": proc.returncode, "stdout": proc.stdout.strip(), "stderr": proc.stderr.strip()[-2000:]}


def _file(path):
    try:
        st = os.stat(path)
        digest = hashlib.sha1()
        with open(path, "rb") as handle:
            data = handle.read()
        digest.update(data)
    except FileNotFoundError:
        return {"exists": False}
    text = data.decode("utf-8", "replace") if len(data) < 65536 else None
    return {"exists": True, "sha1": digest.hexdigest(), "mode": "%04o" % (st.st_mode & 0o7777),
            "uid": st.st_uid, "gid": st.st_gid, "text": text}


def _git(src, *args):
    return _run(["git", "-C", src, *args])


def _sent(name):
    """A function of plugins/module_utils/_git_tree.py or _install_fingerprint.py, which the role sends ahead of this
    file on stdin."""
    if name not in globals():
        sys.exit("sglang_install_state.py: send plugins/module_utils/_git_tree.py and _install_fingerprint.py ahead "
                 "of it on the same stdin")
    return globals()[name]


def _tree(src):
    """{rc, error, commit, changes, dirty}: _git_tree's reading, run here."""
    res = _run(_sent("status_argv")(src))
    return _sent("parse_status")(res["rc"], res["stdout"], res["stderr"])


def cmd_state(opts):
    result = {"dpkg": {}, "git": {"exists": os.path.exists(os.path.join(opts.src, ".git"))}, "venv": {}, "files": {}}
    if opts.dpkg:
        res = _run(["dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\n", *opts.dpkg])
        states = dict(line.split("\t", 1) for line in res["stdout"].splitlines() if "\t" in line)
        result["dpkg"] = {name: states.get(name, "").startswith("ii") for name in opts.dpkg}
    if result["git"]["exists"]:
        result["git"].update(
            tree=_tree(opts.src),
            want=_git(opts.src, "rev-parse", "--verify", opts.pin + "^{commit}"),
            remote_url=_git(opts.src, "remote", "get-url", "origin"),
        )
    python = os.path.join(opts.venv, "bin", "python")
    result["venv"]["python_exists"] = os.access(python, os.X_OK)
    result["venv"]["pyvenv_cfg"] = _file(os.path.join(opts.venv, "pyvenv.cfg"))
    if result["venv"]["python_exists"]:
        probe = _run([python, "-I", "-c", _VENV_PROBE, opts.packages, opts.constraints])
        try:
            result["venv"].update(json.loads(probe["stdout"]))
        except ValueError:
            result["venv"]["error"] = probe
    for path in opts.file:
        result["files"][path] = _file(path)
    return result


SMOKE_MODULE = "sglang.srt.server_args"


def _fingerprint(python, venv, tree):
    """The import's inputs as the collection's one recipe takes them (_install_fingerprint, sent on stdin ahead of
    this file), or None: then the import always runs."""
    probe = _run(_sent("probe_argv")(python))
    return _sent("install_fingerprint")(tree, probe["rc"], probe["stdout"], _sent("pyvenv_cfg_digest")(venv),
                                        SMOKE_MODULE)


def _read_record(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _smoke(python, opts, tree):
    argv = [python, "-I", "-c", "import " + SMOKE_MODULE]
    if not opts.record:
        return _run(argv)
    fingerprint = _fingerprint(python, opts.venv, tree)
    record = _read_record(opts.record)
    if fingerprint is not None and record.get("fingerprint") == fingerprint:
        return {"rc": 0, "stdout": "", "stderr": "", "cached_since": record.get("proven_at")}
    result = _run(argv)
    if result["rc"] == 0 and fingerprint is not None:
        os.makedirs(os.path.dirname(opts.record) or ".", exist_ok=True)
        tmp = opts.record + ".tmp"
        with open(tmp, "w") as handle:
            json.dump({"fingerprint": fingerprint, "module": SMOKE_MODULE,
                       "proven_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, handle)
        os.replace(tmp, opts.record)
    elif os.path.exists(opts.record):
        os.unlink(opts.record)
    return result


def cmd_facts(opts):
    python = os.path.join(opts.venv, "bin", "python")
    result = {
        "tree": _tree(opts.src),
        "version": _run([python, "-I", "-c", 'import importlib.metadata as m; print(m.version("sglang"))']),
    }
    if opts.smoke:
        result["smoke"] = _smoke(python, opts, result["tree"])
    return result


def main():
    _sent("parse_status")  # refuse before reading anything
    _sent("install_fingerprint")
    parser = argparse.ArgumentParser(prog="sglang_install_state")
    sub = parser.add_subparsers(dest="mode", required=True)
    state = sub.add_parser("state")
    facts = sub.add_parser("facts")
    for each in (state, facts):
        each.add_argument("--src", required=True)
        each.add_argument("--venv", required=True)
    state.add_argument("--pin", required=True)
    state.add_argument("--file", action="append", default=[])
    state.add_argument("--dpkg", action="append", default=[])
    state.add_argument("--packages", default="[]")
    state.add_argument("--constraints", default="[]")
    facts.add_argument("--smoke", action="store_true")
    facts.add_argument("--record", default="")
    opts = parser.parse_args()
    print(json.dumps(cmd_state(opts) if opts.mode == "state" else cmd_facts(opts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
