"""What the gateway's lab tests share (test_gateway.py, test_fleet.py): CT 100 on the lab bridge running SGLang's
gateway (SMG), calls to its API and metrics, and the bounded load and the watch that a rollout is judged by."""
import contextlib
import json
import os
import subprocess
import threading
import time
import urllib.request

from labutil import ROOT

LAB = os.path.join(ROOT, "lab", "lab")
CT, CT_IP, HOST_IP = "100", "10.66.0.100", "10.66.0.1"
GATEWAY = "http://%s:30080" % CT_IP
KEY_FILE = "/var/lib/gpuserve-lab/smg/admin.key"
UNIT = "smg-gateway.service"


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


def gateway_faults(metrics_host="127.0.0.1"):
    """The gateway's own counts of retried requests and worker errors (its Prometheus endpoint, read in CT 100 at
    metrics_host: loopback by default): SMG retries a failed request on another worker, so a replica stopped with
    requests still routed to it shows here even when every client got its answer."""
    text = in_ct("python3", "-c", "import urllib.request as u; print(u.urlopen("
                 "'http://%s:29000/metrics', timeout=10).read().decode())" % metrics_host).stdout
    assert "smg_" in text, text[:500]
    counts = {"smg_worker_retries_total": 0.0, "smg_worker_errors_total": 0.0}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in counts:
            counts[name] += float(line.rsplit(" ", 1)[1])
    return counts


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


@contextlib.contextmanager
def gateway_container():
    """CT 100 made from the cached rootfs with a net0 on the lab bridge, started; destroyed afterwards."""
    run(LAB, "ct-destroy", CT, check=False)
    run(LAB, "ct-create", CT, "--hostname", "gw" + CT)
    try:
        run("/usr/sbin/pct", "set", CT, "--net0",
            "name=eth0,bridge=gpuserve-br0,ip=%s/24,hwaddr=BC:24:11:66:01:00,type=veth" % CT_IP)
        run("/usr/sbin/pct", "start", CT)
        yield
    finally:
        run(LAB, "ct-destroy", CT, check=False)


def latency_summary(results):
    """(count, p50, p99) of request durations in seconds; (0, None, None) for none."""
    latencies = sorted(r["ended"] - r["began"] for r in results)
    if not latencies:
        return 0, None, None
    n = len(latencies)
    return n, latencies[n // 2], latencies[min(n - 1, int(n * 0.99))]
