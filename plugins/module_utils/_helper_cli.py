# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang, the container helper: the sglang_server role's commands inside the container, stdlib only.

  gpuserve-sglang exec ARGS_FILE -- ENTRYPOINT [ARGS...]
      ExecStart of sglang.service: exec the entrypoint with the argv kept in ARGS_FILE (JSON {"argv": [...]}).
      No shell, no word splitting, no expansion; the process keeps its PID (systemd's main PID is the server).
  <venv>/bin/python gpuserve-sglang validate-args (--args-file PATH | --argv-json JSON) [--check-model]
          [--env-file F] [--record FILE [--record-read-only] --src DIR] [--venv DIR]
      Check the argv as far as it can be checked without a GPU, with the installed SGLang: its parser
      (prepare_server_args), full flag names (argparse accepts an unambiguous prefix today and rejects it once SGLang
      adds a second flag with that prefix, as --cuda-graph-max-bs in 0.5.22), the values SGLang checks only once it
      runs (START_ONLY_RANGES), its start checks for any model (resolve_once on a copy with model_path 'dummy'), the
      speculative algorithm's name, and with --check-model each model directory (config.json, SGLang's config
      loader). F's variables are set first (the unit's EnvironmentFile). With --record, a passed check is recorded
      with a key of its inputs (the install as _install_fingerprint takes it, the argv, the model files, SGLANG_*
      variables, _helper_validate.py); while they hold, SGLang is not imported and the result says since when
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
  gpuserve-sglang source --src DIR
      The SGLang tree's commit and local changes (git status, untracked files included), read by the collection's
      one reader of "which commit runs, is it dirty" (_git_tree, in this package; sglang_install sends the
      same file): for the restart decision, the manifest and the benchmark. Exit 0, 1 when git fails.
  gpuserve-sglang wait-ready --port P [--host H] [--budget S] [--unit U] [--listen-timeout L]
          [--generate-prompt T [--generate-tokens N]]
      Wait at most S seconds for /health_generate 200; stop early when the unit is not running, or when nothing
      listens on the port L seconds after the server's main process started. Called once a minute by a retry loop,
      so a 30-minute load prints a progress line a minute. With T, once ready, one generation of N tokens from T,
      sampled at temperature 1.0, its answer under `generation`. Exit 0 ready, 3 not yet, 4 the unit is not
      running, 5 not listening after L s, 6 the generation failed.
  gpuserve-sglang stop --port P [--host H] [--unit U] [--drain-timeout S] [--no-drain REASON]
      The lifecycle's stop (_helper_stop says why SGLang's own is slow): the load from GET /v1/loads; nothing in
      flight or nothing listening: SIGKILL to the unit's control group at once; requests in flight: SIGTERM to
      the main process, drained until idle or S seconds, then SIGKILL, saying how many it cut; the load unreadable:
      `systemctl stop`. --no-drain: SIGKILL at once (a multi-node rank >= 1 node). Then reset-failed. Exit 0
      stopped (or not running), 1 not stopped.
  gpuserve-sglang start [--unit U]
      The lifecycle's start: daemon-reload only when systemd needs it, then `systemctl start` (the unit's gate
      runs first). Exit 0 started, 1 not.
  gpuserve-sglang state --unit U --src DIR [--file PATH...] [--manifest PATH] [--python PATH] [--startup] [--driver]
      Everything the restart decision reads, in one call: the tree as `source` reads it, sha1 of each file
      (the same checksum Ansible's stat returns), the manifest, the unit's state; with --startup, where the
      unit's last start went (its journal read by _startup_log: imports, weight load, CUDA graphs, warm-up); with
      --driver, the NVIDIA driver version every GPU reports ({"driver_version"}, or {"error"} and exit 1), read by
      the collection's own nvidia-smi query and parser (_nvidia_smi).
  gpuserve-sglang gate [--expected-count N] [--max-used-mib M] [--timeout S]
      ExecStartPre of sglang.service: the zero-memory gate on this container's GPUs (every GPU its nvidia-smi
      lists, exactly N of them when N is given), so `systemctl restart`, a boot or a crash restart never launches on GPUs that
      still hold memory. It is the collection's own gate (_gate.run_gate and _nvidia_smi, in this
      package), run with _helper_gate's runner. Exit 0 passed, 1 not (the message names the holders and what to do).
  gpuserve-sglang config keep|restore --dir D --file NAME=PATH [--file NAME=PATH...]
      The config pair copied all or nothing (_helper_config says why): keep copies each PATH to D/NAME, restore
      each D/NAME back to PATH, each through a temporary file and a rename. A source missing: nothing is written,
      exit 3 with {"missing"}. Exit 0 with {"copied", "unchanged"}.
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

Private to this collection. One file per command (_helper_<command>.py), this one the command line; PACKAGE is every
file the installed helper needs, which gpuserve.sglang.sglang_helper writes under <lib>/ansible_collections/... (their
import names) beside a launcher at <path> (launcher()): every file stdlib only at load, importing only files of
PACKAGE (tests/unit/docs/test_architecture.py). systemd, the role's tasks and an operator run the same commands.
"""
import importlib
import os
import sys

from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_config import cmd_config
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_env import cmd_env_proof, cmd_worker_env
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_exec import cmd_exec
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_gate import cmd_gate
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_lock import cmd_lock
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_ready import cmd_wait_ready
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_state import cmd_source, cmd_state
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_stop import cmd_start, cmd_stop
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_validate import cmd_validate_args
from ansible_collections.gpuserve.sglang.plugins.module_utils._python_script import source

# Every module_utils file the installed helper imports (the closure of this file's imports), installed as they are.
PACKAGE = (
    "_helper_cli.py", "_helper_config.py", "_helper_exec.py", "_helper_gate.py", "_helper_lock.py",
    "_helper_validate.py", "_helper_env.py", "_helper_ready.py", "_helper_state.py", "_helper_stop.py", "_helper_run.py",
    "_gate.py", "_gpu_health.py", "_gpu_map.py", "_nvidia_smi.py", "_nvidia_userspace.py", "_git_tree.py",
    "_startup_log.py", "_install_fingerprint.py", "_fingerprint_probe.py", "_python_script.py", "_speculative.py",
)
# Where under the lib folder the files go: their import name (ansible_collections.gpuserve.sglang.plugins.module_utils).
PACKAGE_DIR = "ansible_collections/gpuserve/sglang/plugins/module_utils"
# The installed gpuserve-sglang: the package first on sys.path, then main(). Run as `python3 PATH COMMAND ...` or
# executed (0755, its interpreter line).
LAUNCHER = """#!{python}
# Managed by Ansible (gpuserve.sglang.sglang_helper). The container helper gpuserve-sglang: its code is the
# collection's package under {lib}, installed with this file.
import sys

sys.path.insert(0, {lib!r})
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_cli import main  # noqa: E402

sys.exit(main())
"""


def launcher(python, lib):
    """The launcher's text: interpreter python, the package under lib."""
    return LAUNCHER.format(python=python, lib=lib)


def files(lib, path, python):
    """The installed helper, as [{path, content, mode}]: every PACKAGE file's source under lib (0644), read through
    its module's loader (from a checkout, or from the zip of a module's payload that imported this file; Ansible's
    collection loader, as ansible-test's units run it, gives bytes), and the launcher at path (0755)."""
    package = __name__.rpartition(".")[0]
    out = []
    for name in PACKAGE:
        module = importlib.import_module(package + "." + name[:-len(".py")])
        out.append({"path": os.path.join(lib, PACKAGE_DIR, name), "mode": "0644", "content": source(module)})
    out.append({"path": path, "mode": "0755", "content": launcher(python, lib)})
    return out


COMMANDS = {
    "gate": cmd_gate,
    "config": cmd_config,
    "lock": cmd_lock,
    "validate-args": cmd_validate_args,
    "env-proof": cmd_env_proof,
    "worker-env": cmd_worker_env,
    "source": cmd_source,
    "wait-ready": cmd_wait_ready,
    "state": cmd_state,
    "stop": cmd_stop,
    "start": cmd_start,
}


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "exec":
        return cmd_exec(sys.argv[1:])
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.stderr.write("usage: gpuserve-sglang {exec,%s} ...\n" % ",".join(COMMANDS))
        return 64
    return COMMANDS[sys.argv[1]]()
