# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which replica runs which config when a rolling deploy stops.

Read from each replica's deployment manifest (sglang_server writes it as the last step of a verified restart,
with the run that wrote it) and from what this run knows: the replica that failed, and the replicas whose server
play passed before it.
"""

import base64
import json

RUN_KEYS = ("host", "boot_id", "pid", "start_ticks")


def same_run(a, b):
    """Whether two run identities (lookup gpuserve.sglang.controller_run) name the same controller run."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    return all(a.get(k) is not None and a.get(k) == b.get(k) for k in RUN_KEYS)


def describe(manifest):
    """The config a manifest records: its args file's digest, the SGLang commit, the phase and when it was done."""
    files = manifest.get("files") or {}
    sglang = manifest.get("sglang") or {}
    times = manifest.get("times") or {}
    return "args %s, SGLang %s%s (%s, %s)" % (
        (files.get("args_sha1") or "?")[:10], (sglang.get("commit") or "?")[:12],
        " dirty" if sglang.get("dirty") else "", manifest.get("phase") or "?",
        (times.get("done") or times.get("begin") or "?")[:19])


def read_manifest(result):
    """(host, manifest dict or None, why it could not be read or '') from one loop result of slurp, delegated to
    each replica."""
    host = result.get("item")
    if result.get("unreachable"):
        return host, None, "unreachable: %s" % (result.get("msg") or "?")
    if "content" not in result:
        msg = result.get("msg") or "?"
        if "not found" in msg or "No such file" in msg:
            return host, None, ""
        # a module that could not run (a container that does not exist, under pipelining) says why on stderr
        detail = result.get("module_stderr") or result.get("stderr") or ""
        if detail:
            msg = "%s: %s" % (msg.split("\n", 1)[0], detail)
        return host, None, " ".join(msg.split())[:300]
    try:
        manifest = json.loads(base64.b64decode(result["content"]).decode("utf-8"))
    except (ValueError, TypeError) as exc:
        return host, None, "not JSON (%s)" % exc
    if not isinstance(manifest, dict):
        return host, None, "not a JSON object"
    return host, manifest, ""


def health_refusal(health):
    """Why the failed replica was not restarted for its GPUs, from its health read (sglang_server_gpu_health):
    each refused GPU and check, or why the read failed; '' when its GPUs passed or were not read."""
    if not isinstance(health, dict) or not health or health.get("passed"):
        return ""
    refused = ["GPU %s (bus %s): %s" % (f.get("gpu"), f.get("bus_id"), f.get("check")) if f.get("gpu") is not None
               else "%s: %s" % (f.get("check"), f.get("value")) for f in health.get("refused") or ()]
    why = ", ".join(refused) or "the health read failed: %s" % " ".join(str(health.get("msg") or "?").split())[:300]
    return "not restarted, GPU health refused it before anything was stopped: %s" % why


def rollout_summary(results, failed, run, hostvars=None, rollback="", health=None):
    """One sentence per replica, in rollout order (the play's hosts).

    results: slurp's loop results of each replica's manifest (item: the replica); failed: the replica whose run
    failed; run: this run's identity; hostvars: to tell the replicas whose server play passed in this run
    (__gpuserve_rollout_passed); rollback: the failed replica's rollback outcome as its failure says it; health:
    the failed replica's GPU health read (sglang_server_gpu_health), to name the GPU and check that kept it."""
    lines = []
    for result in results:
        host, manifest, error = read_manifest(result)
        ours = manifest is not None and same_run(manifest.get("run"), run)
        if manifest is not None:
            config = "%s, written by %s" % (describe(manifest), "this run" if ours else "an earlier run")
        elif error:
            config = "its manifest could not be read: %s" % error
        else:
            config = "no manifest (never deployed)"
        passed = bool(hostvars and host in hostvars and hostvars[host].get("__gpuserve_rollout_passed"))
        if host == failed:
            refusal = health_refusal(health)
            state = "FAILED in this run" + ("; %s" % refusal if refusal else "") + (
                "; rollback: %s" % " ".join(str(rollback).split()) if rollback else "")
            lines.append("%s: %s; last manifest: %s" % (host, state, config))
        elif ours and manifest.get("phase") == "rollback":
            # another node of the failed host's multi-node server: rolled back with it
            lines.append("%s: rolled back in this run; serves %s" % (host, describe(manifest)))
        elif ours:
            lines.append("%s: updated in this run; serves %s" % (host, describe(manifest)))
        elif passed:
            lines.append("%s: passed in this run with nothing to restart; %s" % (host, config))
        else:
            lines.append("%s: not reached (the rollout stopped first); %s" % (host, config))
    return lines


class FilterModule:
    def filters(self):
        return {"rollout_summary": rollout_summary}
