# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang env-proof and worker-env: the NCCL variables in every process of the server's unit, read from
/proc/PID/environ; the unit's control group, the /proc readers and the EnvironmentFile parser they share.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package.
_helper_validate takes the env-file parser from here, _helper_lock the /proc reader (_read).
"""
import argparse
import json
import os
import sys

from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_run import systemctl

# A program run without Ansible (systemd, the role's command tasks, an operator): it prints its JSON, with no
# AnsibleModule to log through; its commands go through _helper_run.
# pylint: disable=ansible-bad-function


# SGLang names its tensor-parallel workers with setproctitle ("sglang::scheduler_TP0", ...): they are the processes
# that run NCCL. The launcher's own environ is its START environment: SGLang then sets NCCL_CUMEM_ENABLE,
# CUDA_DEVICE_MAX_CONNECTIONS, ... in os.environ for its children, so the launcher legitimately differs from them.
WORKER_TITLE = "sglang::scheduler"
TITLE_PREFIX = "sglang::"  # every title SGLang sets (scheduler, detokenizer, ...)


# cgroup v2, then systemd's hybrid layout (v2 under unified/, as in an LXC container on a v1 host), then v1
CGROUP_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd")


class UnitError(Exception):
    """systemctl could not say what the unit's control group is."""


def _failed(result, error):
    """Prints result with its error; the exit status of a command that could not read what it needed."""
    result["error"] = error
    print(json.dumps(result))
    return 1


def _control_group(unit):
    res = systemctl("show", "--property=ControlGroup", "--value", unit)
    if res.rc != 0:
        raise UnitError(f"systemctl show {unit} failed: {(res.err or res.out).strip()}")
    return res.out.strip()


def _cgroup_dir(group):
    for root in CGROUP_ROOTS:
        path = root + group
        if os.path.isfile(os.path.join(path, "cgroup.procs")):
            return path
    return None


def _pids(path):
    pids = []
    for dirpath, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(dirpath, "cgroup.procs"), encoding="ascii") as handle:
                    pids.extend(int(line) for line in handle if line.strip())
            except FileNotFoundError:
                continue  # a sub-group removed during the walk (a worker that exited)
    return sorted(set(pids))


def _read(pid, name):
    with open(f"/proc/{pid}/{name}", "rb") as handle:
        return handle.read()


def _processes(path):
    """(pid, command line, environ) of every process in the control group at path and its sub-groups; command
    line and environ are None for a process that exited between the listing and the read."""
    for pid in _pids(path):
        try:
            environ = dict(
                item.split(b"=", 1) for item in _read(pid, "environ").split(b"\0") if b"=" in item
            )
            cmdline = _read(pid, "cmdline").replace(b"\0", b" ").strip().decode("utf-8", "replace")
        except (FileNotFoundError, ProcessLookupError):
            yield pid, None, None
            continue
        yield pid, cmdline, {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in environ.items()}


def _env_file(path):
    values = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line or line.startswith(("#", ";")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            key, value = key.strip(), value.strip()
            if key.startswith("export "):
                key = key[len("export "):].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[key] = value
    return values


def cmd_env_proof():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang env-proof")
    parser.add_argument("--unit", required=True)
    parser.add_argument("--expected-json", default="{}")
    parser.add_argument("--env-file")
    parser.add_argument("--min-schedulers", type=int, default=0)
    opts = parser.parse_args(sys.argv[2:])
    desired = {str(k): str(v) for k, v in json.loads(opts.expected_json).items()}
    from_file = {}
    result = {"ok": False, "unit": opts.unit, "control_group": None, "expected": {}, "env_file_drift": {},
              "processes": [], "schedulers": 0, "min_schedulers": opts.min_schedulers, "error": None, "hint": None}
    if opts.env_file:
        try:
            from_file = _env_file(opts.env_file)
        except OSError as exc:
            result["error"] = f"cannot read {opts.env_file}: {exc}"
            print(json.dumps(result))
            return 1
    result["env_file_drift"] = {
        key: {"want": want, "file": from_file.get(key)}
        for key, want in desired.items() if opts.env_file and from_file.get(key) != want
    }
    expected = dict(from_file, **desired)
    result["expected"] = expected
    if not expected:
        result["error"] = "no expected variables (empty env file and no --expected-json): nothing to prove"
        print(json.dumps(result))
        return 1
    try:
        group = _control_group(opts.unit)
    except UnitError as exc:
        return _failed(result, str(exc))
    result["control_group"] = group
    path = _cgroup_dir(group) if group else None
    if path is None:
        result["error"] = f"{opts.unit} has no control group (is it running?)"
        print(json.dumps(result))
        return 1

    retitled = []  # sglang:: workers whose environ setproctitle may have overwritten
    for pid, cmdline, environ in _processes(path):
        if environ is None:
            continue  # exited between listing and reading
        mismatched = {
            key: {"want": want, "got": environ.get(key)}
            for key, want in expected.items() if environ.get(key) != want
        }
        result["processes"].append({"pid": pid, "cmd": cmdline[:200], "ok": not mismatched,
                                    "mismatched": mismatched})
        if cmdline.startswith(WORKER_TITLE):
            result["schedulers"] += 1
        if mismatched and cmdline.startswith(TITLE_PREFIX) and not environ.get("SPT_NOENV"):
            retitled.append(pid)
    if retitled:
        # what the real H200 showed (2026-12-03): the variables were there at exec, setproctitle wrote over them
        result["hint"] = (f"PIDs {retitled} are SGLang workers titled with setproctitle, which overwrites "
                          "/proc/PID/environ unless SPT_NOENV is set in their environment; the role's unit sets "
                          "SPT_NOENV=1 (an older unit, or a server started outside it?)")

    procs = result["processes"]
    if result["env_file_drift"]:
        result["error"] = f"the environment file differs from the desired values: {result['env_file_drift']}"
    elif not procs:
        result["error"] = f"no process in {group}"
    elif not all(p["ok"] for p in procs):
        bad = [p["pid"] for p in procs if not p["ok"]]
        result["error"] = f"{len(bad)} of {len(procs)} processes lack the expected environment: PIDs {bad}"
    elif result["schedulers"] < opts.min_schedulers:
        result["error"] = (f"{result['schedulers']} scheduler workers (sglang::scheduler*) in {group}, "
                           f"expected at least {opts.min_schedulers}")
    result["ok"] = result["error"] is None
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def _worker_env(procs):
    """{pid: (command line, env or None)} of every process in the unit -> summary over the NCCL workers (the
    sglang::scheduler processes; every process when none is titled so): one env when they all agree, else the
    per-worker differences. env None = the process exited before it was read."""
    titled = [pid for pid, (title, _env) in procs.items() if (title or "").startswith(WORKER_TITLE)]
    workers = sorted(titled) if titled else sorted(procs)
    envs = {pid: procs[pid][1] for pid in workers if procs[pid][1] is not None}
    distinct = {tuple(sorted(e.items())) for e in envs.values()}
    summary = {"pids": sorted(procs), "worker_pids": sorted(envs), "workers_titled": bool(titled),
               "pids_with_vars": sorted(pid for pid, (_t, env) in procs.items() if env),
               "consistent": len(distinct) == 1}
    if len(distinct) == 1:
        summary["env"] = dict(next(iter(distinct)))
    else:
        summary["env"] = {}
        summary["per_pid"] = {str(pid): env for pid, env in sorted(envs.items())}
    return summary


def cmd_worker_env():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang worker-env")
    parser.add_argument("--unit", required=True)
    parser.add_argument("--prefix", action="append", default=[])
    opts = parser.parse_args(sys.argv[2:])
    result = {"ok": False, "unit": opts.unit, "control_group": None, "error": None}
    try:
        group = _control_group(opts.unit)
    except UnitError as exc:
        return _failed(result, str(exc))
    result["control_group"] = group
    path = _cgroup_dir(group) if group else None
    if path is None:
        result["error"] = (f"unit {opts.unit} has no cgroup ({group!r} under any of {', '.join(CGROUP_ROOTS)}): "
                           "is the server running?")
        print(json.dumps(result))
        return 1
    prefixes = tuple(opts.prefix)
    procs = {pid: (cmdline, None if environ is None else {k: v for k, v in environ.items() if k.startswith(prefixes)})
             for pid, cmdline, environ in _processes(path)}
    if not procs:
        result["error"] = f"unit {opts.unit} has no process"
        print(json.dumps(result))
        return 1
    result.update(_worker_env(procs), ok=True)
    print(json.dumps(result))
    return 0
