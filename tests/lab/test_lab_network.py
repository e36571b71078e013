"""The lab's host-only network: a container given a netN on the lab bridge (PVE syntax, set with
the lab pct) comes up with that static address, reaches the lab host on the bridge, and has no route beyond it.

A second container, CT 102, is made from the cached rootfs for this and destroyed afterwards; CT 101 and its
server are not touched. Needs `lab/lab up`.
"""
import http.server
import os
import subprocess
import threading

import pytest

from labutil import LAB_MARKS, ROOT

pytestmark = LAB_MARKS

LAB = os.path.join(ROOT, "lab", "lab")
BRIDGE = "gpuserve-br0"  # lab/lab: BRIDGE, BRIDGE_CIDR
HOST_IP = "10.66.0.1"
CT = "102"
CT_IP = "10.66.0.102"


def run(*argv, check=True, timeout=120):
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def in_ct(*argv, check=True):
    return run("/usr/sbin/pct", "exec", CT, "--", *argv, check=check)


@pytest.fixture(scope="module")
def ct102(lab_up):
    """CT 102 from the cached rootfs, stopped; destroyed after the module's tests."""
    run(LAB, "ct-create", CT, "--hostname", "ct" + CT)
    yield
    run(LAB, "ct-destroy", CT, check=False)


def start_with_net0(net0):
    run(LAB, "ct-stop", CT)
    run("/usr/sbin/pct", "set", CT, "--net0", net0)
    return run("/usr/sbin/pct", "start", CT, check=False, timeout=180)


@pytest.fixture
def ct_on_the_bridge(ct102):
    out = start_with_net0("name=eth0,bridge=%s,ip=%s/24,hwaddr=BC:24:11:66:01:02,type=veth" % (BRIDGE, CT_IP))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture
def host_listener():
    """An HTTP server on the lab host's bridge address (the gateway's place in the fleet), one port."""
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"lab host\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer((HOST_IP, 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_bridge_is_host_only():
    addrs = run("ip", "-4", "-o", "addr", "show", "dev", BRIDGE).stdout
    assert " %s/24 " % HOST_IP in addrs, addrs
    # nothing is masqueraded for the lab's subnet (no NAT out of it)
    rules = run("sh", "-c", "nft list ruleset 2>/dev/null; iptables-save -t nat 2>/dev/null", check=False).stdout
    assert "10.66.0." not in rules, rules


def test_a_container_on_the_bridge_reaches_the_lab_host_and_nothing_beyond(ct_on_the_bridge, host_listener):
    addr = in_ct("ip", "-4", "-o", "addr", "show", "dev", "eth0").stdout
    assert " %s/24 " % CT_IP in addr, addr
    link = in_ct("ip", "-o", "link", "show", "dev", "eth0").stdout
    assert "bc:24:11:66:01:02" in link, link
    got = in_ct("curl", "-sS", "--max-time", "5", "http://%s:%d/" % (HOST_IP, host_listener))
    assert got.stdout == "lab host\n", got.stderr
    routes = in_ct("ip", "-4", "route", "show").stdout
    assert "default" not in routes, routes
    beyond = in_ct("ip", "-4", "route", "get", "192.0.2.1", check=False)
    assert beyond.returncode != 0 and "unreachable" in beyond.stderr, (beyond.stdout, beyond.stderr)


def test_a_net_on_another_bridge_is_refused_with_what_the_lab_has(ct102):
    out = start_with_net0("name=eth0,bridge=vmbr0,ip=dhcp,hwaddr=BC:24:11:66:01:02")
    assert out.returncode != 0
    assert "the lab has one host-only bridge, %s (got bridge='vmbr0')" % BRIDGE in out.stderr + out.stdout
