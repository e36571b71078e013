"""The sglang_gateway role and the smg_worker module against the real SMG 1.13.0.

CT 100 is made from the cached rootfs with a net0 on the lab bridge and runs the gateway (the lab host has no
systemd); two SIMULATED SGLang servers (the lab's stand-in) run on the lab host at its bridge address, so the
gateway reaches its workers over the bridge as it would reach other containers. CT 100 is destroyed afterwards;
CT 101 is not touched. The rolling deploy of replicas behind it is test_fleet.py. Needs `lab/lab up`.
"""
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from gatewayutil import GATEWAY, HOST_IP, UNIT, call, gateway_container, in_ct, key, run, workers
from labutil import LAB_MARKS, ROOT, VENV_BIN, finish, playbook

pytestmark = LAB_MARKS

STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")
PORTS = (31101, 31102)
WORKERS = [{"url": "http://%s:%d" % (HOST_IP, port), "labels": {"replica": "sim%d" % port}} for port in PORTS]


def deploy(*extra):
    # SMG's own health timings (an empty sglang_gateway_worker_health), not inventory/lab's short ones: this module
    # keeps the production values tested (lane fleet's rolling deploys run with the lab's)
    code, out = finish(playbook("playbooks/gateway.yml", "-e", json.dumps({"sglang_gateway_workers": WORKERS,
                                                                          "sglang_gateway_worker_health": {}}),
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
    procs = []
    with gateway_container():
        try:
            env = dict(os.environ, GPUSIM_DEV_DIR=str(dev), GPUSIM_WARMUP_S="0.2", GPUSIM_TOKENS_PER_S="40",
                       GPUSIM_WATCHDOG_S="0.1")
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
