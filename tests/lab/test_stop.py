"""The lifecycle's stop (`gpuserve-sglang stop`, docs/server.md "The stop") against the lab's SIMULATED SGLang server,
which stops as SGLang 0.5.23 does (lab/files/sglang_standin.py: SIGTERM sets a flag, a 5 s watchdog poll, a drain with
no bound, the GPU files held until the main process exits) under the real sglang.service (KillMode=mixed) and
systemd of CT 101:
- an idle server is ended at once by restart_server.yml: SIGKILL to its control group, no SIGTERM, so no 5 s poll;
- a request in flight past the drain bound is cut, and the restart says so;
- a request in flight that fits the bound completes (the helper's stop alone), then the lifecycle starts the server
  from a stopped unit.
Needs a deployed lab (scripts/deploy); leaves a verified server. About 60 s."""
import json
import subprocess
import time

from labutil import HELPER, LAB_MARKS, VMID, finish, node_env, pct, playbook, wait_for, why

pytestmark = LAB_MARKS

MANIFEST = "/var/lib/gpuserve/sglang-manifest.json"
LOADS = "http://127.0.0.1:30000/v1/loads"


def restart(*extra):
    rc, out = finish(playbook("playbooks/restart_server.yml", *extra), limit=300)
    assert rc == 0, why(out)
    return json.loads(pct("cat", MANIFEST).stdout), out


def main_pid():
    return int(pct("systemctl", "show", "sglang.service", "--property=MainPID", "--value").stdout.strip() or 0)


def generate(tokens):
    """A /generate of `tokens` tokens through curl in the CT, in the background: its Popen (stdout: body, then the
    HTTP status on the last line; curl fails when the server is killed under it)."""
    body = json.dumps({"text": "a request in flight", "sampling_params": {"max_new_tokens": tokens}})
    return subprocess.Popen(["/usr/sbin/pct", "exec", VMID, "--", "curl", "-sS", "-w", "\n%{http_code}", "-H",
                             "Content-Type: application/json", "-d", body, "http://127.0.0.1:30000/generate"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=node_env())


def in_flight():
    out = pct("curl", "-s", LOADS, check=False).stdout
    try:
        return sum(load["num_running_reqs"] + load["num_waiting_reqs"] for load in json.loads(out)["loads"])
    except (ValueError, KeyError, TypeError):
        return 0


def test_an_idle_server_is_ended_at_once():
    before = main_pid()
    manifest, _out = restart()
    stop = manifest["stop"]
    assert stop["how"] == "idle", stop
    assert [s["signal"] for s in stop["signals"]] == ["SIGKILL"]  # no SIGTERM: SGLang's 5 s poll never starts
    assert stop["load"]["source"] == "GET %s?include=core" % LOADS and stop["load"]["in_flight"] == 0
    assert stop["stop_s"] < 1.0, stop
    assert manifest["main_pid"] != before
    # this boot's journal only: a container boots its server at the same PID each time, and a reboot's stop SIGTERMs it
    assert "SIGTERM received" not in pct("journalctl", "-b", "-u", "sglang.service", "_PID=%d" % before,
                                         "--no-pager").stdout


def test_a_request_past_the_drain_bound_is_cut_and_the_restart_says_so():
    request = generate(10000)  # over a minute at the stand-in's speed
    wait_for(lambda: in_flight() >= 1, 30, "the request in flight")
    manifest, out = restart("-e", "sglang_server_stop_drain_timeout=1")
    stop = manifest["stop"]
    assert stop["how"] == "cut" and stop["drain"]["cut"] == 1 and stop["drain"]["in_flight_at_sigterm"] == 1, stop
    assert [(s["signal"], s["to"]) for s in stop["signals"]] == [("SIGTERM", "main process"),
                                                                 ("SIGKILL", "control group")]
    assert 1.0 <= stop["stop_s"] < 3.0, stop
    assert "were still running or queued and are cut" in out  # the play prints what the drain cut
    body, _ = request.communicate(timeout=30)
    assert request.returncode != 0 or not body.rstrip().endswith("200"), body[-500:]


def test_a_request_that_fits_the_drain_bound_completes():
    request = generate(400)  # about 3 s
    wait_for(lambda: in_flight() >= 1, 30, "the request in flight")
    began = time.monotonic()
    out = pct("/usr/bin/python3", HELPER, "stop", "--port", "30000", "--drain-timeout", "20", timeout=60)
    stop = json.loads(out.stdout)
    assert stop["how"] == "drained" and stop["drain"]["cut"] == 0 and stop["unit_after"] == "inactive", stop
    assert stop["stop_s"] < time.monotonic() - began + 0.5
    body, _ = request.communicate(timeout=30)
    status = body.rstrip().rsplit("\n", 1)[-1]
    assert request.returncode == 0 and status == "200", body[-500:]
    assert json.loads(body.rstrip().rsplit("\n", 1)[0])["meta_info"]["completion_tokens"] == 400
    # the lifecycle from a stopped unit: nothing to stop, then the usual release, start and proof
    manifest, _out = restart()
    assert manifest["stop"]["how"] == "not running" and manifest["stop"]["signals"] == []
