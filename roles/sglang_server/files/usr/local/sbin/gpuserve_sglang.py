#!/usr/bin/python3
# Managed by Ansible (gpuserve.sglang.sglang_server).
"""Helpers of the sglang_server role inside the container: one file, one copy task, stdlib only.

  gpuserve-sglang exec ARGS_FILE -- ENTRYPOINT [ARGS...]
      ExecStart of sglang.service: exec the entrypoint with the argv kept in ARGS_FILE (JSON {"argv": [...]}).
      No shell, no word splitting, no expansion; the process keeps its PID (systemd's main PID is the server).
  <venv>/bin/python gpuserve-sglang validate-args (--args-file PATH | --argv-json JSON) [--check-model]
          [--env-file F] [--record FILE [--record-read-only] --src DIR] [--venv DIR] [--lib DIR]
      Check the argv as far as it can be checked without a GPU, with the installed SGLang: its parser
      (prepare_server_args), full flag names (argparse accepts an unambiguous prefix today and rejects it once SGLang
      adds a second flag with that prefix, as --cuda-graph-max-bs in 0.5.22), the values SGLang checks only once it
      runs (START_ONLY_RANGES), its start checks for any model (resolve_once on a copy with model_path 'dummy'), the
      speculative algorithm's name, and with --check-model each model directory (config.json, SGLang's config
      loader). F's variables are set first (the unit's EnvironmentFile). With --record, a passed check is recorded
      with a key of its inputs (the install as _install_fingerprint takes it, the argv, the model files, SGLANG_*
      variables, this file); while they hold, SGLang is not imported and the result says since when
      (`cached_since`); a failed check removes the record; --record-read-only never writes it.
      Every run, cached or not, also binds a TCP socket to the argv's --host (SGLang's default 127.0.0.1) and port
      0 here (`listen`): an address this container lacks makes SGLang 0.5.23 hang in its torch.distributed init,
      not fail, so it is refused before anything is stopped.
      Exit 0 ok, 2 rejected (SGLang's own message, or which setting and why), 3 SGLang not importable.
  gpuserve-sglang env-proof --unit U [--env-file F] [--expected-json J] [--min-schedulers N]
      Every process of the unit's control group (and sub-groups) carries every expected variable, by value, in
      /proc/PID/environ: the exec-time environment; SGLang's workers are exec'd by multiprocessing 'spawn', so
      theirs is what NCCL reads at init. Expected = the env file's variables plus J; a file that disagrees with
      J is reported. Counts sglang::scheduler* workers. Exit 0 proven, 1 not.
  gpuserve-sglang worker-env --unit U [--prefix P...]
      What the benchmark records as the NCCL environment of a run: every process of the unit's control group
      with its variables whose names start with a P; the sglang::scheduler* workers' (every process's when none
      is titled so) as one env when they agree, else per worker. Exit 0 read, 1 no control group or no process.
  gpuserve-sglang source --src DIR [--lib DIR]
      The SGLang tree's commit and local changes (git status, untracked files included), read by the collection's
      one reader of "which commit runs, is it dirty" (_git_tree, sent with the gate; sglang_install sends the
      same file): for the restart decision, the manifest and the benchmark. Exit 0, 1 when git fails.
  gpuserve-sglang wait-ready --port P [--host H] [--budget S] [--unit U] [--listen-timeout L]
      Wait at most S seconds for /health_generate 200; stop early when the unit is not running, or when nothing
      listens on the port L seconds after the server's main process started. Called once a minute by a retry loop,
      so a 30-minute load prints a progress line a minute. Exit 0 ready, 3 not yet, 4 the unit is not running,
      5 not listening after L s.
  gpuserve-sglang state --unit U --src DIR [--file PATH...] [--manifest PATH] [--python PATH] [--lib DIR]
      Everything the restart decision reads, in one call: the tree as `source` reads it, sha1 of each file
      (the same checksum Ansible's stat returns), the manifest, the unit's state.
  gpuserve-sglang driver [--nvidia-smi PATH] [--timeout S] [--lib DIR]
      The NVIDIA driver version every GPU in this container reports, for the manifest: the collection's own
      nvidia-smi query and parser (_nvidia_smi, sent with the gate), under coreutils timeout. {"driver_version"}.
  gpuserve-sglang gate --expected-count N [--max-used-mib M] [--timeout S] [--lib DIR]
      ExecStartPre of sglang.service: the zero-memory gate on this container's GPUs (every GPU its nvidia-smi
      lists, exactly N of them), so `systemctl restart`, a boot or a crash restart never launches on GPUs that
      still hold memory. It is the collection's own gate (_gate.run_gate and _nvidia_smi, sent into DIR by the
      role), run with the runner below. Exit 0 passed, 1 not (the message names the holders and what to do).
  gpuserve-sglang lock acquire --owner-json J [--path P] [--ttl S] [--wait S] [--steal TOKEN]
  gpuserve-sglang lock release --token T [--path P]
  gpuserve-sglang lock status [--path P]
      The container's lifecycle lock: one run at a time restarts this server. `acquire` takes flock(LOCK_EX) on P
      and hands the open file to a holder process (`lock hold`), which keeps it until `release`, its lease (--ttl)
      ends, or it dies: the kernel drops a flock with its last holder, so a crash or a reboot leaves no lock. The
      owner (the Ansible run J, the holder PID, a token, since, expires) is written into P. Held by another run:
      waits up to --wait seconds, then exits 2 with the owner and a message naming it. --steal TOKEN ends the
      holder of exactly that token (a run known to be dead); a holder past its lease is ended too. Exit 0 taken.
Each prints one JSON object on stdout.
"""
import argparse
import contextlib
import difflib
import fcntl
import hashlib
import importlib
import io
import json
import math
import os
import re
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def cmd_exec(argv):
    """exec ARGS_FILE -- ENTRYPOINT...: exec the entrypoint with the argv from the args file."""
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: gpuserve-sglang exec ARGS_FILE -- ENTRYPOINT [ARGS...]\n")
        return 64
    with open(argv[1], encoding="utf-8") as handle:
        args = json.load(handle).get("argv")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        sys.stderr.write(f"gpuserve-sglang exec: {argv[1]}: 'argv' must be a list of strings\n")
        return 65
    entry = argv[3:]
    sys.stderr.write(f"gpuserve-sglang exec: exec {json.dumps(entry + args)}\n")
    sys.stderr.flush()
    os.execv(entry[0], entry + args)
    return 127  # not reached


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _load(opts):
    if opts.args_file:
        with open(opts.args_file, encoding="utf-8") as handle:
            argv = json.load(handle).get("argv")
    else:
        argv = json.loads(opts.argv_json)
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a list of strings")
    return argv


def _sglang_message(text, exc):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    if errors:
        return errors[-1]
    if lines:
        return lines[-1]
    return f"{type(exc).__name__}: {exc}"


# Values SGLang's parser accepts and SGLang refuses, or fails on, only once the server runs (after the weights load,
# minutes on a large model), checked on the parsed arguments: (field, lowest, lowest excluded, highest, highest
# excluded, integer, what it is). Unset (None) is SGLang's own default and passes.
START_ONLY_RANGES = (
    ("port", 1, False, 65535, False, True, "the TCP port the server binds, once its weights are loaded"),
    ("mem_fraction_static", 0, True, 1, True, False,
     "the share of each GPU's memory for the weights and the KV cache; SGLang sizes its pools with it once the "
     "weights are loaded, and the rest of the memory is what activations and CUDA graphs run in"),
    ("tp_size", 1, False, None, False, True, "tensor-parallel GPUs"),
    ("pp_size", 1, False, None, False, True, "pipeline-parallel stages"),
    ("dp_size", 1, False, None, False, True, "data-parallel replicas"),
    ("max_running_requests", 1, False, None, False, True, "requests in a batch"),
    ("speculative_num_steps", 1, False, None, False, True, "draft steps per verify"),
    ("speculative_eagle_topk", 1, False, None, False, True, "draft branches per step"),
    ("speculative_num_draft_tokens", 1, False, None, False, True, "tokens verified per step"),
)
ARGS_CHECK_MODULE = "sglang.srt.server_args"
# Passed checks kept in the record: the benchmark's arms and a rollback alternate between a few argument sets.
ARGS_RECORD_KEEP = 16
# What a model directory's check reads besides config.json: the remote code a trust_remote_code config loads.
MODEL_CODE_SUFFIX = ".py"


def _flag(field):
    return "--" + field.replace("_", "-")


def _range_problem(field, value, low, low_open, high, high_open, integer, what):
    """What is wrong with a parsed value of `field`, or None."""
    if value is None:
        return None
    kind = "a whole number" if integer else "a number"
    bounds = []
    if low is not None:
        bounds.append(("above %s" if low_open else "at least %s") % low)
    if high is not None:
        bounds.append(("below %s" if high_open else "at most %s") % high)
    wrong = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
        (integer and value != int(value))
    if not wrong:
        wrong = (low is not None and (value <= low if low_open else value < low)) or \
                (high is not None and (value >= high if high_open else value > high))
    if not wrong:
        return None
    return "%s (%s) is %r: it must be %s %s (%s)" % (field, _flag(field), value, kind, " and ".join(bounds), what)


def _model_files(path):
    """{file: sha256} of what checking the model directory `path` reads (config.json, the remote code beside it).
    Raises ValueError naming what is wrong."""
    if not os.path.isdir(path):
        raise ValueError("%s is not a directory in this container" % path)
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise ValueError("cannot list %s: %s" % (path, exc.strerror or exc)) from None
    config = os.path.join(path, "config.json")
    try:
        with open(config, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ValueError("cannot read %s: %s" % (config, exc.strerror or exc)) from None
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise ValueError("%s is not JSON: %s" % (config, exc)) from None
    archs = parsed.get("architectures") if isinstance(parsed, dict) else None
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) and a for a in archs):
        raise ValueError("%s names no architectures (SGLang picks the model class by its first)" % config)
    files = {config: hashlib.sha256(data).hexdigest()}
    for name in names:
        full = os.path.join(path, name)
        if name.endswith(MODEL_CODE_SUFFIX) and os.path.isfile(full):
            try:
                with open(full, "rb") as handle:
                    files[full] = hashlib.sha256(handle.read()).hexdigest()
            except OSError as exc:
                raise ValueError("cannot read %s: %s" % (full, exc.strerror or exc)) from None
    return files


def _model_dirs(record):
    """{field: path} of the model directories SGLang reads the config of at start."""
    dirs = {}
    for field in ("model_path", "speculative_draft_model_path"):
        path = getattr(record, field, None)
        if isinstance(path, str) and path and path.lower() not in ("dummy", "none"):
            dirs[field] = path
    return dirs


def _check_model(record, result):
    """The model directories: readable, a config.json SGLang's own loader takes. Error message or None."""
    files = {}
    for field, path in _model_dirs(record).items():
        try:
            files.update(_model_files(path))
        except ValueError as exc:
            return "%s (%s): %s" % (field, _flag(field), exc), {}
        try:
            from sglang.srt.utils.hf_transformers_utils import get_config
        except ImportError:
            continue  # an SGLang without this loader: the files were checked above
        try:
            get_config(path, trust_remote_code=bool(getattr(record, "trust_remote_code", False)))
        except Exception as exc:  # what SGLang would fail on at start, before any weight is read
            first = (str(exc).strip().splitlines() or [""])[0]
            return "%s (%s): SGLang cannot load the model config in %s: %s: %s" % (
                field, _flag(field), path, type(exc).__name__, first), {}
    result["model"] = _model_dirs(record)
    return None, files


def _sglang_checks(argv, result, check_model):
    """SGLang's checks of argv, as far as they run without a GPU: its parser, full flag names, the values it checks
    only once it runs, its argument resolution up to the model (the checks it makes for any model), the
    speculative algorithm's name and, with check_model, the model directories. Fills result; returns (rc, model
    files read)."""
    try:
        import sglang
        from sglang.srt.server_args import ServerArgs, prepare_server_args
        result["sglang_version"] = getattr(sglang, "__version__", None)
    except Exception as exc:  # any import failure means we cannot vouch for the arguments
        result["error"] = f"cannot import sglang.srt.server_args: {type(exc).__name__}: {exc}"
        return 3, {}

    captured = io.StringIO()
    with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
        try:
            record = prepare_server_args(list(argv))
        except SystemExit as exc:
            if exc.code not in (0, None):
                result["error"] = _sglang_message(captured.getvalue(), exc)
                return 2, {}
            record = None  # --help, --version: SGLang exits before it checks anything more
        except Exception as exc:  # an older ServerArgs.__post_init__ raised plain exceptions for bad combinations
            result["error"] = f"{type(exc).__name__}: {exc}"
            return 2, {}
        result["checks"].append("parser")
        try:
            error, files = _after_parse(argv, record, result, check_model, ServerArgs, prepare_server_args)
        finally:
            plain = _ANSI.sub("", captured.getvalue())
            # once each: the start checks parse the arguments a second time, and SGLang warns again
            result["warnings"] = list(dict.fromkeys(
                line.strip() for line in plain.splitlines()
                if re.search(r"deprecat|\bwarning\b", line, re.IGNORECASE)
            ))
    if error:
        result["error"] = error
        return 2, {}
    return 0, files


def _after_parse(argv, record, result, check_model, server_args_class, prepare_server_args):
    """The checks after SGLang's parser, in order; (the first error or None, model files read)."""
    checks = result["checks"]
    probe = argparse.ArgumentParser(prog="sglang serve")
    server_args_class.add_cli_args(probe)
    known = set(probe._option_string_actions)  # pylint: disable=protected-access
    for token in argv:
        flag = token.split("=", 1)[0]
        if token.startswith("--") and flag not in known:
            close = difflib.get_close_matches(flag, sorted(known), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            return f"{flag} is not a full SGLang flag name; abbreviations are refused{hint}", {}
    checks.append("full flag names")
    if record is None:
        return None, {}
    for rule in START_ONLY_RANGES:
        problem = _range_problem(rule[0], getattr(record, rule[0], None), *rule[1:])
        if problem:
            return problem, {}
    checks.append("values SGLang checks only once it runs")
    # SGLang 0.5.23 resolves its arguments when it starts (ServerArgs.resolve_once); the checks that hold for any model
    # run before its pipeline returns for a dummy model, so a copy with model_path 'dummy' runs exactly those, with
    # no model and no GPU. An SGLang without resolve_once made its checks in the parser (ServerArgs.__post_init__).
    if hasattr(record, "resolve_once"):
        try:
            dummy = prepare_server_args(list(argv))
            dummy.model_path = "dummy"
            dummy.resolve_once()
        except (Exception, SystemExit) as exc:  # SGLang raises plain exceptions, or exits
            return f"{type(exc).__name__}: {exc} (SGLang's checks at start that hold for any model)", {}
        checks.append("SGLang's start checks for any model")
    algorithm = getattr(record, "speculative_algorithm", None)
    if algorithm is not None:
        try:
            from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
        except ImportError:
            SpeculativeAlgorithm = None
        if SpeculativeAlgorithm is not None:
            try:
                SpeculativeAlgorithm.from_string(algorithm)
            except ValueError as exc:
                return (f"speculative_algorithm (--speculative-algorithm) is {algorithm!r}: SGLang refuses it at "
                        f"start ({exc})"), {}
            checks.append("speculative algorithm")
    if not check_model:
        return None, {}
    problem, files = _check_model(record, result)
    if problem:
        return problem, {}
    checks.append("model config")
    return None, files


def _args_key(opts, argv):
    """sha256 of everything the argument check's answer depends on except the model files (checked per entry), or
    None, then the check always runs: the SGLang install (the collection's one recipe, _install_fingerprint, with the
    tree read by _git_tree), the argv, whether the models are checked, the SGLANG_* variables the check ran with,
    and this helper itself."""
    try:
        fingerprint = _collection_module("_install_fingerprint", opts.lib)
        tree = _git_source(opts.src, opts.lib)
    except (ImportError, OSError):  # the collection's files not (yet) beside the helper, or no git
        return None
    python = os.path.join(opts.venv, "bin", "python")
    try:
        probe = subprocess.run(fingerprint.probe_argv(python), capture_output=True, text=True, check=False)
    except OSError:
        return None
    install = fingerprint.install_fingerprint(tree, probe.returncode, probe.stdout,
                                              fingerprint.pyvenv_cfg_digest(opts.venv), ARGS_CHECK_MODULE)
    if install is None:
        return None
    with open(os.path.abspath(__file__), "rb") as handle:
        helper = hashlib.sha256(handle.read()).hexdigest()
    env = {k: v for k, v in os.environ.items() if k.startswith(("SGLANG_", "SGL_"))}
    inputs = {"install": install, "argv": argv, "check_model": bool(opts.check_model), "env": env, "helper": helper}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _read_args_record(path):
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return []
    passed = record.get("passed") if isinstance(record, dict) else None
    return [e for e in passed if isinstance(e, dict) and e.get("key")] if isinstance(passed, list) else []


def _cached_pass(path, key):
    """The record's entry for key whose model files still read the same, or None."""
    for entry in _read_args_record(path):
        if entry["key"] != key:
            continue
        files = {}
        try:
            for model_dir in (entry.get("model_dirs") or {}).values():
                files.update(_model_files(model_dir))
        except ValueError:
            return None
        return entry if files == (entry.get("model_files") or {}) else None
    return None


def _record_pass(path, entry):
    """Adds entry to the record (the newest ARGS_RECORD_KEEP kept); a record that cannot be written is only a cache
    lost (a full disk: the restart's own room check says so next): the error, or None."""
    kept = [e for e in _read_args_record(path) if e["key"] != entry["key"]][-(ARGS_RECORD_KEEP - 1):]
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"schema": 1, "module": ARGS_CHECK_MODULE, "passed": kept + [entry]}, handle)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return f"not recorded: {exc}"
    return None


# SGLang's --host default (ServerArgs.host), where the argv names none.
SGLANG_DEFAULT_HOST = "127.0.0.1"


def _listen_host(argv):
    """The address the server will listen on: the argv's last --host (the only spelling the flag check lets through;
    a cached pass had its flags checked), else SGLang's default."""
    host = SGLANG_DEFAULT_HOST
    for i, token in enumerate(argv):
        if token == "--host" and i + 1 < len(argv):
            host = argv[i + 1]
        elif token.startswith("--host="):
            host = token.split("=", 1)[1]
    return host


def _listen_check(host, resolve=socket.getaddrinfo, make_socket=socket.socket):
    """Whether a TCP socket binds to host here, as the server's will: {host, addresses, ok, error}. The addresses are
    those host resolves to in this container (an IPv4 or IPv6 literal is itself; '' is every address), each bound
    in its own family, port 0: the running server holds the real port, which is expected. SGLang 0.5.23 does not
    fail on an address the container lacks: it hangs in its torch.distributed init at tcp://HOST:PORT (no
    dist_init_addr), so the lifecycle would stop the working server and roll back only after
    sglang_server_listen_timeout. Only this node's own listen address: a multi-node dist_init_addr is rank 0's."""
    result = {"host": host, "addresses": [], "ok": False, "error": None}
    try:
        found = resolve(host or None, 0, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        result["error"] = "%r does not resolve in this container: %s" % (host, getattr(exc, "strerror", None) or exc)
        return result
    seen = []
    for family, kind, proto, _name, address in found:
        if (family, address[0]) in seen:
            continue
        seen.append((family, address[0]))
        try:
            sock = make_socket(family, kind, proto)
        except OSError:
            continue  # a family this kernel lacks (IPv6 off): the server skips it too
        try:
            sock.bind(address)  # port 0 already (resolved with it); an IPv6 address keeps its scope
        except OSError as exc:
            result["error"] = "cannot bind %s (port 0) in this container: [Errno %s] %s" % (
                address[0], exc.errno, exc.strerror or exc)
            return result
        finally:
            sock.close()
        result["addresses"].append(address[0])
    if not result["addresses"]:
        result["error"] = "%r resolves to no address this container can open a socket for" % host
        return result
    result["ok"] = True
    return result


def cmd_validate_args():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang validate-args")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--args-file")
    source.add_argument("--argv-json")
    parser.add_argument("--check-model", action="store_true")
    parser.add_argument("--env-file")
    parser.add_argument("--record")
    parser.add_argument("--record-read-only", action="store_true")
    parser.add_argument("--src")
    parser.add_argument("--venv", default=sys.prefix)
    parser.add_argument("--lib", default=GATE_LIB)
    opts = parser.parse_args(sys.argv[2:])
    if opts.record and not opts.src:
        parser.error("--record needs --src (the SGLang tree the install fingerprint reads)")
    result = {"ok": False, "sglang_version": None, "argv": None, "warnings": [], "error": None, "checks": [],
              "cached_since": None}
    rc, key, files = 2, None, {}
    try:
        result["argv"] = argv = _load(opts)
    except (OSError, ValueError) as exc:
        result["error"] = f"cannot read the arguments: {exc}"
    else:
        # the server's environment (the unit's EnvironmentFile; it refuses to start without one, so none yet is no
        # error here): SGLang reads SGLANG_* variables as it checks
        with contextlib.suppress(FileNotFoundError):
            os.environ.update(_env_file(opts.env_file) if opts.env_file else {})
        key = _args_key(opts, argv) if opts.record else None
        cached = _cached_pass(opts.record, key) if key else None
        if cached:
            rc = 0
            result.update(sglang_version=cached.get("sglang_version"), warnings=cached.get("warnings") or [],
                          checks=cached.get("checks") or [], cached_since=cached.get("proven_at"))
            if cached.get("model_dirs"):
                result["model"] = cached["model_dirs"]
        else:
            rc, files = _sglang_checks(argv, result, opts.check_model)
    sglang_rc = rc
    if result["argv"] is not None:
        # not part of the record: the container's addresses are no input of SGLang's checks, and may change
        result["listen"] = _listen_check(_listen_host(argv))
        if not result["listen"]["ok"]:
            result["error"] = result["error"] or "--host %s: %s" % (result["listen"]["host"], result["listen"]["error"])
            rc = rc or 2
    result["ok"] = rc == 0
    if opts.record and not opts.record_read_only:
        if sglang_rc == 0 and key and not result["cached_since"]:
            problem = _record_pass(opts.record, {
                "key": key, "proven_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "sglang_version": result["sglang_version"], "warnings": result["warnings"], "checks": result["checks"],
                "model_dirs": result.get("model", {}), "model_files": files})
            if problem:
                result["record"] = problem
        elif sglang_rc != 0:
            with contextlib.suppress(OSError):  # none yet; or where it cannot go, none was written either
                os.unlink(opts.record)
    print(json.dumps(result))
    if sglang_rc == 2 and result["argv"] is not None:  # a refusal of the arguments (not: unreadable, SGLang absent)
        sys.stderr.write(f"SGLang {result['sglang_version']} rejected the arguments: {result['error']}\n")
    if not result.get("listen", {"ok": True})["ok"]:
        sys.stderr.write(f"gpuserve-sglang validate-args: the server could not listen: {result['listen']['error']}\n")
    return rc


# SGLang names its tensor-parallel workers with setproctitle ("sglang::scheduler_TP0", ...): they are the processes
# that run NCCL. The launcher's own environ is its START environment: SGLang then sets NCCL_CUMEM_ENABLE,
# CUDA_DEVICE_MAX_CONNECTIONS, ... in os.environ for its children, so the launcher legitimately differs from them.
WORKER_TITLE = "sglang::scheduler"
TITLE_PREFIX = "sglang::"  # every title SGLang sets (scheduler, detokenizer, ...)
# cgroup v2, then systemd's hybrid layout (v2 under unified/, as in an LXC container on a v1 host), then v1
CGROUP_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd")


def _control_group(unit):
    out = subprocess.run(
        ["systemctl", "show", "--property=ControlGroup", "--value", unit],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    return out


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
    group = _control_group(opts.unit)
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
    except subprocess.CalledProcessError as exc:
        result["error"] = f"systemctl show {opts.unit} failed: {(exc.stderr or exc.stdout or '').strip()}"
        print(json.dumps(result))
        return 1
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


def _unit_state(unit):
    out = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def _main_started(unit):
    """When the unit's main process (the server, after ExecStartPre's gate) started, on CLOCK_MONOTONIC, which the
    container shares with systemd: seconds, or None when systemd has no such time (not started yet)."""
    out = subprocess.run(["systemctl", "show", unit, "--property=ExecMainStartTimestampMonotonic", "--value"],
                         capture_output=True, text=True, check=False)
    value = out.stdout.strip()
    return int(value) / 1e6 if value.isdigit() and int(value) > 0 else None


def _probe(host, port, path, timeout):
    try:
        with socket.create_connection((host, port), timeout=2):
            pass
    except OSError:
        return "port closed", None
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout) as resp:
            return f"HTTP {resp.status}", resp.status
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}", exc.code
    except (OSError, urllib.error.URLError) as exc:
        return f"port open, {path} failed: {exc}", None


def cmd_wait_ready():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang wait-ready")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/health_generate")
    parser.add_argument("--budget", type=float, default=60)
    parser.add_argument("--interval", type=float, default=2)
    parser.add_argument("--request-timeout", type=float, default=30)
    parser.add_argument("--unit", default="sglang.service")
    parser.add_argument("--listen-timeout", type=float, default=0)
    opts = parser.parse_args(sys.argv[2:])

    start = time.monotonic()
    state, phase, status = "unknown", "not probed", None
    main_started = None
    while True:
        state = _unit_state(opts.unit)
        if state not in ("active", "activating", "reloading"):
            print(json.dumps({"ready": False, "unit": state, "phase": f"{opts.unit} is {state}",
                              "status": status, "waited_s": round(time.monotonic() - start, 1)}))
            return 4
        phase, status = _probe(opts.host, opts.port, opts.path, opts.request_timeout)
        if status == 200:
            print(json.dumps({"ready": True, "unit": state, "phase": phase, "status": status,
                              "waited_s": round(time.monotonic() - start, 1)}))
            return 0
        # Nothing listens on the port: past --listen-timeout seconds from the server's own start (not from this
        # call: the lifecycle calls once a minute), the server is not coming up (SGLang binds once its model loaded).
        if opts.listen_timeout > 0 and phase == "port closed" and state == "active":
            main_started = main_started or _main_started(opts.unit)
            up = time.monotonic() - main_started if main_started is not None else 0
            if up >= opts.listen_timeout:
                print(json.dumps({"ready": False, "unit": state, "status": status,
                                  "phase": f"nothing listens on {opts.host}:{opts.port} {up:.0f} s after the server "
                                           f"started (listen timeout {opts.listen_timeout:g} s)",
                                  "waited_s": round(time.monotonic() - start, 1)}))
                return 5
        if time.monotonic() - start + opts.interval >= opts.budget:
            break
        time.sleep(opts.interval)
    print(json.dumps({"ready": False, "unit": state, "phase": phase, "status": status,
                      "waited_s": round(time.monotonic() - start, 1)}))
    return 3


def _sha1(path):
    digest = hashlib.sha1()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _git_source(src, lib):
    """{rc, error, commit, changes, dirty} of the tree at src, read by the collection's one reader (_git_tree,
    sent with the gate code); dirty is None when git failed."""
    tree = _collection_module("_git_tree", lib)
    git = subprocess.run(tree.status_argv(src), capture_output=True, text=True, check=False)
    return tree.parse_status(git.returncode, git.stdout, git.stderr)


def cmd_source():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang source")
    parser.add_argument("--src", required=True)
    parser.add_argument("--lib", default=GATE_LIB)
    opts = parser.parse_args(sys.argv[2:])
    result = _git_source(opts.src, opts.lib)
    print(json.dumps(result))
    return 0 if result["rc"] == 0 else 1


def cmd_state():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang state")
    parser.add_argument("--unit", required=True)
    parser.add_argument("--src", required=True)
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--manifest")
    parser.add_argument("--python")
    parser.add_argument("--lib", default=GATE_LIB)
    opts = parser.parse_args(sys.argv[2:])
    result = {"git": {}, "files": {}, "manifest": None, "unit": {}, "python_exists": None}

    result["git"] = _git_source(opts.src, opts.lib)
    for path in opts.file:
        try:
            result["files"][path] = {"exists": True, "sha1": _sha1(path)}
        except FileNotFoundError:
            result["files"][path] = {"exists": False, "sha1": ""}
    if opts.manifest:
        try:
            with open(opts.manifest, encoding="utf-8") as handle:
                result["manifest"] = json.load(handle)
        except FileNotFoundError:
            pass
        except ValueError as exc:
            result["manifest"] = {"_error": f"unreadable manifest: {exc}"}
    show = subprocess.run(["systemctl", "show", opts.unit,
                           "--property=ActiveState,SubState,MainPID,ActiveEnterTimestamp,UnitFileState,LoadState"],
                          capture_output=True, text=True, check=False)
    result["unit"] = dict(line.split("=", 1) for line in show.stdout.splitlines() if "=" in line)
    if opts.python:
        result["python_exists"] = os.access(opts.python, os.X_OK)
    print(json.dumps(result))
    return 0


GATE_LIB = "/usr/local/lib/gpuserve-sglang"


class _Result:
    """What the gate reads from a command (the shape of _runner.Result, which needs ansible to import)."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err

    @property
    def timed_out(self):
        return self.rc in (124, 137)  # coreutils timeout: fired, or fired and had to SIGKILL

    @property
    def cmd(self):
        return " ".join(self.argv)


class _LocalRunner:
    """The gate's runner in the container: argv under coreutils timeout, LC_ALL=C, stdin from /dev/null.
    Not `local` for the gate: /proc/PID/cgroup inside a container cannot tell where a holder lives."""

    local = False
    target = "local"

    def run(self, argv, timeout):
        full = ["timeout", "--kill-after=1", "%gs" % timeout] + list(argv)
        try:
            # errors= makes the pipes text; surrogateescape keeps a byte that is not UTF-8 for the failure message
            out = subprocess.run(full, stdin=subprocess.DEVNULL, capture_output=True, errors="surrogateescape",
                                 env=dict(os.environ, LC_ALL="C"), check=False)
        except OSError as exc:
            return _Result(full, 127, "", str(exc))
        return _Result(full, out.returncode, out.stdout, out.stderr)


def _collection_module(name, lib):
    """The collection's own module_utils file `name`, from the copy the role sent under lib."""
    if lib not in sys.path:
        sys.path.insert(0, lib)
    return importlib.import_module("ansible_collections.gpuserve.sglang.plugins.module_utils." + name)


def cmd_driver():
    """driver: the NVIDIA driver version every GPU reports, read with the collection's own query and parser
    (_nvidia_smi, sent with the gate). Prints {"driver_version": V}; {"error": ...} and exit 1 when nvidia-smi
    fails, hangs past --timeout, or the GPUs disagree."""
    parser = argparse.ArgumentParser(prog="gpuserve-sglang driver")
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("--lib", default=GATE_LIB)
    opts = parser.parse_args(sys.argv[2:])
    smi = _collection_module("_nvidia_smi", opts.lib)
    res = _LocalRunner().run(smi.driver_query(opts.nvidia_smi), opts.timeout)
    try:
        smi.check_result(res, "nvidia-smi driver_version query")
        version = smi.parse_driver_version(res.out)
    except smi.SmiError as exc:
        print(json.dumps({"error": exc.msg}))
        return 1
    print(json.dumps({"driver_version": version}))
    return 0


def cmd_gate():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang gate")
    parser.add_argument("--expected-count", type=int, required=True)
    parser.add_argument("--max-used-mib", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--poll-interval", type=float, default=0.2)
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--nvidia-smi-timeout", type=float, default=10)
    parser.add_argument("--lib", default=GATE_LIB)
    opts = parser.parse_args(sys.argv[2:])
    _gate = _collection_module("_gate", opts.lib)
    params = {key: spec.get("default") for key, spec in _gate.GATE_ARGS.items()}
    params.update(expected_count=opts.expected_count, max_used_mib=opts.max_used_mib, timeout=opts.timeout,
                  poll_interval=opts.poll_interval, nvidia_smi=opts.nvidia_smi,
                  nvidia_smi_timeout=opts.nvidia_smi_timeout)
    try:
        result = _gate.run_gate(None, params, runner=_LocalRunner())
    except _gate.GateFailed as exc:
        result = dict(exc.result, error=exc.msg)
        sys.stderr.write(
            "gpuserve-sglang gate: not starting, %s. PIDs are as this container sees them. To free the GPUs and "
            "restart with proof, run the gpuserve lifecycle (playbooks/restart_server.yml); to see who holds them, "
            "`fuser -v /dev/nvidia*` here and `nvidia-smi` on the PVE host.\n" % exc.msg)
        print(json.dumps(result))
        return 1
    sys.stderr.write("gpuserve-sglang gate: %d GPU(s) at or under %d MiB after %d poll(s) in %.2f s\n"
                     % (len(result["gpus"]), opts.max_used_mib, result["polls"], result["elapsed_s"]))
    print(json.dumps(result))
    return 0


LOCK_PATH = "/run/gpuserve/sglang-lifecycle.lock"
HOLDER_START_S = 10  # a holder not running after this long is ended; the acquire fails


def _iso(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _read_owner(path):
    """The owner written into the lock file; {} when there is none; {"_unreadable": text} when it is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return {}
    if not text.strip():
        return {}
    try:
        owner = json.loads(text)
    except ValueError:
        owner = None
    return owner if isinstance(owner, dict) else {"_unreadable": text[:200]}


def _try_flock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _is_holder(owner):
    """The owner's holder PID is still our `lock hold` process of its token (not a PID reused since)."""
    pid, token = owner.get("holder_pid"), owner.get("token")
    if not isinstance(pid, int) or pid <= 1 or not token:
        return False
    try:
        argv = _read(pid, "cmdline").split(b"\0")
    except OSError:
        return False
    return b"hold" in argv and b"--token" in argv and argv[argv.index(b"--token") + 1:][:1] == [token.encode()]


def _holder_gone(owner):
    """The owner's holder has exited, its files (and with them the flock) closed: no such PID, a zombie, or the
    PID reused by another program. An exiting holder whose files are still open reads as an empty cmdline, not
    yet as a zombie, so an empty cmdline alone proves nothing."""
    pid = owner.get("holder_pid")
    if not isinstance(pid, int) or pid <= 1:
        return False
    try:
        state = _read(pid, "stat").rsplit(b")", 1)[1].split()[0]
        argv = _read(pid, "cmdline")
    except (OSError, IndexError):
        return True
    return state in (b"Z", b"X") or (argv != b"" and not _is_holder(owner))


def _end_holder(owner):
    """SIGTERM to the owner's holder when it is verifiably ours; True when signalled."""
    if not _is_holder(owner):
        return False
    try:
        os.kill(owner["holder_pid"], signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


def _owner_message(owner, path, waited):
    if not owner or "_unreadable" in owner:
        return ("the lifecycle lock %s is held, and its owner is not written (yet): %s; waited %.0f s"
                % (path, owner.get("_unreadable", "empty"), waited))
    run = owner.get("run") or {}
    return ("the lifecycle lock %s is held by another run: ansible-playbook PID %s on %s (user %s, %s, play %r), "
            "started %s; lock taken %s, its lease ends %s; holder PID %s here. Waited %.0f s. Wait for that run "
            "(sglang_server_lock_wait), or, if it is dead (killed on another machine), take the lock over with "
            "-e sglang_server_lock_steal=%s"
            % (path, run.get("pid", "?"), run.get("host", "?"), run.get("user", "?"),
               " ".join(run.get("playbooks") or []) or "playbook unknown", run.get("play", "?"),
               run.get("started", "?"), owner.get("since", "?"), owner.get("expires_at", "?"),
               owner.get("holder_pid", "?"), waited, owner.get("token", "?")))


def _spawn_holder(fd, token, until):
    """Fork a `lock hold` process that inherits fd (and with it the flock); returns its PID once it runs."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own session, no stdio of the caller (a pct exec waits for those to close)
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            # no other file of the caller's: a descriptor leaked into it (a flock(1)'s, a pipe) would live as
            # long as the lease. Only non-empty ranges: os.closerange(n, n) may close everything from n on.
            keep = sorted({2, fd, ready_w})
            for low, high in zip([n + 1 for n in keep], keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
                if low < high:
                    os.closerange(low, high)
            os.set_inheritable(fd, True)
            os.set_inheritable(ready_w, True)
            # fd stays open across the exec (inheritable) and is never touched again: holding it is the lock
            os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "lock", "hold",
                                      "--ready-fd", str(ready_w), "--token", token, "--until", "%.3f" % until])
        finally:
            os._exit(127)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        started = bool(select.select([ready], [], [], HOLDER_START_S)[0]) and ready.read(2) == b"ok"
    if not started:  # its exec failed, or it hangs before it runs: end it, reap it
        if pid > 1:  # never 0 (this whole process group) or 1, whatever went wrong above
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
        return None
    return pid


def _lock_acquire(opts):
    os.makedirs(os.path.dirname(opts.path), exist_ok=True)
    fd = os.open(opts.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    start = time.monotonic()
    deadline = start + opts.wait
    ended = []
    try:
        while not _try_flock(fd):
            owner = _read_owner(opts.path)
            lease_over = isinstance(owner.get("expires"), (int, float)) and owner["expires"] < time.time()
            if ((opts.steal and owner.get("token") == opts.steal) or lease_over) and _end_holder(owner):
                if not ended:  # once: a holder that ignores SIGTERM must not keep this wait open for ever
                    deadline = max(deadline, time.monotonic() + 5)  # the holder's exit frees the lock within ms
                if owner not in ended:
                    ended.append(owner)
            now = time.monotonic()
            if now >= deadline:
                print(json.dumps({"acquired": False, "owner": owner, "waited_s": round(now - start, 1),
                                  "message": _owner_message(owner, opts.path, now - start)}))
                return 2
            time.sleep(min(opts.interval, deadline - now))
        waited = round(time.monotonic() - start, 1)
        stale = _read_owner(opts.path)  # left by a holder that died without release (killed, container reboot)
        now = time.time()
        token = secrets.token_hex(8)
        pid = _spawn_holder(fd, token, now + opts.ttl)
        if pid is None:
            print(json.dumps({"acquired": False, "owner": {}, "waited_s": waited,
                              "message": "the lock holder process did not start"}))
            return 1
        owner = {"token": token, "holder_pid": pid, "since": _iso(now), "expires": round(now + opts.ttl, 3),
                 "expires_at": _iso(now + opts.ttl), "run": json.loads(opts.owner_json)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        os.fsync(fd)
    finally:
        os.close(fd)  # the holder's copy of the open file keeps the lock
    print(json.dumps({"acquired": True, "token": token, "owner": owner, "waited_s": waited,
                      "cleared": stale or None, "ended": ended}))
    return 0


def _lock_release(opts):
    owner = _read_owner(opts.path)
    if owner.get("token") != opts.token:
        print(json.dumps({"released": False, "owner": owner,
                          "reason": "the lock is not held with this token (its lease ended, or it was taken over)"}))
        return 0
    _end_holder(owner)
    fd = os.open(opts.path, os.O_RDWR | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + opts.wait
        locked = _try_flock(fd)
        while not locked:
            if _holder_gone(owner):
                # Gone means its files are closed. It may have exited just after the look above: look once more.
                # Still taken: a waiting run took it the moment it was free; that run's owner is not ours to clear.
                locked = _try_flock(fd)
                break
            if time.monotonic() >= deadline:
                print(json.dumps({"released": False, "owner": owner, "reason": "the holder did not exit"}))
                return 1
            time.sleep(opts.interval)
            locked = _try_flock(fd)
        if locked and _read_owner(opts.path).get("token") == opts.token:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    print(json.dumps({"released": True, "owner": owner}))
    return 0


def _lock_status(opts):
    try:
        fd = os.open(opts.path, os.O_RDONLY)  # flock needs no write access; nothing is exec'd here
    except FileNotFoundError:
        print(json.dumps({"held": False, "owner": {}}))
        return 0
    try:
        held = not _try_flock(fd)
    finally:
        os.close(fd)
    print(json.dumps({"held": held, "owner": _read_owner(opts.path) if held else {}}))
    return 0


def _lock_hold(opts):
    os.write(opts.ready_fd, b"ok")
    os.close(opts.ready_fd)
    while True:  # SIGTERM's default action ends it; the flock goes with it
        left = opts.until - time.time()
        if left <= 0:
            return 0
        time.sleep(min(left, 60))


def cmd_lock():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang lock")
    sub = parser.add_subparsers(dest="action", required=True)
    acquire = sub.add_parser("acquire")
    acquire.add_argument("--owner-json", required=True)
    acquire.add_argument("--ttl", type=float, default=3600)
    acquire.add_argument("--wait", type=float, default=0)
    acquire.add_argument("--steal", default="")
    release = sub.add_parser("release")
    release.add_argument("--token", required=True)
    release.add_argument("--wait", type=float, default=10)
    status = sub.add_parser("status")
    hold = sub.add_parser("hold")
    hold.add_argument("--ready-fd", type=int, required=True)
    hold.add_argument("--token", required=True)
    hold.add_argument("--until", type=float, required=True)
    for each in (acquire, release, status, hold):
        each.add_argument("--path", default=LOCK_PATH)
        each.add_argument("--interval", type=float, default=0.5)
    opts = parser.parse_args(sys.argv[2:])
    return {"acquire": _lock_acquire, "release": _lock_release, "status": _lock_status,
            "hold": _lock_hold}[opts.action](opts)


COMMANDS = {
    "gate": cmd_gate,
    "driver": cmd_driver,
    "lock": cmd_lock,
    "validate-args": cmd_validate_args,
    "env-proof": cmd_env_proof,
    "worker-env": cmd_worker_env,
    "source": cmd_source,
    "wait-ready": cmd_wait_ready,
    "state": cmd_state,
}


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "exec":
        return cmd_exec(sys.argv[1:])
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.stderr.write("usage: gpuserve-sglang {exec,%s} ...\n" % ",".join(COMMANDS))
        return 64
    return COMMANDS[sys.argv[1]]()


if __name__ == "__main__":
    sys.exit(main())
