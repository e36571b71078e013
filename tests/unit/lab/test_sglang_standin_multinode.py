"""The lab's SIMULATED SGLang server across nodes (--nnodes/--node-rank/--dist-init-addr/--dist-timeout), as SGLang
0.5.23 runs one tensor-parallel server over several nodes: global scheduler ranks per node, a rendezvous with rank 0
before rank 0 is ready, a dummy health server on the other nodes, rank 0's shutdown ending them, a lost link
aborting the group. Runs real stand-in processes on this host (loopback, free ports, simulated GPU files in a
temporary directory); no lab needed."""
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.gpuserve.sglang.tests.support.net import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")
SPEC = importlib.util.spec_from_file_location("sglang_standin", STANDIN)
standin = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(standin)


def status(port, path):
    """(HTTP status, body) of GET http://127.0.0.1:port/path; (None, None) when nothing answers."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return None, None


def until(check, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


class Node:
    def __init__(self, proc, logfile, port):
        self.proc, self.logfile, self.port = proc, logfile, port

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        with open(self.logfile) as f:
            return f.read()

    def wait_log(self, text, timeout=10):
        until(lambda: text in self.log(), timeout, "%r in the log of %d:\n%s" % (text, self.pid, self.log()))

    def exit_code(self, timeout=10):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail("stand-in %d still running after %s s:\n%s" % (self.pid, timeout, self.log()))

    def ready(self, timeout=10):
        until(lambda: status(self.port, "/health_generate")[0] == 200 or self.proc.poll() is not None, timeout,
              "rank 0's /health_generate")
        assert self.proc.poll() is None, self.log()

    def children(self):
        """{title: [held /dev/nvidiaN names]} of this process's children named sglang::*."""
        found = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % pid) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.pid:
                    continue
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    title = f.read().split(b"\0")[0].decode()
                held = sorted(os.path.basename(os.readlink("/proc/%s/fd/%s" % (pid, fd)))
                              for fd in os.listdir("/proc/%s/fd" % pid))
            except (OSError, ValueError, IndexError):
                continue
            if title.startswith("sglang::"):
                found[title] = [h for h in held if h.startswith("nvidia") and h[6:].isdigit()]
        return found


@pytest.fixture
def cluster(tmp_path):
    """start(rank, ...) runs one stand-in node; all of them (and their process groups) end with the test."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_bytes(b"")
    env = dict(os.environ, GPUSIM_DEV_DIR=str(dev), GPUSIM_WARMUP_S="0.2", GPUSIM_WATCHDOG_S="0.1")
    env.pop("GPUSIM_ORPHAN_WORKERS", None)
    dist_port = free_port()
    nodes = []

    def start(rank, nnodes=2, tp=4, dist_timeout=5, dist=True, host="127.0.0.1", extra=()):
        port = free_port()
        argv = [sys.executable, STANDIN, "--model-path", "sim/x", "--tp-size", str(tp), "--host", host,
                "--port", str(port)]
        if nnodes != 1:
            argv += ["--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-timeout", str(dist_timeout)]
            if dist:
                argv += ["--dist-init-addr", "127.0.0.1:%d" % dist_port]
        logfile = str(tmp_path / ("node%d-%d.log" % (rank, len(nodes))))
        with open(logfile, "wb") as out:
            proc = subprocess.Popen(argv + list(extra), env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        node = Node(proc, logfile, port)
        nodes.append(node)
        return node

    try:
        yield start
    finally:
        for node in nodes:
            if node.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.pid, signal.SIGKILL)  # the stand-in and its schedulers (own session)
                node.proc.wait(timeout=10)


def test_two_nodes_form_one_server_and_only_rank_0_stops_it(cluster):
    r0 = cluster(0)
    r0.wait_log("listening on 127.0.0.1:")
    time.sleep(0.3)
    assert status(r0.port, "/health")[0] is None  # no API before every node joined (SGLang: connection refused)
    assert "joined rank" not in r0.log() and r0.proc.poll() is None

    r1 = cluster(1)
    until(lambda: status(r1.port, "/health")[0] == 200, 10, "rank 1's dummy health")
    assert status(r0.port, "/health_generate")[0] != 200  # rank 1 answers 200 before the group formed
    r0.ready()
    log0 = r0.log()
    assert (log0.index("joined rank 1 from 127.0.0.1:") < log0.index("all 2 nodes joined")
            < log0.index("ready to roll"))
    r1.wait_log("all 2 nodes joined")
    for path in ("/health", "/health_generate", "/ping"):
        assert status(r1.port, path) == (200, b""), path
    for path in ("/generate", "/v1/models", "/server_info"):
        assert status(r1.port, path)[0] == 404, path

    code, body = status(r0.port, "/server_info")
    info = json.loads(body)
    assert code == 200 and (info["nnodes"], info["node_rank"], info["tp_size"]) == (2, 0, 4)

    # global tp ranks, each on the node's local ordinal; the detokenizer on rank 0 only
    assert r0.children() == {"sglang::scheduler_TP0": ["nvidia0"], "sglang::scheduler_TP1": ["nvidia1"],
                             "sglang::detokenizer": []}
    assert r1.children() == {"sglang::scheduler_TP2": ["nvidia0"], "sglang::scheduler_TP3": ["nvidia1"]}

    r1.proc.send_signal(signal.SIGTERM)
    r1.wait_log("SIGTERM on node rank 1: waiting for rank 0's shutdown (only rank 0 stops a multi-node server)")
    time.sleep(1.2)
    assert r1.proc.poll() is None and len(r1.children()) == 2
    assert status(r0.port, "/health_generate")[0] == 200 and status(r1.port, "/health")[0] == 200

    r0.proc.send_signal(signal.SIGTERM)
    assert r0.exit_code() == 0
    with contextlib.suppress(ProcessLookupError):
        r1.proc.send_signal(signal.SIGTERM)  # the role's order: rank 0, then the others
    assert r1.exit_code() == 0
    assert "stopping: shutdown sent to 1 node(s)" in r0.log()
    assert "shutdown received from rank 0" in r1.log()
    assert "watchdog" not in r0.log() + r1.log()


def test_a_node_killed_aborts_rank_0(cluster):
    r0, r1 = cluster(0, tp=2), cluster(1, tp=2)
    r0.ready()
    r1.proc.send_signal(signal.SIGKILL)
    assert r0.exit_code() == 1
    assert "SIMULATED NCCL watchdog: lost node rank 1" in r0.log()
    assert "shutdown sent" not in r0.log()


def test_rank_0_killed_ends_the_other_node_with_1(cluster):
    r0, r1 = cluster(0, tp=2), cluster(1, tp=2)
    r0.ready()
    r1.wait_log("all 2 nodes joined")
    r0.proc.send_signal(signal.SIGKILL)
    assert r1.exit_code() == 1
    assert "lost the link to rank 0 at 127.0.0.1:" in r1.log() and "shutdown received" not in r1.log()


def test_rank_0_alone_gives_up_after_the_dist_timeout_naming_the_missing_rank(cluster):
    r0 = cluster(0, nnodes=3, tp=3, dist_timeout=2)
    r0.wait_log("listening on")
    started = time.monotonic()
    assert r0.exit_code(timeout=10) == 1
    assert time.monotonic() - started >= 1.5
    assert "node rank(s) 1, 2 never joined" in r0.log()
    assert "ready to roll" not in r0.log()


def test_rank_1_alone_answers_its_dummy_health_then_gives_up_after_the_dist_timeout(cluster):
    r1 = cluster(1, dist_timeout=2)
    until(lambda: status(r1.port, "/health_generate")[0] == 200, 10, "rank 1's dummy health")
    assert status(r1.port, "/ping") == (200, b"")
    r1.wait_log("retrying every 0.5 s")
    assert r1.exit_code(timeout=10) == 1
    assert "rendezvous timed out after 2 s (--dist-timeout): rank 0 at 127.0.0.1:" in r1.log()


@pytest.mark.parametrize("rank,nnodes,tp,dist,why", [
    (0, 2, 4, False, "needs --dist-init-addr"),
    (1, 2, 4, False, "needs --dist-init-addr"),
    (2, 2, 4, True, "--node-rank 2 is outside 0..1"),
    (0, 2, 3, True, "tp_size must be divisible by number of nodes"),
])
def test_an_inconsistent_set_is_refused(cluster, rank, nnodes, tp, dist, why):
    node = cluster(rank, nnodes=nnodes, tp=tp, dist=dist)
    assert node.exit_code() == 1
    assert "ERROR: " in node.log() and why in node.log()
    assert "scheduler" not in node.log().split("ERROR: ", 1)[1]


def test_rank_0_stopped_before_the_group_formed_ends_the_joined_nodes_with_0(cluster):
    r0, r1 = cluster(0, nnodes=3, tp=3), cluster(1, nnodes=3, tp=3)
    r0.wait_log("joined rank 1 from")
    r0.proc.send_signal(signal.SIGTERM)
    assert r0.exit_code() == 0 and r1.exit_code() == 0
    assert "stopping: shutdown sent to 1 node(s)" in r0.log() and "shutdown received from rank 0" in r1.log()


def test_rank_0_exits_1_when_the_dist_init_port_is_taken(cluster):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        r0 = cluster(0, extra=["--dist-init-addr", "127.0.0.1:%d" % taken.getsockname()[1]])  # the last one counts
        assert r0.exit_code() == 1
    assert "cannot listen on 127.0.0.1:" in r0.log() and "Address already in use" in r0.log()


def test_rank_0_listens_on_every_address_when_the_dist_init_host_is_not_its_own():
    port = free_port()
    args = standin.parse_args(["--model-path", "m", "--tp-size", "2", "--nnodes", "2",
                               "--dist-init-addr", "192.0.2.1:%d" % port])[0]
    group = standin.Rank0Group(args, standin.Node())
    where = group.listen()
    try:
        assert group.sock.getsockname() == ("0.0.0.0", port)
        assert where == "0.0.0.0:%d (192.0.2.1 is not an address of this node)" % port
    finally:
        group.sock.close()


def test_a_rank_1_node_that_cannot_bind_its_host_exits_1(cluster):
    r1 = cluster(1, host="192.0.2.1")  # TEST-NET-1: not an address of this host
    assert r1.exit_code() == 1
    assert "error while attempting to bind on address ('192.0.2.1'" in r1.log()
    assert "rendezvous" not in r1.log()


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_node_whose_port_is_outside_0_65535_exits_1_instead_of_living_on_without_serving(cluster, port):
    # bind() raises OverflowError there, not OSError: the stand-in's process used to outlive its dead main thread
    node = cluster(0, nnodes=1, tp=2, extra=("--port", port))
    assert node.exit_code() == 1
    assert "error while attempting to bind on address ('127.0.0.1', %s): bind(): port must be 0-65535" % port \
        in node.log()


def test_a_single_node_is_unchanged(cluster):
    node = cluster(0, nnodes=1, tp=2)
    node.ready()
    code, body = status(node.port, "/server_info")
    info = json.loads(body)
    assert (info["nnodes"], info["node_rank"], info["dist_init_addr"]) == (1, 0, None)
    assert node.children() == {"sglang::scheduler_TP0": ["nvidia0"], "sglang::scheduler_TP1": ["nvidia1"],
                               "sglang::detokenizer": []}
    assert status(node.port, "/ping")[0] == 404  # as before: rank 0 serves no /ping
    node.proc.send_signal(signal.SIGTERM)
    assert node.exit_code() == 0
    assert "rendezvous" not in node.log() and "multi-node" not in node.log() and "shutdown sent" not in node.log()


@pytest.mark.parametrize("text,expected", [
    ("10.0.0.11:20000", ("10.0.0.11", 20000)),
    ("kimi-a0:20000", ("kimi-a0", 20000)),
    ("[fd00::1]:20000", ("fd00::1", 20000)),
])
def test_dist_init_addr_forms(text, expected):
    assert standin.parse_addr(text) == expected


@pytest.mark.parametrize("text", ["fd00::1:20000", "10.0.0.11", "10.0.0.11:", ":20000", "h:0", "h:70000"])
def test_dist_init_addr_refused(text):
    with pytest.raises(ValueError):
        standin.parse_addr(text)


def test_check_parallel():
    def problem(*argv):
        return standin.check_parallel(standin.parse_args(["--model-path", "m"] + list(argv))[0])

    assert problem() is None
    assert problem("--tp-size", "8", "--nnodes", "2", "--node-rank", "1", "--nccl-init-addr", "h:1") is None
    assert "dist-timeout" in problem("--nnodes", "2", "--tp-size", "2", "--dist-init-addr", "h:1",
                                     "--dist-timeout", "0")
    assert "data-parallel" in problem("--nnodes", "2", "--dp-size", "2", "--tp-size", "2", "--dist-init-addr", "h:1")
    assert "IPv6" in problem("--nnodes", "2", "--tp-size", "2", "--dist-init-addr", "fd00::1:1")
    assert "outside" in problem("--node-rank", "1")
