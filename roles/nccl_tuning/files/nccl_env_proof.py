"""Proof that the NCCL variables reach a worker started the way SGLang starts its workers.

Run with the deployed interpreter and a clean environment, so nothing can come from the caller:
    env -i /opt/sglang/venv/bin/python nccl_env_proof.py --expect '{"NCCL_PROTO": "LL"}' --module gpuserve_nccl_env

Checks, and prints one JSON object (ok, missing, parent, child, hook, shadowed, ...):
  - the hook module was imported at interpreter start (the .pth ran) and the copy that ran is the one in this
    interpreter's site-packages: nothing earlier on sys.path (a stray file, a sitecustomize-era leftover)
    shadows it;
  - a child started with multiprocessing 'spawn' sees every expected variable with its expected value.
Exit 0 when all hold, 1 otherwise (the missing list is on stderr too), 2 on a usage error.
"""
import argparse
import importlib.machinery
import importlib.util
import json
import multiprocessing
import os
import sys
import sysconfig


def _snapshot(names, module):
    mod = sys.modules.get(module)
    return {
        "pid": os.getpid(),
        "executable": sys.executable,
        "env": {name: os.environ.get(name) for name in names},
        "hook_imported_at_start": mod is not None,
        "hook_file": getattr(mod, "__file__", None),
    }


def _child(conn, names, module):
    conn.send(_snapshot(names, module))
    conn.close()


def _candidates(module, path_entry):
    """Files under one sys.path entry that `import module` would pick up."""
    found = []
    if not path_entry or not os.path.isdir(path_entry):
        return found
    for suffix in importlib.machinery.all_suffixes():
        candidate = os.path.join(path_entry, module + suffix)
        if os.path.isfile(candidate):
            found.append(candidate)
    pkg = os.path.join(path_entry, module, "__init__.py")
    if os.path.isfile(pkg):
        found.append(pkg)
    return found


def judge(expected, module, parent, child, exitcode, origin, purelib, shadowed):
    """(problems, missing): what keeps the proof from holding. `child` is the spawned child's snapshot (None when
    it never reported), `origin` where `import module` resolves, `shadowed` earlier copies on sys.path."""
    problems = []
    if not parent["hook_imported_at_start"]:
        problems.append("hook module %s was not imported at interpreter start (the .pth did not run)" % module)
    if origin is None or os.path.dirname(origin) != purelib:
        problems.append("import %s resolves to %s, not %s" % (module, origin, purelib))
    if shadowed:
        problems.append("shadowed by earlier sys.path entries: %s" % ", ".join(shadowed))
    missing = []
    if child is None:
        problems.append("spawned child did not report (exit code %s)" % exitcode)
    else:
        if not child["hook_imported_at_start"]:
            problems.append("hook module was not imported at the spawned child's start")
        for name in sorted(expected):
            got = child["env"].get(name)
            if got != expected[name]:
                missing.append(name if got is None else "%s=%r (expected %r)" % (name, got, expected[name]))
    if missing:
        problems.append("missing in the spawned child: %s" % ", ".join(missing))
    return problems, missing


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--expect", required=True, help="JSON object: variable name -> expected value")
    parser.add_argument("--module", default="gpuserve_nccl_env", help="hook module the .pth imports")
    args = parser.parse_args()
    try:
        expected = json.loads(args.expect)
        assert isinstance(expected, dict) and all(isinstance(v, str) for v in expected.values())
    except (ValueError, AssertionError):
        print("--expect must be a JSON object of strings", file=sys.stderr)
        return 2
    names = sorted(expected)

    purelib = os.path.realpath(sysconfig.get_path("purelib"))
    parent = _snapshot(names, args.module)
    spec = importlib.util.find_spec(args.module)
    origin = os.path.realpath(spec.origin) if spec and spec.origin else None
    # every sys.path entry before this interpreter's site-packages that holds a module of that name
    shadowed = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if real == purelib:
            break
        shadowed.extend(_candidates(args.module, real))

    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, names, args.module))
    proc.start()
    send.close()
    try:
        child = recv.recv() if recv.poll(120) else None
    except EOFError:  # the child died before it reported: judged below as "did not report"
        child = None
    proc.join(30)

    problems, missing = judge(expected, args.module, parent, child, proc.exitcode, origin, purelib, shadowed)

    result = {
        "ok": not problems,
        "problems": problems,
        "missing": missing,
        "inherited_env_keys": sorted(k for k in os.environ if k not in expected),
        "python": sys.version.split()[0],
        "purelib": purelib,
        "hook": origin,
        "shadowed": shadowed,
        "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
        "sys_path": sys.path,
        "parent": parent,
        "child": child,
        "start_method": "spawn",
    }
    print(json.dumps(result, indent=1, sort_keys=True))
    if problems:
        print("NCCL env proof FAILED: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
