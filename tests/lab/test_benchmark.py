"""playbooks/benchmark.yml against the lab: the real sglang 0.5.23 bench client in the container, the SIMULATED
server (lab/files/sglang_standin.py, speed set by GPUSIM_* variables) restarted per arm through sglang_server.

The speed is injected with a systemd drop-in on sglang.service: an ExecStartPre writes /run/gpusim.env, which
systemd reads for the next state (ExecStart), so the baseline can be made to drift from one restart to the next.
The module deploys first (deploy_eagle3.yml: a no-change run when the lab is deployed already, the whole stack on a
fresh CT), so it runs on its own after `lab/lab up`. Select with `pytest -m lab`; skipped when the lab is not up,
failed instead under scripts/lab-tests (GPUSERVE_LAB_REQUIRED=1).
"""
import json
import os
import struct
import sys
import zlib

import pytest

from labutil import LAB_MARKS, pct

ansible_runner = pytest.importorskip("ansible_runner")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)
DROPIN_DIR = "/etc/systemd/system/sglang.service.d"
PYTHON = "/opt/sglang/venv/bin/python"


pytestmark = LAB_MARKS


# Baseline starts get GPUSIM_TOKENS_PER_S = BASE * (1 - DRIFT/100)^n (n = baseline starts so far); speculative
# starts keep BASE and let the stand-in's accept-length model decide.
DRIFT_SCRIPT = r"""#!/bin/sh
# GPUSERVE-LAB-SIMULATED: test helper of tests/lab/test_benchmark.py
set -eu
. /etc/gpusim-bench.conf
n=$(cat /run/gpusim-baseline-starts 2>/dev/null || echo 0)
if grep -q -- '--speculative-algorithm' /etc/gpuserve/sglang.args 2>/dev/null; then
  toks=$BASE
else
  toks=$(awk -v b="$BASE" -v d="$DRIFT" -v n="$n" 'BEGIN { printf "%.3f", b * (1 - d / 100) ^ n }')
  echo $((n + 1)) > /run/gpusim-baseline-starts
fi
{
  echo "GPUSIM_TOKENS_PER_S=$toks"
  echo "GPUSIM_WARMUP_S=1"
  echo "GPUSIM_NOISE=$NOISE"
  echo "GPUSIM_SPEC_DECODE_ATTN_FACTOR=$DECODE_FACTOR"
} > /run/gpusim.env
"""


def runner_env():
    return {"ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"), "PATH": VENV_BIN + ":" + os.environ["PATH"],
            "ANSIBLE_NOCOLOR": "1"}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, lab_up):
    """The lab deployed by the real playbook, with the venv the bench client needs (inventory/lab installs it).
    In lane main (scripts/lab-lanes sets GPUSERVE_LAB_DEPLOYED=1 after molecule default, whose idempotence is this
    very deploy's no-change run and whose verify restores the inventory's config) the deploy is not run again."""
    if os.environ.get("GPUSERVE_LAB_DEPLOYED") == "1":
        assert pct("systemctl", "is-active", "sglang.service", check=False).stdout.strip() == "active", \
            "GPUSERVE_LAB_DEPLOYED=1 but sglang.service is not active in CT 101"
        return served_argv()
    private = tmp_path_factory.mktemp("deploy")
    r = ansible_runner.run(private_data_dir=str(private), playbook=os.path.join(ROOT, "playbooks", "deploy_eagle3.yml"),
                           inventory=os.path.join(ROOT, "inventory", "lab"), envvars=runner_env(), quiet=True,
                           project_dir=ROOT)
    failed = [e["event_data"].get("task") for e in r.events if e["event"] == "runner_on_failed"
              and not e["event_data"].get("ignore_errors")]
    assert r.rc == 0, "deploy_eagle3.yml failed in the lab: %s" % failed
    return served_argv()  # the inventory's config: what `restore` and an invalid keep_best must leave running


@pytest.fixture
def inventory_argv(deployed):
    return deployed


@pytest.fixture
def speed(deployed):
    """Installs the drop-in; yields a setter for BASE tok/s, baseline drift % per start, noise, decode factor."""
    pct("mkdir", "-p", DROPIN_DIR)
    pct("sh", "-c", "cat > /usr/local/sbin/gpusim-bench-speed && chmod 0755 /usr/local/sbin/gpusim-bench-speed",
        stdin=DRIFT_SCRIPT)
    pct("sh", "-c", "cat > %s/50-gpusim-bench.conf" % DROPIN_DIR,
        stdin="# GPUSERVE-LAB-SIMULATED: tests/lab/test_benchmark.py\n[Service]\n"
              "ExecStartPre=/usr/local/sbin/gpusim-bench-speed\nEnvironmentFile=-/run/gpusim.env\n")
    pct("systemctl", "daemon-reload")

    def set_speed(base=80.0, drift=0.0, noise=0.002, decode_factor=1.0):
        pct("sh", "-c", "cat > /etc/gpusim-bench.conf && rm -f /run/gpusim-baseline-starts",
            stdin="BASE=%s\nDRIFT=%s\nNOISE=%s\nDECODE_FACTOR=%s\n" % (base, drift, noise, decode_factor))

    yield set_speed
    pct("rm", "-f", "%s/50-gpusim-bench.conf" % DROPIN_DIR, "/usr/local/sbin/gpusim-bench-speed",
        "/etc/gpusim-bench.conf", "/run/gpusim.env", "/run/gpusim-baseline-starts", check=False)
    pct("systemctl", "daemon-reload", check=False)


def play(tmp_path, cmdline=None, **extravars):
    env = runner_env()
    private = tmp_path / ("runner-%d" % len(list(tmp_path.glob("runner-*"))))
    private.mkdir()
    r = ansible_runner.run(private_data_dir=str(private), playbook=os.path.join(ROOT, "playbooks", "benchmark.yml"),
                           inventory=os.path.join(ROOT, "inventory", "lab"), extravars=extravars, envvars=env,
                           quiet=True, project_dir=ROOT, cmdline=cmdline)
    events = list(r.events)
    failures = {e["event_data"].get("task"): e["event_data"]["res"].get("msg", "")
                for e in events if e["event"] == "runner_on_failed" and not e["event_data"].get("ignore_errors")}
    return r, failures, events


def small_matrix(tmp_path, arms, **extra):
    base = {
        "sglang_benchmark_arms": arms,
        "sglang_benchmark_concurrency": [1],
        "sglang_benchmark_repeats": 1,  # one run per visit: the lab proves the flow, tests/unit the statistics
        "sglang_benchmark_warmup_runs": 0,
        "sglang_benchmark_num_prompts": 4,
        "sglang_benchmark_input_len": 64,
        "sglang_benchmark_output_len": 96,
        "sglang_benchmark_use_offline_tokenizer": True,
        "sglang_benchmark_report_dir": str(tmp_path / "artifacts"),
    }
    base.update(extra)
    return base


EAGLE_S3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4, "speculative_attention_mode": "prefill"}
EAGLE_S2 = dict(EAGLE_S3, speculative_num_steps=2, speculative_num_draft_tokens=3)


def main_pid():
    """The running server's PID, as systemd reports it."""
    return pct("systemctl", "show", "--property=MainPID", "--value", "sglang.service").stdout.strip()


def served_argv():
    """The argv the deployed server runs with, from the sglang_server manifest."""
    return json.loads(pct("cat", "/var/lib/gpuserve/sglang-manifest.json").stdout)["argv"]


def report_of(tmp_path):
    (ts_dir,) = list((tmp_path / "artifacts").iterdir())
    with open(ts_dir / "results.json") as f:
        doc = json.load(f)
    return ts_dir, doc


def assert_png_opens(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    assert len(zlib.decompress(idat)) == height * (width * 3 + 1)


def test_verdict_picks_the_faster_arm_and_rejects_the_slower_one(tmp_path, speed, inventory_argv):
    # 2 steps, prefill: accept ~2.6 tokens per 1.5-step verify = ~1.7x; decode attention mode at 0.5x speed = ~0.87x.
    # The winner is not the inventory's own config (3 steps), so keep_best visibly changes what serves.
    speed(base=80, drift=0, decode_factor=0.5)
    arms = [{"name": "eagle3-s2-prefill", "args": EAGLE_S2},
            {"name": "eagle3-s3-decode", "args": dict(EAGLE_S3, speculative_attention_mode="decode")}]
    r, failures, _events = play(tmp_path, **small_matrix(tmp_path, arms, sglang_benchmark_finish="keep_best"))
    assert r.rc == 0, failures
    ts_dir, doc = report_of(tmp_path)
    verdict = doc["verdict"]
    assert verdict["valid"] is True, verdict["problems"]
    assert verdict["winner"] == "eagle3-s2-prefill"
    arms = {a["name"]: a for a in doc["arms"]}
    assert arms["eagle3-s2-prefill"]["decision"] == "accepted"
    assert arms["eagle3-s3-decode"]["decision"] == "rejected" and arms["eagle3-s3-decode"]["speedup_pct"] < 0
    assert [v["arm"] for v in doc["visits"]] == ["baseline", "eagle3-s2-prefill", "baseline", "eagle3-s3-decode",
                                                 "baseline"]
    # provenance with every figure: commit, worker NCCL env (from a live worker), driver, GPU state both sides
    for run in doc["runs"]:
        assert len(run["provenance"]["sglang_commit"]) == 40
        assert run["provenance"]["nccl_env"] and run["provenance"]["nccl_env_consistent"] is True
        assert run["provenance"]["driver_version"]
        assert run["gpu_before"] and run["gpu_after"]
        assert run["metrics"]["completed"] == 4
        assert run["started"].endswith("Z") and run["finished"].endswith("Z") and run["finished"] > run["started"]
    spec = [r for r in doc["runs"] if r["arm"] != "baseline"]
    assert all(r["metrics"]["accept_length"] for r in spec)
    # read from the stand-in's /metrics counters (inventory/lab: enable_metrics), on real chat prompts
    assert {r["metrics"]["accept_length_source"] for r in spec} == {"metrics"}
    assert {r["metrics"]["accept_length_source"] for r in doc["runs"] if r["arm"] == "baseline"} == {"none"}
    assert {r["metrics"]["dataset_name"] for r in doc["runs"]} == {"sharegpt"}
    assert {r["server"]["effective_max_running_requests"] for r in doc["runs"]} == {doc["visits"][0]["server_args"]["max_running_requests"]}
    assert "**Verdict: eagle3-s2-prefill is" in (ts_dir / "report.md").read_text()
    assert_png_opens(ts_dir / "chart.png")
    # keep_best on a valid verdict: the winner's config serves now (the arm's args, max_running_requests forced)
    winner = served_argv()
    assert winner != inventory_argv
    assert "--speculative-num-steps 2" in " ".join(winner)
    assert "--speculative-attention-mode prefill" in " ".join(winner)
    assert "--max-running-requests %s" % doc["visits"][1]["server_args"]["max_running_requests"] in " ".join(winner)


def test_a_drifting_baseline_makes_the_benchmark_invalid(tmp_path, speed, inventory_argv):
    speed(base=80, drift=8.0)  # the story: 88.8 -> 82.2 tok/s, about 8 %
    r, failures, _events = play(tmp_path, **small_matrix(tmp_path, [{"name": "eagle3-s2", "args": EAGLE_S2}],
                                                         sglang_benchmark_finish="keep_best"))
    assert r.rc == 0, failures  # the report is the product; sglang_benchmark_fail_on_invalid makes it fail
    ts_dir, doc = report_of(tmp_path)
    verdict = doc["verdict"]
    assert verdict["valid"] is False and verdict["winner"] is None
    assert "baseline drifted" in verdict["problems"][0]
    assert {a["name"]: a for a in doc["arms"]}["eagle3-s2"]["decision"] == "invalid"
    assert (ts_dir / "report.md").read_text().startswith("# SGLang benchmark")
    assert_png_opens(ts_dir / "chart.png")
    assert served_argv() == inventory_argv  # keep_best never acts on an invalid verdict: the original is restored


def test_a_client_that_does_not_import_stops_the_benchmark_before_any_restart(tmp_path, deployed):
    # A venv missing one of the client's dependencies: torchvision shadowed for this interpreter only
    pct("mkdir", "-p", "/tmp/gpuserve-broken")
    pct("sh", "-c", "cat > /tmp/gpuserve-broken/torchvision.py", stdin='raise ImportError("no torchvision (test)")\n')
    pct("sh", "-c", "cat > /tmp/gpuserve-broken/python && chmod 0755 /tmp/gpuserve-broken/python",
        stdin='#!/bin/sh\nPYTHONPATH=/tmp/gpuserve-broken exec %s "$@"\n' % PYTHON)
    pid = main_pid()
    try:
        r, failures, _events = play(tmp_path, **small_matrix(tmp_path, [{"name": "eagle3-s3", "args": EAGLE_S3}],
                                                             sglang_benchmark_python="/tmp/gpuserve-broken/python"))
    finally:
        pct("rm", "-rf", "/tmp/gpuserve-broken", check=False)
    assert r.rc != 0
    (msg,) = failures.values()
    assert "sglang.benchmark.serving does not import in /opt/sglang/venv: ImportError: no torchvision (test)" in msg
    assert main_pid() == pid
    assert served_argv() == deployed
    assert not (tmp_path / "artifacts").exists()  # no report for a benchmark that never ran


def test_check_mode_shows_the_plan_and_touches_nothing(tmp_path, deployed):
    pid = main_pid()
    argv = served_argv()
    r, failures, events = play(tmp_path, cmdline="--check",
                               **small_matrix(tmp_path, [{"name": "eagle3-s3", "args": EAGLE_S3}]))
    assert r.rc == 0, failures
    plans = [e["event_data"]["res"]["msg"] for e in events if e["event"] == "runner_on_ok"
             and e["event_data"].get("task", "").startswith("The plan (check mode")]
    assert len(plans) == 1 and plans[0].startswith("would run 3 visits (baseline eagle3-s3 baseline)"), plans
    assert not any(e["event_data"].get("task", "").startswith(("Deploy the arm", "Find SGLang's benchmark client"))
                   for e in events if e["event"] == "runner_on_ok")
    assert main_pid() == pid
    assert served_argv() == argv
    assert not (tmp_path / "artifacts").exists()
