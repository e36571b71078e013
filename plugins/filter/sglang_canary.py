# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary step of a rolling deploy (docs/fleet.md, "The canary"): which replica is the canary and which one its
control, and the verdict of the window (module_utils/_canary.py). The sglang_canary role (sglang_server includes it)
passes what it read and keeps the order of the steps; each reason has a unit test."""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.module_utils import _canary
from ansible_collections.gpuserve.sglang.plugins.module_utils._smg import normalize_url


def _restarted(hostvars, name):
    """Whether a host of this play restarted in this run (its restart decision, set before the lifecycle)."""
    return bool(hostvars[name].get("__sglang_server_restart_reasons"))


def canary_plan(hosts, hostvars, me, batch):
    """{canary, control, control_url, why} for host `me`, which restarts in this run behind its gateway: the canary
    is the first replica of the play (hosts, in order) to restart; its control the first replica after it, outside
    its batch, behind the same gateway, which the rollout has not reached (so it still runs its old config)."""
    hosts, batch = list(hosts or []), set(batch or [])
    if me not in hosts:
        raise AnsibleFilterError("%s is not a host of this play (%s)" % (me, ", ".join(hosts)))
    mine = hostvars[me]
    gateway = mine.get("sglang_server_gateway_host")
    before = hosts[:hosts.index(me)]
    first = [h for h in before if _restarted(hostvars, h)]
    if first:
        return {"canary": False, "control": "", "control_url": "",
                "why": "not the canary: %s restarted first in this run" % first[0]}
    for name in hosts[hosts.index(me) + 1:]:
        url = normalize_url(hostvars[name].get("sglang_server_gateway_worker_url") or "")
        if name in batch or not url or hostvars[name].get("sglang_server_gateway_host", gateway) != gateway:
            continue
        return {"canary": True, "control": name, "control_url": url,
                "why": "the first replica to restart in this run; its control %s, not reached yet" % name}
    return {"canary": False, "control": "", "control_url": "",
            "why": "no canary: no replica behind the same gateway is left on the old config (every other one was "
                   "reached before %s, or is in its batch)" % me}


def canary_problems(settings):
    """What keeps the canary step from running as set, one sentence each (the role's preflight refuses them before
    anything is changed); [] when it is off or can run.

    settings: canary (on), worker_url, enable_metrics (the effective launch arguments'), nnodes, serial (the play's
    gpuserve_serial), window, interval, on_low_traffic, load (the synthetic load's settings)."""
    if not settings.get("canary"):
        return []
    problems = []
    if not settings.get("worker_url"):
        problems.append("sglang_server_canary needs the replica behind a gateway (sglang_server_gateway_worker_url): "
                        "the canary serves live traffic from it beside its control")
    if settings.get("enable_metrics") is not True:
        problems.append("sglang_server_canary reads both replicas' /metrics: set enable_metrics: true in "
                        "sglang_server_args (the default) on every replica")
    if int(settings.get("nnodes") or 1) != 1:
        problems.append("sglang_server_canary compares one-node replicas; a multi-node replica (sglang_server_nnodes "
                        "%s) rolls without it" % settings.get("nnodes"))
    if str(settings.get("serial", 1)) != "1":
        problems.append("sglang_server_canary needs gpuserve_serial 1 (got %s): the replicas after the canary wait for "
                        "its verdict, and one of them is its control" % settings.get("serial"))
    if float(settings["interval"]) * _canary.MIN_INTERVALS > float(settings["window"]):
        problems.append("sglang_server_canary_window %s s holds fewer than %d sglang_server_canary_interval of %s s: "
                        "the control's own spread needs %d intervals"
                        % (settings["window"], _canary.MIN_INTERVALS, settings["interval"], _canary.MIN_INTERVALS))
    if settings.get("on_low_traffic") == "load":
        load = settings.get("load") or {}
        missing = [key for key in ("base_url", "dataset_path", "tokenizer") if not load.get(key)]
        if missing:
            problems.append("sglang_server_canary_on_low_traffic load drives the benchmark's client through the "
                            "gateway: sglang_server_canary_load needs %s" % ", ".join(missing))
        elif not str(load["base_url"]).startswith(("http://", "https://")):
            problems.append("sglang_server_canary_load.base_url is the gateway's URL as the canary's container reaches "
                            "it (http://HOST:PORT), got %r" % load["base_url"])
    return problems


def canary_verdict(rounds, canary, control, settings, health=None):
    """_canary.judge: the verdict of the window's readings (rounds) of canary and control ({name, url})."""
    return _canary.judge(rounds, canary, control, settings, health)


class FilterModule:
    def filters(self):
        return {"sglang_canary_plan": canary_plan, "sglang_canary_verdict": canary_verdict,
                "sglang_canary_problems": canary_problems}
