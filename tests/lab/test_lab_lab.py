"""Behaviour of the running lab (lab/lab up): the lab pct, the SIMULATED GPUs seen from host and container, the
loopback sshd + inventory, and the SIMULATED SGLang server. Select with `pytest -m lab`; skipped when the lab is
not up (needs root and `lab/lab up`)."""
import json
import os
import re
import subprocess
import time

import pytest

from labutil import LAB_MARKS, VMID, lab_skip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURES = os.path.join(ROOT, "tests", "fixtures", "nvidia-smi-h200")


pytestmark = LAB_MARKS


def sh(*argv, env=None, check=False, timeout=120):
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, env=env, timeout=timeout)


def pct(*args, env=None):
    return sh("/usr/sbin/pct", *args, env=env)


def smi(*args):
    return sh("/usr/local/bin/nvidia-smi", *args)


def used(gpu, where="host"):
    argv = ["--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", str(gpu)]
    res = smi(*argv) if where == "host" else pct("exec", VMID, "--", "nvidia-smi", *argv)
    assert res.returncode == 0, res
    return int(res.stdout)


def read_capture(name):
    with open(os.path.join(CAPTURES, name + ".out"), encoding="utf-8") as f:
        return f.read()


# ---- lab pct ---------------------------------------------------------------------------------------------------

def test_pct_exec_passes_the_exit_code_through():
    assert pct("exec", VMID, "--", "true").returncode == 0
    assert pct("exec", VMID, "--", "sh", "-c", "exit 7").returncode == 7


def test_pct_exec_on_a_missing_ct_exits_255():
    res = pct("exec", "999", "--", "true")
    assert res.returncode == 255
    assert "999.conf' does not exist" in res.stderr


def test_pct_on_a_stopped_ct_exits_255_and_start_stop_are_not_idempotent():
    vmid = "199"
    lab = os.path.join(ROOT, "lab", "lab")
    try:
        assert sh(lab, "ct-create", vmid, timeout=300).returncode == 0
        assert pct("status", vmid).stdout == "status: stopped\n"
        res = pct("exec", vmid, "--", "true")
        assert res.returncode == 255 and "not running" in res.stderr
        res = pct("stop", vmid)
        assert (res.returncode, res.stderr) == (255, "CT %s not running\n" % vmid)
    finally:
        sh(lab, "ct-destroy", vmid)
    res = pct("start", VMID)
    assert (res.returncode, res.stderr) == (255, "CT %s already running\n" % VMID)


def test_pct_exec_resets_path_drops_ssl_overrides_and_keeps_the_rest():
    env = dict(os.environ, PATH="/opt/elsewhere/bin:/usr/bin:/bin", SSL_CERT_FILE="/host/only.pem",
               SSL_CERT_DIR="/host/only", GPUSERVE_PROBE="kept")
    res = pct("exec", VMID, "--", "/usr/bin/env", env=env)
    seen = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    assert seen["PATH"] == "/sbin:/bin:/usr/sbin:/usr/bin"
    assert "SSL_CERT_FILE" not in seen and "SSL_CERT_DIR" not in seen
    assert seen["GPUSERVE_PROBE"] == "kept"


def test_pct_status_and_config_hold_the_gpu_devn_entries():
    assert pct("status", VMID).stdout == "status: running\n"
    conf = pct("config", VMID).stdout
    assert "dev0: /dev/nvidia0,mode=0666\n" in conf and re.search(r"^digest: [0-9a-f]{40}$", conf, re.M)


def test_pct_set_validates_devn_and_round_trips():
    res = pct("set", VMID, "--dev42", "/dev/nvidia-nonexistent")
    assert res.returncode == 255 and "does not exist" in res.stderr
    res = pct("set", VMID, "--bogus", "1")
    assert res.returncode == 255 and "not defined in schema" in res.stderr
    try:
        assert pct("set", VMID, "--dev42", "/dev/nvidia7,mode=0666").returncode == 0
        assert "dev42: /dev/nvidia7,mode=0666\n" in pct("config", VMID).stdout
    finally:
        pct("set", VMID, "--delete", "dev42")
    assert "dev42" not in pct("config", VMID).stdout


def test_pct_push_and_pull(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("gpuserve\n")
    assert pct("push", VMID, str(src), "/tmp/gpuserve-push.txt", "--perms", "600").returncode == 0
    assert pct("exec", VMID, "--", "stat", "-c", "%a", "/tmp/gpuserve-push.txt").stdout == "600\n"
    assert pct("pull", VMID, "/tmp/gpuserve-push.txt", str(tmp_path / "out.txt")).returncode == 0
    assert (tmp_path / "out.txt").read_text() == "gpuserve\n"


# ---- SIMULATED GPUs ------------------------------------------------------------------------------------------

@pytest.mark.usefixtures("idle_gpus")
def test_idle_gpu_query_is_byte_identical_to_the_capture():
    res = smi("--query-gpu=index,uuid,name,memory.used,memory.total,memory.reserved,driver_version,pci.bus_id",
              "--format=csv,noheader,nounits", "-i", "0")
    assert (res.returncode, res.stdout) == (0, read_capture("gpu_full_idle"))


def test_the_container_sees_eight_gpus_and_the_same_identity():
    inside = pct("exec", VMID, "--", "nvidia-smi", "--query-gpu=index,uuid,memory.total",
                 "--format=csv,noheader,nounits")
    host = smi("--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits")
    assert inside.returncode == 0 and inside.stdout == host.stdout and len(host.stdout.splitlines()) == 8


@pytest.mark.usefixtures("idle_gpus")
def test_memory_follows_a_holder_in_the_container_and_is_released_after_the_delay():
    gpu = 3
    assert used(gpu) == 0
    holder = subprocess.Popen(["/usr/sbin/pct", "exec", VMID, "--", "env", "GPUSIM_MIB=2048", "python3", "-c",
                               "import time; f = open('/dev/nvidia%d', 'rb'); time.sleep(2.0)" % gpu])
    try:
        deadline = time.time() + 10
        while used(gpu) == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert used(gpu) == 2048 + 9
        assert used(gpu, where="ct") == 2048 + 9
        apps = smi("--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits").stdout
        pid = int(apps.splitlines()[0].split(", ")[1])
        with open("/proc/%d/cgroup" % pid, encoding="utf-8") as f:
            assert "lxc" in f.read() and VMID  # the host PID belongs to the container
        while used(gpu) != 0:  # poll like the gate does while the holder lives on
            if holder.poll() is not None:
                break
            time.sleep(0.02)
        holder.wait()
        died = time.time()
        while used(gpu) != 0:
            time.sleep(0.01)
        released_after = time.time() - died
    finally:
        holder.kill()
    assert 0.05 <= released_after <= 1.0, released_after


# ---- sshd + inventory ------------------------------------------------------------------------------------------

def test_ansible_reaches_the_pve_host_and_the_container():
    ansible = os.path.join(ROOT, ".venv", "bin", "ansible")
    if not os.path.exists(ansible):
        lab_skip("no .venv (scripts/bootstrap)")
    # the hosts the lab always has; the gateway's CT 100 (group sglang_gateway) exists only while
    # tests/lab/test_gateway.py runs
    res = subprocess.run([ansible, "-m", "ansible.builtin.ping", "pve:sglang"], cwd=ROOT, capture_output=True,
                         text=True, check=False, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "lab-pve | SUCCESS" in res.stdout and "ct101 | SUCCESS" in res.stdout, res.stdout
    res = subprocess.run([ansible, "-m", "ansible.builtin.setup", "-a", "filter=ansible_virtualization_type", "ct101"],
                         cwd=ROOT, capture_output=True, text=True, check=False, timeout=180)
    assert res.returncode == 0 and "ansible_virtualization_type: lxc" in res.stdout, res.stdout + res.stderr


# ---- SIMULATED SGLang server ---------------------------------------------------------------------------------

@pytest.mark.usefixtures("idle_gpus")
def test_sglang_standin_spawns_ranks_that_hold_gpus_and_serves_the_api():
    port = "30917"
    # SPT_NOENV=1 as sglang.service sets it: without it the ranks' titles overwrite their /proc/PID/environ, as
    # SGLang's setproctitle does (GPUSIM_MIB and NCCL_PROTO below are read there)
    server = subprocess.Popen(["/usr/sbin/pct", "exec", VMID, "--", "env", "GPUSIM_WARMUP_S=2",
                               "GPUSIM_TOKENS_PER_S=400", "GPUSIM_MIB=1000", "NCCL_PROTO=LL", "SPT_NOENV=1",
                               "GPUSIM_WATCHDOG_S=0.1",
                               "python3", "/opt/gpuserve-lab/sglang_standin.py", "--model-path", "/models/x",
                               "--tp-size", "2", "--port", port, "--speculative-algorithm", "EAGLE3",
                               "--speculative-num-steps", "3", "--unknown-flag", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def curl(*args):
        res = pct("exec", VMID, "--", "curl", "-s", "-o", "/dev/stdout", "-w", "\n%{http_code}",
                  *args[1:], "http://127.0.0.1:%s%s" % (port, args[0]))
        body, _, code = res.stdout.rpartition("\n")
        return int(code or 0), body

    try:
        deadline = time.time() + 30
        codes = set()
        while time.time() < deadline:
            code, _ = curl("/health")
            codes.add(code)
            if code == 200:
                break
            time.sleep(0.2)
        assert 503 in codes and 200 in codes
        ranks = pct("exec", VMID, "--", "pgrep", "-af", "sglang::scheduler").stdout
        assert "sglang::scheduler_TP0" in ranks and "sglang::scheduler_TP1" in ranks
        assert used(0) == 1009 and used(1) == 1009 and used(2) == 0
        pid = pct("exec", VMID, "--", "pgrep", "-f", "sglang::scheduler_TP1").stdout.split()[0]
        environ = pct("exec", VMID, "--", "cat", "/proc/%s/environ" % pid).stdout.split("\0")
        assert "NCCL_PROTO=LL" in environ and "CUDA_DEVICE_MAX_CONNECTIONS=8" in environ
        assert curl("/health_generate")[0] == 200
        code, body = curl("/generate", "-H", "Content-Type: application/json", "-d",
                          json.dumps({"text": "hello there", "sampling_params": {"max_new_tokens": 16}}))
        assert code == 200 and json.loads(body)["meta_info"]["completion_tokens"] == 16
        code, body = curl("/generate", "-H", "Content-Type: application/json", "-d",
                          json.dumps({"text": "hi", "stream": True, "sampling_params": {"max_new_tokens": 8}}))
        events = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]" and json.loads(events[-2])["meta_info"]["completion_tokens"] == 8
        info = json.loads(curl("/server_info")[1])
        assert info["internal_states"][0]["avg_spec_accept_length"] > 1.0
        # no --max-running-requests: the scheduler's own limit is what the stand-in reports, like SGLang's
        assert info["max_running_requests"] is None
        assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 256
        assert curl("/flush_cache", "-X", "POST")[0] == 200
        # SGLang reports no accept length until a verify step ran again (tests/fixtures/sglang-0.5.23-h200)
        assert "avg_spec_accept_length" not in json.loads(curl("/server_info")[1])["internal_states"][0]
        assert json.loads(curl("/v1/models")[1])["data"][0]["id"] == "/models/x"
    finally:
        pct("exec", VMID, "--", "pkill", "-f", "sglang_standin.py --model-path /models/x")
        server.wait(timeout=30)
    deadline = time.time() + 5
    while (used(0) or used(1)) and time.time() < deadline:
        time.sleep(0.05)
    assert used(0) == 0 and used(1) == 0
