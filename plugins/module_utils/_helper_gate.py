# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang gate, and the driver version state reads: the unit's ExecStartPre zero-memory gate, with the
collection's own gate (_gate.run_gate) and nvidia-smi queries (_nvidia_smi), run here by the helper's runner
(_helper_run.LocalRunner). A gate that cannot read because the PVE host's driver changed under this container's
userspace (a driver update, then the host's reboot) names both versions and the playbook that fixes it.

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package. _gate
imports _runner (ansible-core) only inside the function that builds the controller's runner; in the container the
gate runs with _helper_run.LocalRunner.
"""
import argparse
import json
import sys

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate, _nvidia_smi, _nvidia_userspace
from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_run import LocalRunner

# A program run without Ansible (systemd, the role's command tasks, an operator): it prints its JSON, with no
# AnsibleModule to log through; its commands go through _helper_run.
# pylint: disable=ansible-bad-function


def driver_version(nvidia_smi="nvidia-smi", timeout=10):
    """The NVIDIA driver version every GPU reports, read with the collection's own query and parser (_nvidia_smi):
    {"driver_version": V}, or {"error": ...} when nvidia-smi fails, hangs past timeout, or the GPUs disagree."""
    res = LocalRunner().run(_nvidia_smi.driver_query(nvidia_smi), timeout)
    try:
        _nvidia_smi.check_result(res, "nvidia-smi driver_version query")
        return {"driver_version": _nvidia_smi.parse_driver_version(res.out)}
    except _nvidia_smi.SmiError as exc:
        return {"error": exc.msg}


MISMATCH_ADVICE = (
    "gpuserve-sglang gate: not starting: the PVE host's NVIDIA driver is %s and this container's NVIDIA userspace is "
    "%s (Driver/library version mismatch), and a server on a mismatched userspace fails at its first CUDA call. "
    "Install the host's version here and restart with proof: run playbooks/deploy_eagle3.yml for this container "
    "(its nvidia_userspace role installs the userspace, then the lifecycle starts the server).\n")


def cmd_gate():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang gate")
    # omitted, the gate checks no count: the lifecycle's gate on the PVE host selects every GPU without one
    parser.add_argument("--expected-count", type=int)
    parser.add_argument("--max-used-mib", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--poll-interval", type=float, default=0.2)
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--nvidia-smi-timeout", type=float, default=10)
    # the loaded driver's version, read only to explain a Driver/library version mismatch
    parser.add_argument("--driver-version-file", default=_nvidia_userspace.PROC_VERSION)
    opts = parser.parse_args(sys.argv[2:])
    params = {key: spec.get("default") for key, spec in _gate.GATE_ARGS.items()}
    params.update(expected_count=opts.expected_count, max_used_mib=opts.max_used_mib, timeout=opts.timeout,
                  poll_interval=opts.poll_interval, nvidia_smi=opts.nvidia_smi,
                  nvidia_smi_timeout=opts.nvidia_smi_timeout)
    try:
        result = _gate.run_gate(None, params, runner=LocalRunner())
    except _gate.GateFailed as exc:
        result = dict(exc.result, error=exc.msg)
        versions = _nvidia_userspace.mismatch(
            "%s\n%s" % (result.get("raw") or "", result.get("stderr") or ""), _nvidia_userspace.read_proc(
                opts.driver_version_file)) if exc.read_error else None
        if versions:
            result["driver_mismatch"] = versions
            sys.stderr.write(MISMATCH_ADVICE % (versions["host"] or "unknown (%s unread)" % opts.driver_version_file,
                                                versions["userspace"] or "unknown"))
            print(json.dumps(result))
            return 1
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
