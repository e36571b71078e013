"""The sglang_gateway role and the smg_worker module against the real SMG 1.13.0 (issue 14, item 2).

CT 100 is made from the cached rootfs with a net0 on the lab bridge and runs the gateway (the lab host has no
systemd); two SIMULATED SGLang servers (the lab's stand-in) run on the lab host at its bridge address, so the
gateway reaches its workers over the bridge as it would reach other containers. CT 100 is destroyed afterwards;
CT 101 is not touched. Needs `lab/lab up`.
"""
import datetime
import json
import urllib.error
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import yaml

from labutil import LAB_MARKS, ROOT, VENV_BIN, finish, playbook, wait_for

pytestmark = LAB_MARKS

LAB = os.path.join(ROOT, "lab", "lab")
STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")
CT, CT_IP, HOST_IP = "100", "10.66.0.100", "10.66.0.1"
GATEWAY = "http://%s:30080" % CT_IP
KEY_FILE = "/var/lib/gpuserve-lab/smg/admin.key"
UNIT = "smg-gateway.service"
PORTS = (31101, 31102)
WORKERS = [{"url": "http://%s:%d" % (HOST_IP, port), "labels": {"replica": "sim%d" % port}} for port in PORTS]


def run(*argv, check=True, timeout=180, env=None):
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout, env=env)


def in_ct(*argv, check=True):
    return run("/usr/sbin/pct", "exec", CT, "--", *argv, check=check)


def key():
    with open(KEY_FILE) as src:
        return src.read().strip()


def call(path, body=None, auth=True, timeout=30):
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = "Bearer " + key()
    req = urllib.request.Request(GATEWAY + path, data=json.dumps(body).encode() if body is not None else None,
                                 headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as res:
        return res.status, dict(res.headers), json.loads(res.read() or b"null")


def workers():
    return {w["url"]: w for w in call("/workers")[2]["workers"]}


def gateway_faults():
    """The gateway's own counts of retried requests and worker errors (its Prometheus endpoint, on loopback in
    CT 100): SMG retries a failed request on another worker, so a replica stopped with requests still routed to
    it shows here even when every client got its answer."""
    text = in_ct("python3", "-c", "import urllib.request as u; print(u.urlopen("
                 "'http://127.0.0.1:29000/metrics', timeout=10).read().decode())").stdout
    assert "smg_" in text, text[:500]
    counts = {"smg_worker_retries_total": 0.0, "smg_worker_errors_total": 0.0}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in counts:
            counts[name] += float(line.rsplit(" ", 1)[1])
    return counts


def deploy(*extra):
    code, out = finish(playbook("playbooks/gateway.yml", "-e", json.dumps({"sglang_gateway_workers": WORKERS}),
                                *extra), limit=600)
    assert key() not in out, "the control-plane key reached the playbook's output"
    return code, out


def recap_changed(out):
    found = re.findall(r"^gw100\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", out, re.M)
    assert found, out[-3000:]
    return int(found[-1])


def main_pid():
    return in_ct("systemctl", "show", "-p", "MainPID", "--value", UNIT).stdout.strip()


def up(port, limit=30):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://%s:%d/health" % (HOST_IP, port), timeout=2) as res:
                if res.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail("the SIMULATED server on port %d did not come up" % port, pytrace=False)


@pytest.fixture(scope="module")
def gateway_lab(lab_up, tmp_path_factory):
    """CT 100 on the bridge, started, and two SIMULATED SGLang servers on the lab host; torn down afterwards."""
    dev = tmp_path_factory.mktemp("gpus")
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_bytes(b"")
    run(LAB, "ct-destroy", CT, check=False)
    run(LAB, "ct-create", CT, "--hostname", "gw" + CT)
    procs = []
    try:
        run("/usr/sbin/pct", "set", CT, "--net0",
            "name=eth0,bridge=gpuserve-br0,ip=%s/24,hwaddr=BC:24:11:66:01:00,type=veth" % CT_IP)
        run("/usr/sbin/pct", "start", CT)
        env = dict(os.environ, GPUSIM_DEV_DIR=str(dev), GPUSIM_WARMUP_S="0.2", GPUSIM_TOKENS_PER_S="40")
        for port in PORTS:
            procs.append(subprocess.Popen(
                [sys.executable, STANDIN, "--model-path", "sim/Qwen-sim", "--tp-size", "1", "--host", HOST_IP,
                 "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
        for port in PORTS:
            up(port)
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        run(LAB, "ct-destroy", CT, check=False)


@pytest.fixture(scope="module")
def deployed(gateway_lab):
    code, out = deploy()
    assert code == 0, out[-4000:]
    return out


def test_the_gateway_runs_with_both_servers_registered_and_routes_to_each(deployed):
    assert recap_changed(deployed) > 0
    found = workers()
    assert sorted(found) == sorted(w["url"] for w in WORKERS)
    for w in WORKERS:
        got = found[w["url"]]
        assert got["status"] == "ready" and got["is_healthy"] is True, got
        assert got["labels"]["replica"] == w["labels"]["replica"] and got["model_id"] == "sim/Qwen-sim"
    routed = set()
    for _ in range(4):
        status, headers, body = call("/generate", {"text": "hello", "sampling_params": {"max_new_tokens": 4}},
                                     auth=False)
        assert status == 200 and body["meta_info"]["completion_tokens"] == 4
        routed.add(headers["x-smg-routed-worker-id"])
    assert routed == set(found), routed


def test_the_key_is_on_no_command_line_and_only_root_reads_it(deployed):
    secret = key()
    pid = main_pid()
    assert pid not in ("", "0")
    assert secret not in in_ct("cat", "/proc/%s/cmdline" % pid).stdout
    assert secret not in in_ct("systemctl", "cat", UNIT).stdout
    assert secret not in in_ct("systemctl", "show", UNIT).stdout
    assert in_ct("stat", "-c", "%a %U", "/etc/gpuserve/smg/control-plane.keys").stdout.split() == ["600", "root"]
    assert in_ct("stat", "-c", "%a", "/etc/gpuserve/smg").stdout.strip() == "700"
    with pytest.raises(urllib.error.HTTPError) as exc:
        call("/workers", auth=False)
    assert exc.value.code == 401


def test_a_rerun_changes_nothing_and_keeps_the_gateway(deployed):
    pid = main_pid()
    code, out = deploy()
    assert code == 0 and recap_changed(out) == 0, out[-3000:]
    assert main_pid() == pid


def test_check_mode_on_the_running_gateway_reports_no_change(deployed):
    pid = main_pid()
    code, out = deploy("--check")
    assert code == 0 and recap_changed(out) == 0, out[-3000:]
    assert main_pid() == pid


def test_a_setting_smg_refuses_fails_before_the_running_gateway_is_touched(deployed):
    pid, before = main_pid(), workers()
    code, out = deploy("-e", json.dumps({"sglang_gateway_settings": {"policy": "round_robin",
                                                                     "health_check_interval_secs": "often"}}))
    flat = " ".join(out.split())  # the yaml callback folds long lines
    assert code != 0
    assert "TASK [gpuserve.sglang.sglang_gateway : The launch arguments (checked with smg's parser first)]" in flat
    assert ("smg 1.13.0 refuses these launch arguments: gpuserve_smg_launch.py: error: argument "
            "--health-check-interval-secs: invalid int value: 'often'") in flat, out[-3000:]
    assert main_pid() == pid and sorted(workers()) == sorted(before)
    assert '"often"' not in in_ct("cat", "/etc/gpuserve/smg/launch-args.json").stdout


def test_removal_drains_the_request_in_flight_and_a_rerun_registers_the_server_again(deployed):
    done = {}

    def slow():
        status, headers, body = call("/generate", {"text": "long", "sampling_params": {"max_new_tokens": 400}},
                                     auth=False)
        done.update(status=status, tokens=body["meta_info"]["completion_tokens"], at=time.monotonic(),
                    url=headers["x-smg-routed-worker-id"])
    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 10
    busy = []
    while not busy and time.monotonic() < deadline:
        busy = [url for url, w in workers().items() if w.get("load")]
        time.sleep(0.05)
    assert len(busy) == 1, workers()
    args = {"gateway_url": GATEWAY, "url": busy[0], "state": "absent", "api_key": key(), "drain_timeout": 60}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=VENV_BIN + ":" + os.environ["PATH"])
    out = run(os.path.join(VENV_BIN, "ansible"), "localhost", "-m", "gpuserve.sglang.smg_worker", "-a",
              json.dumps(args), "-o", check=False, timeout=120, env=env)
    returned = time.monotonic()
    thread.join(timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert key() not in out.stdout
    result = json.loads(out.stdout.split("=>", 1)[1])
    assert result["action"] == "removed" and result["drained_after_s"] > 0.5, result
    # The request ran to its end on the draining server, and the module returned only after it.
    assert done["status"] == 200 and done["tokens"] == 400 and done["url"] == busy[0]
    assert done["at"] <= returned
    assert busy[0] not in workers()
    code, out = deploy()
    assert code == 0 and recap_changed(out) == 1, out[-3000:]
    assert workers()[busy[0]]["status"] == "ready"


# --- A replica of the fleet (issue 14, item 3): CT 101, the lab's deployed server, on the bridge behind the gateway,
# with the two SIMULATED servers above as the other replicas. deploy_eagle3.yml takes it out of the gateway, waits
# until nothing is in flight to it, restarts it through the lifecycle and registers it again.
REPLICA_IP = "10.66.0.101"
REPLICA = "http://%s:30000" % REPLICA_IP
REPLICA_NET0 = "name=eth0,bridge=gpuserve-br0,ip=%s/24,hwaddr=BC:24:11:66:01:01,type=veth" % REPLICA_IP
FLEET = WORKERS + [{"url": REPLICA, "labels": {"replica": "ct101"}}]
MANIFEST = "/var/lib/gpuserve/sglang-manifest.json"


def lab_args(**changes):
    """The lab inventory's sglang_server_args, listening on the bridge, with changes."""
    with open(os.path.join(ROOT, "inventory", "lab", "group_vars", "sglang.yml")) as src:
        args = yaml.safe_load(src)["sglang_server_args"]
    args["host"] = "0.0.0.0"
    args.update(changes)
    return args


def deploy_replica(*extra, **changes):
    evars = {"sglang_server_gateway_worker_url": REPLICA, "sglang_gateway_workers": FLEET,
             "sglang_server_args": lab_args(**changes)}
    code, out = finish(playbook("playbooks/deploy_eagle3.yml", "-e", json.dumps(evars), *extra), limit=900)
    assert key() not in out, "the control-plane key reached the playbook's output"
    return code, out


def in_replica(*argv):
    return run("/usr/sbin/pct", "exec", "101", "--", *argv).stdout


def replica_argv():
    return json.loads(in_replica("cat", "/etc/gpuserve/sglang.args"))["argv"]


def arg(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def ct101_changed(out):
    found = re.findall(r"^ct101\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)", out, re.M)
    assert found, out[-3000:]
    return int(found[-1][0]), int(found[-1][1])


class Background(object):
    """A context that runs self.run in a thread from enter until exit, which sets self.halt and joins it."""

    def __init__(self):
        self.halt = threading.Event()

    def run(self):
        raise NotImplementedError

    def __enter__(self):
        self.main = threading.Thread(target=self.run, daemon=True)
        self.main.start()
        return self

    def __exit__(self, *exc):
        self.halt.set()
        self.main.join(timeout=10)


class Load(Background):
    """A bounded load through the gateway: request i starts at i / rate seconds, `count` requests at most, and it
    ends by itself (or at exit). Lab addresses only. Each: start, end, HTTP status or error, tokens, the worker
    the gateway routed it to."""

    def __init__(self, rate=4.0, count=800, tokens=12):
        super().__init__()
        self.rate, self.count, self.tokens = rate, count, tokens
        self.results, self.threads = [], []

    def one(self):
        began = time.time()
        try:
            status, headers, body = call("/generate", {"text": "roll", "sampling_params": {
                "max_new_tokens": self.tokens}}, auth=False, timeout=60)
            got = dict(status=status, tokens=body["meta_info"]["completion_tokens"],
                       worker=headers.get("x-smg-routed-worker-id"))
        except Exception as exc:  # any failure counts, whatever its kind
            got = dict(status=None, error=repr(exc), worker=None, tokens=0)
        self.results.append(dict(got, began=began, ended=time.time()))

    def run(self):
        t0 = time.monotonic()
        for i in range(self.count):
            if self.halt.wait(max(0.0, t0 + i / self.rate - time.monotonic())):
                break
            thread = threading.Thread(target=self.one, daemon=True)
            thread.start()
            self.threads.append(thread)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        for thread in self.threads:
            thread.join(timeout=90)

    def failed(self):
        return [r for r in self.results if r["status"] != 200 or r["tokens"] != self.tokens]

    def to(self, url):
        return [r for r in self.results if r["worker"] == url]


class Watch(Background):
    """The gateway's worker list every 0.25 s: (time, {url: (status, is_healthy)})."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def run(self):
        while not self.halt.wait(0.25):
            try:
                self.seen.append((time.time(), {u: (w["status"], w["is_healthy"]) for u, w in workers().items()}))
            except OSError as exc:
                self.seen.append((time.time(), {"error": repr(exc)}))

    def healthy_counts(self):
        return [sum(1 for s in ws.values() if s == ("ready", True)) for t, ws in self.seen]

    def out_times(self, url):
        """When the gateway did not list url as ready."""
        return [t for t, ws in self.seen if ws.get(url, (None, None))[0] != "ready"]


@pytest.fixture(scope="module")
def replica(deployed):
    """CT 101 on the bridge at 10.66.0.101, serving there (host 0.0.0.0) and registered with the gateway by its own
    deploy; back on loopback only with the lab's own settings afterwards (one more deploy)."""
    run("/usr/sbin/pct", "set", "101", "--net0", REPLICA_NET0)
    try:
        run("/usr/sbin/pct", "reboot", "101", timeout=300)
        code, out = deploy_replica()
        assert code == 0, out[-4000:]
        assert workers()[REPLICA]["status"] == "ready", workers()
        yield out
    finally:
        run("/usr/sbin/pct", "set", "101", "--delete", "net0", check=False)
        run("/usr/sbin/pct", "reboot", "101", check=False, timeout=300)
        code, out = finish(playbook("playbooks/deploy_eagle3.yml"), limit=900)
        assert code == 0, out[-4000:]


def test_a_deploy_rolls_the_replica_under_load_with_no_failed_request(replica):
    assert workers()[REPLICA]["labels"]["replica"] == "ct101"
    faults = gateway_faults()
    with Watch() as watch, Load() as load:
        deadline = time.monotonic() + 30
        while len(load.to(REPLICA)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(load.to(REPLICA)) >= 3, "the gateway routed nothing to the replica before the change"
        code, out = deploy_replica(mem_fraction_static=0.8)
        time.sleep(2)
    assert code == 0, out[-4000:]
    assert ct101_changed(out)[0] > 0
    flat = " ".join(out.split())
    assert "take the server out of the gateway on gw100 and drain it" in flat
    assert "register the server with the gateway on gw100, wait until healthy" in flat
    # no request failed, and at every look the gateway had a healthy replica to route to
    assert load.failed() == [], load.failed()[:5]
    assert gateway_faults() == faults, "the gateway retried requests or saw worker errors during the rollout"
    assert len(load.results) >= 40
    assert watch.healthy_counts() and min(watch.healthy_counts()) >= 2, watch.seen
    # the gateway stopped routing to the replica before it stopped, and no request to it overlapped the restart
    m = json.loads(in_replica("cat", MANIFEST))
    begin = datetime.datetime.fromisoformat(m["times"]["begin"]).timestamp()
    stopped = begin + float(m["times"]["validate_and_stop_s"])
    ready = stopped + float(m["times"]["release_and_gate_s"]) + float(m["times"]["start_to_ready_s"])
    out_at = watch.out_times(REPLICA)
    assert out_at and min(out_at) < stopped, (out_at[:3], stopped)
    for r in load.to(REPLICA):
        assert r["ended"] <= stopped or r["began"] >= ready, (r, stopped, ready)
    assert any(r["began"] >= ready for r in load.to(REPLICA)), "the replica served nothing after it came back"
    assert workers()[REPLICA]["status"] == "ready"
    assert arg(replica_argv(), "--mem-fraction-static") == "0.8" and arg(replica_argv(), "--host") == "0.0.0.0"
    latencies = sorted(r["ended"] - r["began"] for r in load.results)
    print("ROLLOUT requests=%d p50=%.3f s p99=%.3f s to_replica=%d" % (
        len(latencies), latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)], len(load.to(REPLICA))))


def test_a_rerun_of_the_rolled_deploy_changes_nothing_at_the_gateway_either(replica):
    worker_id = workers()[REPLICA]["id"]
    code, out = deploy_replica(mem_fraction_static=0.8)
    assert code == 0 and ct101_changed(out) == (0, 0), out[-3000:]
    assert workers()[REPLICA]["id"] == worker_id


def test_a_new_config_that_cannot_start_is_rolled_back_and_rejoins_while_the_others_serve(replica):
    faults, before = gateway_faults(), replica_argv()
    with Watch() as watch, Load() as load:
        # SGLang accepts the address; the container has no such address, so the bind fails after the stop
        code, out = deploy_replica(host="192.0.2.1")
        time.sleep(2)
    flat = " ".join(out.split())
    assert code != 0 and ct101_changed(out)[1] == 1, out[-3000:]
    assert "the restart failed at" in flat and "sglang.service is failed" in flat, out[-3000:]
    assert "Rollback: done" in flat and "error while attempting to bind" in flat, out[-3000:]
    # the rollout's summary: which replica runs which config (here the one replica of the play, rolled back)
    assert re.search(r"the rollout stopped at ct101 \(its failure is above\)\. Which replica runs which config: "
                     r"ct101: FAILED in this run; rollback: done: .*; last manifest: args [0-9a-f]{10}, SGLang "
                     r"[0-9a-f]{12} \(rollback, [0-9T:-]{19}\), written by this run", flat), out[-3000:]
    assert load.failed() == [], load.failed()[:5]
    assert gateway_faults() == faults, "the gateway retried requests or saw worker errors during the rollback"
    assert min(watch.healthy_counts()) >= 2, watch.seen
    assert workers()[REPLICA]["status"] == "ready" and workers()[REPLICA]["is_healthy"] is True
    # the last verified config serves again, verified by the same lifecycle
    m = json.loads(in_replica("cat", MANIFEST))
    assert m["phase"] == "rollback" and m["gate"]["passed"] is True and m["env_proof"]["ok"] is True, m
    assert "192.0.2.1" not in m["argv"]
    assert replica_argv() == before and arg(before, "--host") == "0.0.0.0"


def all_healthy():
    """Every worker of the fleet listed, ready and healthy (after the roll and the rollback, the gateway's health
    checks of the replica that came back may still be catching up)."""
    listed = workers()
    return all(listed.get(w["url"], {}).get("status") == "ready" and listed[w["url"]].get("is_healthy") is True
               for w in FLEET)


def test_a_replica_is_not_taken_out_when_too_few_others_are_healthy(replica):
    wait_for(all_healthy, 60, "all three workers ready and healthy at the gateway")
    manifest, pid = in_replica("cat", MANIFEST), in_replica("systemctl", "show", "-p", "MainPID", "--value", "sglang")
    worker_id = workers()[REPLICA]["id"]
    code, out = deploy_replica("-e", json.dumps({"sglang_server_gateway_keep_healthy": 3}), mem_fraction_static=0.75)
    flat = " ".join(out.split())
    assert code != 0 and ct101_changed(out)[1] == 1, out[-3000:]
    assert ("not taking %s out of the gateway: 2 other worker(s) are ready and healthy" % REPLICA) in flat, out[-3000:]
    assert "keep_healthy asks for 3; nothing was changed" in flat and "Rollback: not needed" in flat
    # the server was not stopped and stays registered, with the same registration
    assert in_replica("systemctl", "show", "-p", "MainPID", "--value", "sglang") == pid
    assert in_replica("cat", MANIFEST) == manifest
    assert workers()[REPLICA]["id"] == worker_id and workers()[REPLICA]["status"] == "ready"
