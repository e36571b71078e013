"""The fleet: two replicas deployed by playbooks/deploy_eagle3.yml behind the real SMG 1.13.0,
rolled one at a time under a bounded load, past a canary that holds and one that is slower; the lab's Prometheus
scraping them with the shipped config.

The package's two containers (conftest.py): CT 104 on lab-pve4 with its SIMULATED GPUs 0-3 and CT 102 on lab-pve2, the
lab's second PVE host, with that host's GPUs 0-3 (tp 4 each, derived from gpuserve_gpus), both on the lab's
host-only bridge (10.66.0.104, .102) and listening there; the gateway runs in CT 100 (10.66.0.100). The module's
fixture runs the documented way up, `scripts/deploy --fleet` (docs/fleet.md, "In the lab"): it makes CT 100, deploys
the gateway with no worker, then deploys the fleet: nothing restarts, and each replica registers itself with the
gateway. CT 100 is destroyed afterwards. The gateway's metrics are read from the lab host, as the docs show. Needs
`lab/lab up`.
"""
import json
import re
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from gatewayutil import CT, LAB, Load, Watch, gateway_faults, key, latency_summary, run, workers
from labutil import LAB_MARKS, STANDIN_FAULT, documented, finish, playbook, wait_for
from ansible_collections.gpuserve.sglang.tests.support.net import free_port

from .nodes import NODES, arg, deploy, epoch, first_failure, in_ct, main_pid, manifest, on_pve, recap, \
    served_argv, MANIFEST

pytestmark = LAB_MARKS

REPLICAS = {name: (node["vmid"], "http://%s:30000" % node["ip"]) for name, node in NODES.items()}
# The canary step sized for the lab's load (4 requests/s, 2 to each replica): a 12 s window read every 3 s
CANARY = {"sglang_server_canary": True, "sglang_server_canary_window": 12, "sglang_server_canary_interval": 3,
          "sglang_server_canary_min_requests": 15, "sglang_server_canary_tolerance_pct": 25}
# The stand-in's SIMULATED slower config (lab/files/sglang_standin.py, slow_config), set on the canary's unit
SLOW_DROPIN = "/etc/systemd/system/sglang.service.d/gpusim-slow.conf"
SLOW = ('[Service]\nEnvironment="GPUSIM_SLOW_WHEN=--mem-fraction-static 0.7" GPUSIM_SLOW_FACTOR=0.4 '
        'GPUSIM_SLOW_ACCEPT_LENGTH=1.5\n')


# the canary verdict's clauses after its first: "; " and a figure's comparison, each ending in its bound, in parentheses
MORE_CLAUSES = r"(?:; [^;]*?\((?:tolerance_pct|max_error_rate_pct)[^)]*\))*"


def deploy_fleet(*extra, **evars):
    """deploy_eagle3.yml on the fleet; extra vars fleet_changes (every replica) and fleet_ct102_changes."""
    code, out = deploy(*extra, **evars)
    assert key() not in out, "the control-plane key reached the playbook's output"
    return code, out


def restart_window(m):
    """(stopped, ready) epoch seconds of a manifest's restart: when the server stopped and when it answered again."""
    begin = epoch(m["times"]["begin"])
    stopped = begin + float(m["times"]["validate_and_stop_s"])
    return stopped, stopped + float(m["times"]["release_and_gate_s"]) + float(m["times"]["start_to_ready_s"])


def all_healthy():
    listed = workers()
    return all(listed.get(url, {}).get("status") == "ready" and listed[url].get("is_healthy") is True
               for _vmid, url in REPLICAS.values())


@pytest.fixture(scope="module")
def fleet(two_hosts):
    try:
        code, out = finish(documented("--fleet"), limit=1800)
        assert code == 0, first_failure(out)
        assert key() not in out, "the control-plane key reached the playbook's output"
        yield out
    finally:
        run(LAB, "ct-destroy", CT, check=False)


@pytest.fixture(scope="module")
def prometheus(fleet, tmp_path_factory):
    """The lab's Prometheus (Debian's package, on the lab host) with the config playbooks/prometheus.yml generates from
    the lane's inventory, scraping and evaluating every second; stopped afterwards. Yields its query function."""
    etc = tmp_path_factory.mktemp("prometheus")
    code, out = finish(playbook("playbooks/prometheus.yml", "-e", json.dumps(
        {"sglang_prometheus_dir": str(etc), "sglang_prometheus_scrape_interval": "1s",
         "sglang_prometheus_evaluation_interval": "1s"})), limit=300)
    assert code == 0, out[-3000:]
    port = free_port()
    with open(str(etc / "prometheus.log"), "w") as log:
        proc = subprocess.Popen(["nice", "-n", "10", "prometheus", "--config.file", str(etc / "prometheus.yml"),
                                 "--storage.tsdb.path", str(etc / "data"), "--web.listen-address",
                                 "127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def query(expr):
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as res:
            data = json.loads(res.read())
        assert data["status"] == "success", data
        return [(r["metric"], float(r["value"][1])) for r in data["data"]["result"]]

    def all_up():
        try:
            return len(query('up == 1')) == 3
        except OSError:  # URLError too: Prometheus not listening yet
            return False

    try:
        wait_for(all_up, 60, "Prometheus up, both replicas and the gateway scraped")
        yield query
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_each_replica_serves_on_its_own_gpus_behind_the_gateway(two_hosts, fleet):
    assert recap(two_hosts, "ct102")[0] > 0 and recap(two_hosts, "ct104")[0] > 0
    # behind the gateway now, without a restart: each registered itself
    # the README's reading of the run's one result line: each replica's decision
    deployed = [json.loads(text.split(" ", 1)[1]) for text in fleet.splitlines() if text.startswith("GPUSERVE_DEPLOY ")]
    assert len(deployed) == 1, fleet[-3000:]
    assert [deployed[0][host]["decision"] for host in ("ct104", "ct102")] == [
        "no restart: the running server matches its verified manifest"] * 2, fleet[-3000:]
    listed = workers()
    assert sorted(listed) == sorted(url for _vmid, url in REPLICAS.values())
    for name, (_vmid, url) in REPLICAS.items():
        assert listed[url]["status"] == "ready" and listed[url]["is_healthy"] is True, listed[url]
        assert listed[url]["labels"]["replica"] == name
        assert arg(served_argv(name), "--tp-size") == "4" and arg(served_argv(name), "--host") == "0.0.0.0"
    # each gate waited on its own host's GPUs 0-3 (nvidia-smi indexes; the lab's mapping is the identity here)
    for name in REPLICAS:
        assert sorted(manifest(name)["gate"]["clear_at_s"]) == ["0", "1", "2", "3"]
        conf = on_pve(name, "/usr/sbin/pct", "config", NODES[name]["vmid"]).stdout
        assert sorted(re.findall(r"^dev\d+: (?:path=)?/dev/nvidia(\d+)\b", conf, re.M), key=int) == "0 1 2 3".split()


def test_a_change_passes_its_canary_and_rolls_across_both_replicas_one_at_a_time_with_no_failed_request(
        fleet, prometheus):
    seen = gateway_faults()
    with Watch() as watch, Load(count=2400) as load:  # 4 requests/s for at most 10 minutes, ends at exit
        time.sleep(5)  # latencies before the rollout
        code, out = deploy_fleet("-e", json.dumps(CANARY), fleet_changes={"mem_fraction_static": 0.8})
        time.sleep(2)
    assert code == 0, first_failure(out)
    flat = " ".join(out.split())
    verdict = re.search(r"canary ct104 against control ct102 over \d+ s \(\d+ readings\): PASS: time per output token: "
                        r"[^;]*?\(tolerance_pct[^)]*\)" + MORE_CLAUSES, flat)
    assert verdict, out[-4000:]
    print("FLEET CANARY %s" % verdict.group(0))
    assert recap(out, "ct104")[0] > 0 and recap(out, "ct102")[0] > 0
    assert load.failed() == [], load.failed()[:5]
    assert gateway_faults() == seen, "the gateway retried requests or saw worker errors during the rollout"
    # at every look the gateway had a healthy replica to route to, and each replica was out at some point
    assert watch.healthy_counts() and min(watch.healthy_counts()) >= 1, watch.seen
    first, second = manifest("ct104"), manifest("ct102")
    assert first["times"]["done"] <= second["times"]["begin"], "the replicas restarted at the same time"
    for name, m in (("ct104", first), ("ct102", second)):
        url = REPLICAS[name][1]
        stopped, ready = restart_window(m)
        out_at = watch.out_times(url)
        assert out_at and min(out_at) < stopped, (name, out_at[:3], stopped)
        for r in load.to(url):  # nothing routed to a replica was in flight across its restart
            assert r["ended"] <= stopped or r["began"] >= ready, (name, r, stopped, ready)
        assert any(r["began"] >= ready for r in load.to(url)), "%s served nothing after it came back" % name
        assert arg(served_argv(name), "--mem-fraction-static") == "0.8"
    assert all_healthy(), workers()
    t0, t1 = epoch(first["times"]["begin"]), epoch(second["times"]["done"])
    before = latency_summary([r for r in load.results if r["ended"] < t0])
    during = latency_summary([r for r in load.results if r["began"] >= t0 and r["ended"] <= t1])
    assert before[0] and during[0], (before, during)  # requests before and during the rollout to compare
    counts = (len(load.to(REPLICAS["ct104"][1])), len(load.to(REPLICAS["ct102"][1])))
    print("FLEET ROLLOUT requests=%d failed=0 rollout_s=%.1f before: n=%d p50=%.3f p99=%.3f during: n=%d p50=%.3f "
          "p99=%.3f to_ct104=%d to_ct102=%d" % ((len(load.results), t1 - t0) + before + during + counts))


def test_the_labs_prometheus_scrapes_the_fleet_with_the_shipped_config_and_records_the_accept_length(prometheus):
    """The rollout's load ended seconds ago: its 5 minutes are in the rule's window."""
    accept = {m["replica"]: v for m, v in prometheus("replica:sglang_accept_length:ratio_rate5m")}
    assert sorted(accept) == ["ct102", "ct104"] and all(2.0 < v < 3.2 for v in accept.values()), accept
    assert {m["replica"] for m, v in prometheus("replica:sglang_generation_tokens:rate1m")} == {"ct102", "ct104"}
    # the label the out-of-gateway alert joins on: SMG's per-worker series carry the worker URL, as the scrape config
    health = {m["worker"]: v for m, v in prometheus('smg_worker_health{job="smg"}')}
    assert health == {url: 1.0 for _vmid, url in REPLICAS.values()}, health
    assert prometheus("ALERTS") == []
    print("FLEET PROMETHEUS replica:sglang_accept_length:ratio_rate5m %s" % json.dumps(accept, sort_keys=True))


def test_a_slower_canary_goes_back_to_its_old_config_the_control_never_restarts_and_the_rollout_stops(fleet):
    wait_for(all_healthy, 60, "both replicas ready and healthy at the gateway")
    before, control = served_argv("ct104"), (main_pid("ct102"), in_ct("ct102", "cat", MANIFEST))
    seen = gateway_faults()
    dropin = "mkdir -p %s && printf '%%s' '%s' > %s" % (SLOW_DROPIN.rsplit("/", 1)[0], SLOW, SLOW_DROPIN)
    in_ct("ct104", "sh", "-c", dropin)
    try:
        with Load(count=2400) as load:
            code, out = deploy_fleet("-e", json.dumps(CANARY), fleet_changes={"mem_fraction_static": 0.7})
            time.sleep(2)
    finally:
        in_ct("ct104", "rm", "-f", SLOW_DROPIN)
    flat = " ".join(out.split())
    assert code != 0 and recap(out, "ct104")[1] == 1, out[-3000:]
    verdict = re.search(r"canary ct104 against control ct102 over \d+ s \(\d+ readings\): FAIL: time per output "
                        r"token: canary ct104 [0-9.]+ ms, control ct102 [0-9.]+ ms, worse by [0-9.]+ %, threshold "
                        r"[0-9.]+ % \(tolerance_pct 25.0, the control's own spread [^)]*\)" + MORE_CLAUSES, flat)
    assert verdict and "accept length: canary ct104" in verdict.group(0), out[-4000:]
    assert "Rollback: done: the last verified config is serving again" in flat, out[-3000:]
    assert re.search(r"the rollout stopped at ct104 \(its failure is above\)\. Which replica runs which config: "
                     r"ct104: FAILED in this run; rollback: done: .*; last manifest: args [0-9a-f]{10}, SGLang "
                     r"[0-9a-f]{12} \(rollback, [^)]+\), written by this run \| ct102: not reached", flat), out[-3000:]
    # the control never restarted; the canary serves its old config again, verified by the same lifecycle
    assert (main_pid("ct102"), in_ct("ct102", "cat", MANIFEST)) == control
    assert served_argv("ct104") == before and arg(before, "--mem-fraction-static") == "0.8"
    m = manifest("ct104")
    assert m["phase"] == "rollback" and m["gate"]["passed"] is True and m["env_proof"]["ok"] is True, m
    assert load.failed() == [], load.failed()[:5]
    assert gateway_faults() == seen, "the gateway retried requests or saw worker errors around the canary"
    wait_for(all_healthy, 60, "the canary back, ready and healthy at the gateway")
    print("FLEET CANARY %s" % verdict.group(0))


def test_a_rerun_changes_nothing_on_the_replicas_or_at_the_gateway(fleet):
    ids = {url: w["id"] for url, w in workers().items()}
    pids = {name: main_pid(name) for name in REPLICAS}
    code, out = deploy_fleet(fleet_changes={"mem_fraction_static": 0.8})
    assert code == 0 and recap(out, "ct104") == (0, 0) and recap(out, "ct102") == (0, 0), out[-3000:]
    assert {url: w["id"] for url, w in workers().items()} == ids
    assert {name: main_pid(name) for name in REPLICAS} == pids


def test_replica_2s_new_config_that_cannot_start_is_rolled_back_while_replica_1_serves(fleet):
    wait_for(all_healthy, 60, "both replicas ready and healthy at the gateway")
    seen, before = gateway_faults(), served_argv("ct102")
    with Watch() as watch, Load(count=2400) as load:
        # CT 102's new server exits at start (the stand-in's SIMULATED startup fault): a failure after its stop
        in_ct("ct102", "touch", STANDIN_FAULT)
        try:
            code, out = deploy_fleet(fleet_changes={"mem_fraction_static": 0.75})
        finally:
            in_ct("ct102", "rm", "-f", STANDIN_FAULT)  # its start took it; a run that failed before leaves it
        time.sleep(2)
    flat = " ".join(out.split())
    assert code != 0 and recap(out, "ct104")[1] == 0 and recap(out, "ct102")[1] == 1, out[-3000:]
    assert "Rollback: done" in flat and "SIMULATED startup failure" in flat, out[-3000:]
    assert re.search(r"the rollout stopped at ct102 \(its failure is above\)\. Which replica runs which config: "
                     r"ct104: updated in this run; serves args [0-9a-f]{10}, SGLang [0-9a-f]{12} \(deploy, [^)]+\) \| "
                     r"ct102: FAILED in this run; rollback: done: .*; last manifest: args [0-9a-f]{10}, SGLang "
                     r"[0-9a-f]{12} \(rollback, [^)]+\), written by this run", flat), out[-3000:]
    assert load.failed() == [], load.failed()[:5]
    assert gateway_faults() == seen, "the gateway retried requests or saw worker errors during the rollback"
    assert min(watch.healthy_counts()) >= 1, watch.seen
    wait_for(all_healthy, 60, "CT 102 back, ready and healthy at the gateway")
    # replica 1 runs the new config; replica 2 its last verified one, verified by the same lifecycle
    assert arg(served_argv("ct104"), "--mem-fraction-static") == "0.75"
    m = manifest("ct102")
    assert m["phase"] == "rollback" and m["gate"]["passed"] is True and m["env_proof"]["ok"] is True, m
    assert served_argv("ct102") == before and arg(m["argv"], "--mem-fraction-static") != "0.75"


def test_a_replica_is_not_taken_out_when_too_few_others_are_healthy(fleet):
    wait_for(all_healthy, 60, "both replicas ready and healthy at the gateway")
    pids, manifests = {n: main_pid(n) for n in REPLICAS}, {n: in_ct(n, "cat", MANIFEST) for n in REPLICAS}
    ids = {url: w["id"] for url, w in workers().items()}
    code, out = deploy_fleet("-e", '{"sglang_server_gateway_keep_healthy": 2}',
                             fleet_changes={"mem_fraction_static": 0.7})
    flat = " ".join(out.split())
    assert code != 0 and recap(out, "ct104")[1] == 1, out[-3000:]
    assert ("not taking %s out of the gateway: 1 other worker(s) are ready and healthy" % REPLICAS["ct104"][1]) in flat
    assert "keep_healthy asks for 2; nothing was changed" in flat and "Rollback: not needed" in flat
    assert "ct102: not reached (the rollout stopped first)" in flat, out[-3000:]
    # nothing stopped, nothing re-registered, and CT 102 was not touched
    assert {n: main_pid(n) for n in REPLICAS} == pids
    assert {n: in_ct(n, "cat", MANIFEST) for n in REPLICAS} == manifests
    assert {url: w["id"] for url, w in workers().items()} == ids
