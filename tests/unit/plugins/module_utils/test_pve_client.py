"""The PVE clients (plugins/module_utils/_pve_client.py): the requests the API client sends, through the real
proxmoxer, with the HTTP layer answered at requests' transport adapter; and the pct client's argv and parsing.
Secrets must never reach a failure message."""
import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from ansible_collections.gpuserve.sglang.plugins.module_utils import _pve_client as pc

SECRET = "s3cr3t-t0ken-value"
PASSWORD = "hunter2-password"
BASE = "https://pve.example:8006/api2/json"
CT = BASE + "/nodes/pve1/lxc/101"


def raising(exc):
    """A call that raises exc (for lambdas standing in for a failing function)."""
    raise exc


class Clock:
    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def http(monkeypatch):
    """http(routes): {(METHOD, url without query): [(status, data or {'errors': ...}), ...]} (the last repeats);
    returns the prepared requests sent, as (method, url, headers, body, verify, timeout)."""
    sent = []

    def install(routes):
        def send(adapter, request, **kwargs):
            url = request.url.split("?")[0]
            body = request.body.decode() if isinstance(request.body, bytes) else request.body
            sent.append((request.method, request.url, dict(request.headers), body, kwargs.get("verify"),
                         kwargs.get("timeout")))
            answers = routes[(request.method, url)]
            status, payload = answers.pop(0) if len(answers) > 1 else answers[0]
            if isinstance(status, Exception):  # the transport failed: no answer at all
                raise status
            resp = requests.Response()
            resp.status_code, resp.url, resp.request = status, request.url, request
            resp.reason = "Internal Server Error" if status >= 500 else ("Forbidden" if status == 403 else "OK")
            resp._content = json.dumps(payload if isinstance(payload, dict) and "errors" in payload else {"data": payload}).encode()
            resp.headers["Content-Type"] = "application/json"
            return resp
        monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", send)
        return sent
    return install


def token_params(**extra):
    return dict(dict(api_host="pve.example", api_user="root@pam", api_token_id="gpuserve@pve!ci",
                     api_token_secret=SECRET, validate_certs=True, api_timeout=7), **extra)


def test_a_token_read_sends_the_token_header_to_the_containers_config(http):
    sent = http({("GET", CT + "/config"): [(200, {"dev0": "/dev/nvidia0", "digest": "abc"})]})
    api = pc.ApiClient(token_params(ca_path="/etc/pve-ca.pem"), 101, "pve1")
    assert api.config() == {"dev0": "/dev/nvidia0", "digest": "abc"}
    method, url, headers, _body, verify, timeout = sent[0]
    assert (method, url) == ("GET", CT + "/config")
    # the token's user comes from the token id, not from api_user
    assert headers["Authorization"] == "PVEAPIToken=gpuserve@pve!ci=" + SECRET
    assert verify == "/etc/pve-ca.pem" and timeout == 7


def test_a_password_login_then_an_update_with_csrf_cookie_deletes_and_digest(http):
    base = "https://pve.example:8443/api2/json"
    sent = http({("POST", base + "/access/ticket"): [(200, {"ticket": "PVE:t1", "CSRFPreventionToken": "csrf1"})],
                 ("PUT", base + "/nodes/pve1/lxc/101/config"): [(200, None)]})
    params = dict(api_host="pve.example", api_port=8443, api_user="root@pam", api_password=PASSWORD,
                  validate_certs=False)
    api = pc.ApiClient(params, 101, "pve1")
    api.update({"dev0": "/dev/nvidia0,gid=44", "dev1": "/dev/nvidiactl"}, ["dev3", "dev4"], digest="d1g")
    login, put = sent
    assert login[0] == "POST" and login[1] == "https://pve.example:8443/api2/json/access/ticket"
    assert parse_qs(login[3]) == {"username": ["root@pam"], "password": [PASSWORD]}
    assert login[4] is False and login[5] == 30  # validate_certs false; the default API timeout
    assert put[0] == "PUT" and put[1] == "https://pve.example:8443/api2/json/nodes/pve1/lxc/101/config"
    assert put[2]["CSRFPreventionToken"] == "csrf1" and "PVEAuthCookie=PVE:t1" in put[2]["Cookie"]
    assert parse_qs(put[3]) == {"dev0": ["/dev/nvidia0,gid=44"], "dev1": ["/dev/nvidiactl"], "delete": ["dev3,dev4"],
                                "digest": ["d1g"]}
    assert "Authorization" not in put[2]


def test_an_update_without_deletes_or_digest_sends_only_the_sets(http):
    sent = http({("PUT", CT + "/config"): [(200, None)]})
    pc.ApiClient(token_params(), 101, "pve1").update({"dev0": "/dev/nvidia0"}, [])
    # certificates are checked (requests resolves True to its CA bundle)
    assert parse_qs(sent[0][3]) == {"dev0": ["/dev/nvidia0"]} and sent[0][4] not in (False, None)


def test_pves_refusal_is_reported_with_its_status_and_field_errors_and_no_secret(http):
    http({("PUT", CT + "/config"): [(403, {"errors": {"dev0": "only root@pam may configure device passthrough "}})]})
    api = pc.ApiClient(token_params(), 101, "pve1")
    with pytest.raises(pc.PveFailure) as exc:
        api.update({"dev0": "/dev/nvidia0"}, [])
    assert exc.value.status == 403
    assert exc.value.message.startswith("403 ") and exc.value.message.endswith(
        "dev0: only root@pam may configure device passthrough")
    assert SECRET not in exc.value.message and not exc.value.locked


def test_a_failed_login_names_the_host_and_never_the_password(http):
    http({("POST", BASE + "/access/ticket"): [(401, {"errors": {"password": "invalid"}})]})
    with pytest.raises(pc.PveFailure) as exc:
        pc.ApiClient(dict(api_host="pve.example", api_user="root@pam", api_password=PASSWORD), 101, "pve1")
    assert exc.value.message.startswith("cannot log in to the PVE API at pve.example: ")
    assert "401" in exc.value.message and PASSWORD not in exc.value.message


def test_status_version_and_a_reboot_that_waits_for_its_task(http):
    upid = "UPID:pve1:00001:0:0:vzreboot:101:root@pam:"
    tasks = BASE + "/nodes/pve1/tasks/" + upid
    sent = http({("GET", CT + "/status/current"): [(200, {"status": "running"})],
                 ("GET", BASE + "/version"): [(200, {"version": "8.4.1"})],
                 ("POST", CT + "/status/reboot"): [(200, upid)],
                 ("GET", tasks + "/status"): [(200, {"status": "running"}), (200, {"status": "stopped",
                                                                                   "exitstatus": "OK"})]})
    clock = Clock()
    api = pc.ApiClient(token_params(), 101, "pve1", sleep=clock.sleep, clock=clock.time)
    assert api.status() == "running" and api.version() == {"version": "8.4.1"}
    api.reboot()
    assert [urlsplit(s[1]).path for s in sent[2:]] == [
        "/api2/json/nodes/pve1/lxc/101/status/reboot", "/api2/json/nodes/pve1/tasks/%s/status" % upid,
        "/api2/json/nodes/pve1/tasks/%s/status" % upid]
    assert clock.sleeps == [0.5]


def test_a_task_ending_in_error_carries_its_last_log_lines(http):
    upid = "UPID:pve1:2"
    tasks = BASE + "/nodes/pve1/tasks/" + upid
    http({("GET", tasks + "/status"): [(200, {"status": "stopped", "exitstatus": "command failed"})],
          ("GET", tasks + "/log"): [(200, [{"n": 1, "t": "starting"}, {"n": 2, "t": "mount failed"},
                                           {"n": 3, "t": "TASK ERROR: command failed"}, {"n": 4, "t": ""}])]})
    api = pc.ApiClient(token_params(), 101, "pve1")
    with pytest.raises(pc.PveFailure) as exc:
        api.wait(upid)
    assert exc.value.message == "task UPID:pve1:2 ended in error: command failed; last log lines: starting | mount failed"


def test_a_task_with_warnings_is_done_and_a_slow_one_hits_the_deadline(http):
    upid = "UPID:pve1:3"
    tasks = BASE + "/nodes/pve1/tasks/" + upid
    http({("GET", tasks + "/status"): [(200, {"status": "stopped", "exitstatus": "WARNINGS: 1"})]})
    assert pc.ApiClient(token_params(), 101, "pve1").wait(upid)["exitstatus"] == "WARNINGS: 1"
    http({("GET", tasks + "/status"): [(200, {"status": "running"})], ("GET", tasks + "/log"): [(500, {"errors": {}})]})
    clock = Clock()
    api = pc.ApiClient(token_params(), 101, "pve1", task_timeout=2, sleep=clock.sleep, clock=clock.time)
    with pytest.raises(pc.PveFailure) as exc:
        api.wait(upid)
    assert exc.value.message == ("task UPID:pve1:3 still running after 2s (bounded wait; the task goes on in PVE)")
    assert clock.sleeps == [0.5] * 4
    with pytest.raises(pc.PveFailure, match="still running after 1s"):
        api.wait(upid, timeout=1)


# ------------------------------------------------------------------------------------------------------ lock retries

def test_lock_retries_are_bounded_and_say_what_holds_the_lock():
    sleeps, calls = [], []

    def locked():
        calls.append(1)
        raise pc.PveFailure("CT 101 is locked (backup)", 500)

    with pytest.raises(pc.PveFailure) as exc:
        pc.with_lock_retries(locked, retries=2, delay=1.5, sleep=sleeps.append)
    assert len(calls) == 3 and sleeps == [1.5, 1.5] and exc.value.status == 500
    assert exc.value.message.startswith("CT 101 is locked (backup) (still locked after 3 attempts over 3s;")
    answers = [pc.PveFailure("can't lock file '/run/lock/lxc/pve-config-101.conf' - got timeout"), "done"]

    def once_locked():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert pc.with_lock_retries(once_locked, retries=5, delay=2, sleep=sleeps.append) == ("done", 2)
    with pytest.raises(pc.PveFailure) as exc:  # not a lock: raised at once, unchanged
        pc.with_lock_retries(lambda: raising(pc.PveFailure("bad value", 400)), 5, 2, sleeps.append)
    assert exc.value.message == "bad value" and len(sleeps) == 3


# ------------------------------------------------------------------------------------------------------------- pct

class Module:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    def run_command(self, argv):
        self.calls.append(argv)
        return self.answers.pop(0)


def test_pct_config_update_status_and_reboot_argv():
    module = Module([(0, "arch: amd64\n# comment\n\ndev0: /dev/nvidia0,gid=44\nhostname: ct : x\n[snap1]\ndev9: old\n", ""),
                     (0, "", ""), (0, "status: running\n", ""), (0, "", "")])
    pct = pc.PctClient(module, 101, "/usr/sbin/pct")
    assert pct.config() == {"arch": "amd64", "dev0": "/dev/nvidia0,gid=44", "hostname": "ct : x"}
    pct.update({"dev10": "/dev/nvidia-uvm", "dev2": "/dev/nvidia2", "mp0": "x"}, ["dev5", "dev6"])
    assert pct.status() == "running"
    pct.reboot()
    assert module.calls == [
        ["/usr/sbin/pct", "config", "101"],
        ["/usr/sbin/pct", "set", "101", "--mp0", "x", "--dev2", "/dev/nvidia2", "--dev10", "/dev/nvidia-uvm",
         "--delete", "dev5,dev6"],
        ["/usr/sbin/pct", "status", "101"],
        ["/usr/sbin/pct", "reboot", "101"],
    ]


def test_pct_failures_quote_pcts_last_lines():
    pct = pc.PctClient(Module([(255, "", "line1\nline2\nline3\nCT 101 is locked (snapshot)\n")]), 101)
    with pytest.raises(pc.PveFailure) as exc:
        pct.update({"dev0": "/dev/nvidia0"}, [])
    assert exc.value.message == "/usr/sbin/pct set 101 failed (rc 255): line2 | line3 | CT 101 is locked (snapshot)"
    assert exc.value.locked
    pct = pc.PctClient(Module([(2, "", ""), (0, "weird\n", "")]), 7)
    with pytest.raises(pc.PveFailure, match=r"^/usr/sbin/pct config 7 failed \(rc 2\): no output$"):
        pct.config()
    with pytest.raises(pc.PveFailure, match=r"^pct status 7: unexpected output 'weird'$"):
        pct.status()


def test_a_request_that_gets_no_answer_in_time_says_so_and_that_the_change_may_still_land(http):
    sent = http({("PUT", CT + "/config"): [(requests.exceptions.ReadTimeout("Read timed out. (read timeout=7)"),
                                           None)]})
    api = pc.ApiClient(token_params(), 101, "pve1")
    with pytest.raises(pc.PveFailure) as exc:
        api.update({"dev0": "/dev/nvidia0"}, [])
    assert sent[-1][5] == 7  # api_timeout reaches requests
    assert exc.value.message == (
        "the PVE API at pve.example did not answer within 7 s (api_timeout): Read timed out. (read timeout=7). A "
        "change it was sent may still be applied: the next run reads the config again before it changes anything")
    assert exc.value.status is None and not exc.value.locked and SECRET not in exc.value.message


def test_a_login_that_gets_no_answer_in_time_names_the_host_and_the_timeout(http):
    http({("POST", BASE + "/access/ticket"): [(requests.exceptions.ConnectTimeout("connect timed out"), None)]})
    with pytest.raises(pc.PveFailure) as exc:
        pc.ApiClient(dict(api_host="pve.example", api_user="root@pam", api_password=PASSWORD), 101, "pve1")
    assert exc.value.message == ("cannot log in to the PVE API at pve.example: no answer within 30 s (api_timeout); "
                                 "check that pveproxy runs and answers on the node")


@pytest.mark.parametrize("exc, timed_out", [
    (requests.exceptions.ReadTimeout(), True),
    (requests.exceptions.ConnectTimeout(), True),
    (requests.exceptions.Timeout(), True),
    (requests.exceptions.ConnectionError(), False),
    (TimeoutError(), False),  # the OS's, not requests': proxmoxer's requests never raise it bare
    (ValueError(), False),
])
def test_only_requests_timeouts_count_as_no_answer(exc, timed_out):
    assert pc._timed_out(exc) is timed_out


def test_the_running_values_are_read_with_current(http):
    sent = http({("GET", CT + "/config"): [(200, {"dev0": "/dev/nvidia0", "digest": "d"})]})
    api = pc.ApiClient(token_params(), 101, "pve1")
    assert api.config() == {"dev0": "/dev/nvidia0", "digest": "d"}
    assert api.config(current=True) == {"dev0": "/dev/nvidia0", "digest": "d"}
    assert [parse_qs(urlsplit(s[1]).query) for s in sent[-2:]] == [{}, {"current": ["1"]}]
