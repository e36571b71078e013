"""A bad setting never touches a working server: the sglang_server role's main entry point, run by
ansible-playbook against stub containers on local hosts, one per class of setting (its type, its range, a rule between
two settings, a value SGLang refuses only at start, a host the container cannot bind, a draft that does not fit its
algorithm). Each run must fail naming the setting, and leave the stub's server process (its PID), its NCCL env file,
its args file and its manifest as they were.

A stub container is a directory holding what the role reads and writes (every path the role uses is pointed into it),
a running process standing for the server, a fake `systemctl` (the unit is that process: `stop` kills it), a fake
`pct` that refuses, and a venv whose python has a small SGLang on its path (SGLang 0.5.23's seams, as in
test_gpuserve_sglang_validate_args.py). A control host with good settings that differ from the deployed ones shows the
stub would see a change: its args file is rewritten and its server stopped (nothing listens on its port, so the
lifecycle's stop SIGKILLs it; the GPU release after it then fails on the fake `pct`).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

# ansible-playbook runs the role and its filters in processes of its own (pytest.ini); the role writes its files
# owned by root, as in a container, so the stubs need root (scripts/test and CI run as root)
pytestmark = [pytest.mark.foreign_python,
              pytest.mark.skipif(os.geteuid() != 0, reason="the role writes its files owned by root: run as root")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

SYSTEMCTL = r'''#!/bin/sh
# fake systemctl of the stub containers: unit stub-NAME.service is the process in $STUBS/NAME/server.pid
for a in "$@"; do case "$a" in stub-*.service) unit="$a";; esac; done
[ -n "$unit" ] || exit 0
dir="$STUBS/$(echo "$unit" | sed 's/^stub-//; s/\.service$//')"
pid=$(cat "$dir/server.pid")
# a killed server is a zombie until the test reaps it: dead all the same
if kill -0 "$pid" 2>/dev/null && ! grep -q ') Z ' "/proc/$pid/stat" 2>/dev/null; then state=active; else state=inactive; pid=0; fi
echo "$*" >> "$dir/systemctl.log"
case "$1" in
  show) printf 'ActiveState=%s\nSubState=running\nMainPID=%s\nActiveEnterTimestamp=\nUnitFileState=enabled\n' "$state" "$pid"
        printf 'LoadState=loaded\nId=%s\nExecMainStartTimestampMonotonic=0\n' "$unit";;
  is-active) echo "$state"; [ "$state" = active ];;
  stop) kill "$pid" 2>/dev/null; echo "stub: stop refused after the kill, on purpose" >&2; exit 1;;
  kill) case "$*" in *--signal=SIGKILL*) kill -9 "$pid" 2>/dev/null;; esac;;
  *) exit 0;;
esac
'''

SGLANG = {
    "sglang/__init__.py": '__version__ = "0.5.23"\n',
    "sglang/srt/__init__.py": "",
    "sglang/srt/server_args.py": '''
        import argparse

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                for flag in ("--model-path", "--speculative-draft-model-path", "--host", "--speculative-algorithm",
                             "--speculative-attention-mode"):
                    parser.add_argument(flag)
                for flag in ("--port", "--tp-size", "--max-running-requests", "--speculative-num-steps",
                             "--speculative-eagle-topk", "--speculative-num-draft-tokens"):
                    parser.add_argument(flag, type=int)
                parser.add_argument("--mem-fraction-static", type=float)
                parser.add_argument("--trust-remote-code", action="store_true")
                parser.add_argument("--enable-metrics", action="store_true")

        class Record(argparse.Namespace):
            def resolve_once(self):
                pass

        def prepare_server_args(argv):
            parser = argparse.ArgumentParser(prog="sglang serve", allow_abbrev=False)
            ServerArgs.add_cli_args(parser)
            return parser.parse_args(argv, namespace=Record())
        ''',
    "sglang/srt/speculative/__init__.py": "",
    "sglang/srt/speculative/spec_info.py": '''
        class SpeculativeAlgorithm:
            @staticmethod
            def from_string(name):
                if name.upper() not in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"):
                    raise ValueError("Unknown speculative algorithm name: %s" % name)
        ''',
}
MODEL = {"model_path": "/models/Kimi-K2.5", "speculative_draft_model_path": "/models/Kimi-K2.5-EAGLE3"}
# Each host: (its settings beyond the stub's, the setting its failure must name)
CASES = {
    # a type: the setting, what was given, what it must be, an example; no Python class name (the last test)
    "type": ({"gpuserve_port": "http"}, 'gpuserve_port is a string ("http"): it must be a whole number, e.g. 30000'),
    "args-type": ({"sglang_server_args": ["model_path", "/models/m"]},
                  "sglang_server_args is a list ([model_path, /models/m]): it must be a mapping, e.g. "
                  "{model_path: /models/Kimi-K2.5, tp_size: 8}"),
    "words-type": ({"sglang_server_entrypoint": "python -m sglang.launch_server"},
                   'sglang_server_entrypoint is a string ("python -m sglang.launch_server"): it must be a list of '
                   "strings, e.g. ["),
    "range": ({"gpuserve_port": 70000}, "gpuserve_port is 70000: it must be a TCP port"),
    "cross": ({"sglang_server_listen_timeout": 30},
              "sglang_server_listen_timeout (30 s) is longer than sglang_server_ready_timeout (10 s)"),
    "start": ({"sglang_server_args": dict(MODEL, speculative_algorithm="EAGLE9")},
              "speculative_algorithm (--speculative-algorithm) is 'EAGLE9': SGLang refuses it at start"),
    # TEST-NET-1: no address of this machine; SGLang accepts it and, on a GPU, hangs at start
    "listen": ({"sglang_server_args": dict(MODEL, host="192.0.2.1")},
               "sglang_server_args.host is '192.0.2.1', and the server cannot listen there: cannot bind 192.0.2.1"),
    # an EAGLE-3 head (every stub has one) under EAGLE: SGLang serves it at accept length 1.00 without an error
    "draft": ({"sglang_server_args": dict(MODEL, speculative_algorithm="EAGLE",
                                          speculative_draft_model_path="{{ stub_root }}/models/eagle3-draft")},
              "speculative_algorithm is EAGLE, but the draft "),
}


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)


@pytest.fixture(scope="module")
def stubs(tmp_path_factory, collections_path):
    """Runs the role once over every case and the control; (report, {host: (stub dir, server process)})."""
    tmp = tmp_path_factory.mktemp("stubs")
    bin_dir, lib = tmp / "bin", tmp / "sglang-lib"
    write(str(bin_dir / "systemctl"), SYSTEMCTL, 0o755)
    write(str(bin_dir / "pct"), "#!/bin/sh\necho 'stub: no pct here' >&2\nexit 1\n", 0o755)
    for name, text in SGLANG.items():
        write(str(lib / name), textwrap.dedent(text))
    venv = tmp / "venv"
    write(str(venv / "bin" / "python"), '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' % (lib, sys.executable), 0o755)
    write(str(venv / "pyvenv.cfg"), "home = /usr/bin\n")
    src = tmp / "src"
    src.mkdir()
    git = ["git", "-C", str(src), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["commit", "-q", "--allow-empty", "-m", "the pinned SGLang"], check=True)

    hosts, servers = {}, {}
    for name in list(CASES) + ["control"]:
        stub = tmp / name
        server = subprocess.Popen(["sleep", "600"])
        servers[name] = (stub, server)
        write(str(stub / "server.pid"), str(server.pid))
        write(str(stub / "etc/gpuserve/nccl.env"), "NCCL_PROTO=LL\n")
        write(str(stub / "models/eagle3-draft/config.json"), '{"architectures": ["LlamaForCausalLMEagle3"]}')
        (stub / "etc/systemd/system").mkdir(parents=True)
        write(str(stub / "etc/gpuserve/sglang.args"), json.dumps({"argv": ["--model-path", "/models/old"]}))
        write(str(stub / "var/lib/gpuserve/sglang-manifest.json"),
              json.dumps({"main_pid": server.pid, "files": {}, "sglang": {"commit": "0" * 40, "dirty": False}}))
        settings = {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "gpuserve_pve_host": name, "proxmox_vmid": 990, "gpuserve_gpus": [0, 1], "gpuserve_unit":
            "stub-%s.service" % name, "gpuserve_helper": str(stub / "sbin/gpuserve-sglang"),
            "sglang_server_venv": str(venv), "sglang_server_src": str(src),
            "sglang_server_env_file": str(stub / "etc/gpuserve/nccl.env"),
            "sglang_server_manifest_dir": str(stub / "var/lib/gpuserve"),
            "sglang_server_args_check_record": str(stub / "var/cache/gpuserve/sglang-args-check.json"),
            "sglang_server_check_model": False, "sglang_server_args": dict(MODEL),
            "sglang_server_stop_drain_timeout": 1, "sglang_server_release_grace": 1, "sglang_server_gate_timeout": 1,
            "sglang_server_ready_timeout": 10, "sglang_server_listen_timeout": 5, "sglang_server_lock_ttl": 120,
            # the stubs have no GPUs to read health from (the health stage: test_gate.py, lab test_gpu_health)
            "sglang_server_gate_health_enabled": False,
            "stub_root": str(stub),
        }
        settings.update(CASES.get(name, ({}, None))[0])
        hosts[name] = settings
    (tmp / "inv.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang": {"hosts": hosts}}}}))
    (tmp / "paths.yml").write_text(yaml.safe_dump(fixed_paths_into_the_stub()))
    (tmp / "play.yml").write_text(textwrap.dedent("""
        - hosts: sglang
          gather_facts: false
          tasks:
            - ansible.builtin.include_role: {name: gpuserve.sglang.sglang_server}
        """))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_LOCALHOST_WARNING="false", STUBS=str(tmp),
               PATH="%s:%s" % (bin_dir, os.environ["PATH"]), ANSIBLE_FORKS="5")
    before = {name: snapshot(stub) for name, (stub, _server) in servers.items()}
    outside = {path: os.path.exists(path) for path in REAL_PATHS}
    try:
        out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                              str(tmp / "inv.yml"), "-e", "@%s" % (tmp / "paths.yml"), str(tmp / "play.yml")],
                             capture_output=True, text=True, env=env, cwd=ROOT, check=False, timeout=300)
        assert {path: os.path.exists(path) for path in REAL_PATHS} == outside, "the run wrote outside its stubs"
        yield json.loads(out.stdout), servers, before
    finally:
        for _stub, server in servers.values():
            server.kill()
            server.wait()


# Where the role writes in a real container: none of them may appear on this machine.
REAL_PATHS = ["/etc/gpuserve", "/etc/systemd/system/stub-control.service", "/usr/local/lib/gpuserve-sglang",
              "/usr/local/sbin/gpuserve-sglang", "/run/gpuserve", "/var/lib/gpuserve",
              "/var/cache/gpuserve/sglang-args-check.json"]
# The role's fixed paths (vars/main.yml's __sglang_server_paths), into each host's stub. Role variables outrank the
# inventory, so they are extra variables, templated per host.
STUB_PATHS = {
    "args": "etc/gpuserve/sglang.args",
    "unit": "etc/systemd/system/sglang.service",
    "lib": "lib",
    "lock": "run/sglang-lifecycle.lock",
}


def fixed_paths_into_the_stub():
    """The extra variables; refuses to run while vars/main.yml has an absolute path this does not move (the test
    would write it on this machine). The other paths, under a setting the inventory points into the stub, stay."""
    with open(os.path.join(ROOT, "roles", "sglang_server", "vars", "main.yml")) as handle:
        paths = yaml.safe_load(handle)["__sglang_server_paths"]
    missing = sorted(k for k, v in paths.items() if v.startswith("/") and k not in STUB_PATHS)
    if missing:
        pytest.fail("roles/sglang_server/vars/main.yml has fixed paths this test does not point into its stub "
                    "containers: %s; add them to STUB_PATHS" % ", ".join(missing))
    return {"__sglang_server_paths": dict(paths, **{k: "{{ stub_root }}/" + v for k, v in STUB_PATHS.items()})}


def snapshot(stub):
    """What must not change: the env file, the args file, the manifest."""
    return {name: (stub / name).read_bytes() for name in ("etc/gpuserve/nccl.env", "etc/gpuserve/sglang.args",
                                                          "var/lib/gpuserve/sglang-manifest.json")}


def failure(report, host):
    """(failed task name, message) of the host's first failed task."""
    for play in report["plays"]:
        for task in play["tasks"]:
            result = task["hosts"].get(host, {})
            if result.get("failed"):
                return task["task"]["name"], result.get("msg", "")
    return None, None


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_setting_fails_naming_it_and_leaves_the_server_as_it_was(stubs, case):
    report, servers, before = stubs
    stub, server = servers[case]
    task, msg = failure(report, case)
    assert task is not None, "the run did not fail on %s" % case
    assert CASES[case][1] in msg, (task, msg)
    assert server.poll() is None  # the same process still runs: never stopped
    assert snapshot(stub) == before[case]
    assert [c for c in systemctl_calls(stub) if c.split()[0] in ("stop", "start", "restart", "kill")] == []


def systemctl_calls(stub):
    log = stub / "systemctl.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_type_is_refused_by_the_argument_spec_and_the_rest_by_the_preflight(stubs):
    report, _servers, _before = stubs
    for case in ("type", "args-type", "words-type"):  # before any role's own argument check, in the user's words
        task, msg = failure(report, case)
        assert task.startswith("gpuserve.sglang.setting_types : Every setting has the type its role takes"), task
        assert msg.startswith("Settings of the wrong type (nothing was changed): ") and "class" not in msg, msg
    assert failure(report, "range")[0].endswith("Settings | each setting is in its range")
    assert failure(report, "cross")[0].endswith("Settings | the settings that bound each other agree")
    validate = "Validate | the server can listen on its host here, the draft fits its algorithm, SGLang accepts the arguments"
    assert failure(report, "start")[0].endswith(validate)
    assert "Nothing was written or stopped: the server runs as before." in failure(report, "start")[1]
    assert failure(report, "listen")[0].endswith(validate)
    assert "Nothing was written or stopped: the server runs as before." in failure(report, "listen")[1]
    assert failure(report, "draft")[0].endswith(validate)
    assert "is an EAGLE-3 head (LlamaForCausalLMEagle3)" in failure(report, "draft")[1]
    assert "Nothing was written or stopped: the server runs as before." in failure(report, "draft")[1]


def test_the_control_host_with_good_settings_goes_on_to_write_and_stop(stubs):
    """The stub sees a run that gets past the checks: without them each case above would change it too."""
    report, servers, before = stubs
    stub, server = servers["control"]
    task, msg = failure(report, "control")
    assert "release the GPUs" in task, (task, msg)
    assert server.poll() is not None  # stopped
    assert "kill --kill-who=all --signal=SIGKILL stub-control.service" in systemctl_calls(stub)
    after = snapshot(stub)
    assert after["etc/gpuserve/sglang.args"] != before["control"]["etc/gpuserve/sglang.args"]
    assert after["etc/gpuserve/nccl.env"] == before["control"]["etc/gpuserve/nccl.env"]
