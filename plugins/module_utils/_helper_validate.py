# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang validate-args: the launch argv checked by the installed SGLang before anything is written or
stopped, its passes recorded by their inputs, the listen address bound and the draft's architecture checked against
the speculative algorithm (run by the venv's Python, which imports SGLang).

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package. SGLang is
imported only inside the checks; the install's fingerprint is _install_fingerprint's (sglang_install's recipe too),
the tree _helper_state._git_source's, the env file _helper_env._env_file's.
"""
import argparse
import contextlib
import difflib
import hashlib
import io
import json
import math
import os
import re
import socket
import subprocess
import sys
import time

from ansible_collections.gpuserve.sglang.plugins.module_utils import _install_fingerprint, _speculative
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_env import _env_file
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_state import _git_source

# A program run without Ansible (systemd, the role's command tasks, an operator): it prints its JSON and runs its
# commands itself, with no AnsibleModule to log or run_command through.
# pylint: disable=ansible-bad-function


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
    and the checks' own code: this file, _helper_validate.py (when the helper was one script, the whole script)."""
    try:
        tree = _git_source(opts.src)
    except OSError:  # no git
        return None
    python = os.path.join(opts.venv, "bin", "python")
    try:
        probe = subprocess.run(_install_fingerprint.probe_argv(python), capture_output=True, text=True, check=False)
    except OSError:
        return None
    install = _install_fingerprint.install_fingerprint(tree, probe.returncode, probe.stdout,
                                                       _install_fingerprint.pyvenv_cfg_digest(opts.venv),
                                                       ARGS_CHECK_MODULE)
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


def _argv_value(argv, flags, default=None):
    """The value the argv's last flag of flags gives (`--flag VALUE` or `--flag=VALUE`: the only spellings the flag
    check lets through; a cached pass had its flags checked), else default."""
    value = default
    for i, token in enumerate(argv):
        name, equals, rest = token.partition("=")
        if token in flags and i + 1 < len(argv):
            value = argv[i + 1]
        elif equals and name in flags:
            value = rest
    return value


def _listen_host(argv):
    """The address the server will listen on: the argv's last --host, else SGLang's default."""
    return _argv_value(argv, ("--host",), SGLANG_DEFAULT_HOST)


# SGLang 0.5.23's spellings of the draft's path (arg_groups/fields/spec.py: the field and its alias)
DRAFT_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model")


def _draft_architectures(path):
    """The `architectures` of the draft directory's config.json, or (None, why it could not be read)."""
    config = os.path.join(path, "config.json")
    try:
        with open(config, "rb") as handle:  # JSON's own encodings, as _model_files reads it
            parsed = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, "cannot read %s: %s" % (config, getattr(exc, "strerror", None) or exc)
    archs = parsed.get("architectures") if isinstance(parsed, dict) else None
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) and a for a in archs):
        return None, "%s names no architectures" % config
    return archs, None


def _draft_check(argv):
    """The draft against the speculative algorithm (_speculative.draft_problem): {algorithm, path, architectures,
    ok, error, unread}, or None when the argv names no algorithm or no draft. Run every time, outside the record:
    the draft's config.json may change under the same argv, and reading it is cheap. A config that cannot be read
    here (a hub id; a directory not there, with the model check off) is not judged: `unread` says why."""
    algorithm = _argv_value(argv, ("--speculative-algorithm",))
    path = _argv_value(argv, DRAFT_FLAGS)
    if not algorithm or not path:
        return None
    archs, unread = _draft_architectures(path)
    error = _speculative.draft_problem(algorithm, archs, path)
    return {"algorithm": algorithm, "path": path, "architectures": archs, "ok": error is None, "error": error,
            "unread": unread}


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
        draft = _draft_check(argv)
        if draft is not None:
            result["draft"] = draft
            if not draft["ok"]:
                result["error"] = result["error"] or draft["error"]
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
    if not result.get("draft", {"ok": True})["ok"]:
        sys.stderr.write(f"gpuserve-sglang validate-args: the draft does not fit: {result['draft']['error']}\n")
    return rc
