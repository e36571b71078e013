"""bench_serving argv, /server_info checks and worker environ parsing (plugins/module_utils/_bench_client.py)."""
import os
import subprocess
import sys
import types

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_client as c


def test_argv_fixed_lengths_local_files_jsonl_and_flush():
    argv = c.client_argv("/opt/sglang/venv/bin/python", "sglang.benchmark.serving", "http://127.0.0.1:30000",
                         "/d.json", "/models/kimi", 32, 1024, 512, 1, "/out.jsonl")
    joined = " ".join(argv)
    assert argv[:3] == ["/opt/sglang/venv/bin/python", "-m", "sglang.benchmark.serving"]
    for part in ("--dataset-name random", "--dataset-path /d.json", "--tokenizer /models/kimi",
                 "--random-input-len 1024", "--random-output-len 512", "--random-range-ratio 1.0",
                 "--max-concurrency 1", "--output-file /out.jsonl", "--backend sglang"):
        assert part in joined
    assert argv[-1] == "--flush-cache" and "--model" not in argv


def test_server_check_catches_the_speculative_cap_and_wrong_arm():
    info = {"max_running_requests": 64, "speculative_algorithm": "EAGLE3",
            "internal_states": [{"effective_max_running_requests_per_dp": 48, "avg_spec_accept_length": 2.1}]}
    problems = c.check_server(info, {"max_running_requests": 64, "speculative_algorithm": "EAGLE3"})
    assert problems == ["the scheduler's effective max_running_requests is 48, not 64 (SGLang caps speculative "
                        "servers; every arm must run with the same limit)"]
    assert c.check_server(info, {"max_running_requests": 48, "speculative_algorithm": None}) == [
        "server runs with max_running_requests=64, the arm asked for 48",
        "server runs speculative_algorithm='EAGLE3', the arm asked for None"]
    assert c.check_server({"internal_states": []}, {"max_running_requests": 48})[0].startswith("/server_info reports no")
    ok = {"max_running_requests": 48, "speculative_algorithm": None,
          "internal_states": [{"effective_max_running_requests_per_dp": 48}]}
    assert c.check_server(ok, {"max_running_requests": 48, "speculative_algorithm": None}) == []


def test_environ_and_worker_consistency():
    data = b"PATH=/usr/bin\0NCCL_PROTO=LL\0NCCL_ALGO=Ring\0NCCL_NVLS_ENABLE=0\0junk\0"
    env = c.parse_environ(data, ["NCCL_"])
    assert env == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "0"}
    # untitled processes (not SGLang's workers): all of them must agree; one that exited (None) is left out
    same = c.worker_env({10: ("python", env), 11: ("python", dict(env)), 12: (None, None)})
    assert same["consistent"] is True and same["env"] == env and same["pids"] == [10, 11, 12]
    assert same["worker_pids"] == [10, 11] and same["workers_titled"] is False
    # the story: the variables never reached the spawned workers
    diff = c.worker_env({10: ("python", env), 11: ("python", {})})
    assert diff["consistent"] is False and diff["env"] == {} and diff["per_pid"]["11"] == {}


def test_worker_env_is_read_from_the_scheduler_workers_not_the_launcher():
    # SGLang's launcher sets NCCL_CUMEM_ENABLE etc. in os.environ for its children: its own /proc/PID/environ
    # (the start environment) differs from the workers' by design, and is not what NCCL runs with
    tuned = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    child = dict(tuned, NCCL_CUMEM_ENABLE="0")
    procs = {100: ("/opt/sglang/venv/bin/python", tuned), 101: ("sglang::scheduler_TP0", child),
             102: ("sglang::scheduler_TP1", dict(child)), 103: ("sglang::detokenizer", child)}
    ok = c.worker_env(procs)
    assert ok["consistent"] is True and ok["env"] == child
    assert ok["worker_pids"] == [101, 102] and ok["workers_titled"] is True and ok["pids"] == [100, 101, 102, 103]
    # one worker without the tuning: inconsistent, and which one is named
    procs[102] = ("sglang::scheduler_TP1", {"NCCL_CUMEM_ENABLE": "0"})
    bad = c.worker_env(procs)
    assert bad["consistent"] is False and bad["per_pid"]["102"] == {"NCCL_CUMEM_ENABLE": "0"}
    # no process readable at all: nothing to vouch for
    assert c.worker_env({7: (None, None)})["consistent"] is False


def _cgroup(root, group, pids):
    d = root / group.lstrip("/")
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text("".join("%d\n" % p for p in pids))
    return d


def test_unit_pids_finds_the_unit_in_a_hybrid_layout_and_walks_sub_cgroups(tmp_path):
    # an LXC container on a v1 host (the lab): nothing at the v2 root, the unit under unified/ and name=systemd
    v2, unified, v1 = tmp_path / "cgroup", tmp_path / "cgroup/unified", tmp_path / "cgroup/systemd"
    v2.mkdir()
    top = _cgroup(unified, "/system.slice/sglang.service", [947, 950])
    _cgroup(top, "/workers", [951, 950])
    _cgroup(v1, "/system.slice/sglang.service", [1])  # never read: unified/ comes first
    roots = (str(v2), str(unified), str(v1))
    assert c.unit_pids("/system.slice/sglang.service", roots) == [947, 950, 951]
    assert c.unit_pids("/system.slice/other.service", roots) is None  # unit stopped: no cgroup anywhere
    assert c.unit_pids("", roots) is None and c.unit_pids("n/a", roots) is None


def test_unit_pids_prefers_the_unified_hierarchy(tmp_path):
    _cgroup(tmp_path, "/system.slice/sglang.service", [])
    assert c.unit_pids("/system.slice/sglang.service", (str(tmp_path),)) == []  # exists, empty: not None
    # the unit in all three hierarchies: the first root that has it wins, whatever the others hold
    for name, pids in (("v2", [947]), ("unified", [950]), ("v1", [1])):
        _cgroup(tmp_path / name, "/system.slice/sglang.service", pids)
    roots = tuple(str(tmp_path / name) for name in ("v2", "unified", "v1"))
    assert c.unit_pids("/system.slice/sglang.service", roots) == [947]
    assert c.unit_pids("/system.slice/sglang.service", roots[1:]) == [950]


def test_unit_pids_looks_in_the_v2_then_the_hybrid_then_the_v1_hierarchy_by_default(monkeypatch):
    # what the module calls (unit_pids with its default roots) on a host: record which cgroup.procs it probes
    probed = []

    def isfile(path):
        probed.append(path)
        # a hybrid host, as in an LXC container on a v1 host: the running unit is under unified/
        return path == "/sys/fs/cgroup/unified/system.slice/sglang.service/cgroup.procs"

    monkeypatch.setattr(c, "os", types.SimpleNamespace(path=types.SimpleNamespace(isfile=isfile, join=os.path.join),
                                                       walk=lambda top: iter([])))
    assert c.unit_pids("/system.slice/sglang.service") == []  # found under unified/, so not None
    assert probed == ["/sys/fs/cgroup/system.slice/sglang.service/cgroup.procs",
                      "/sys/fs/cgroup/unified/system.slice/sglang.service/cgroup.procs"]
    del probed[:]
    assert c.unit_pids("/system.slice/gone.service") is None
    assert probed == ["/sys/fs/cgroup/system.slice/gone.service/cgroup.procs",
                      "/sys/fs/cgroup/unified/system.slice/gone.service/cgroup.procs",
                      "/sys/fs/cgroup/systemd/system.slice/gone.service/cgroup.procs"]


def pick(site, import_client=False, modules=c.CLIENT_MODULES):
    argv = c.pick_client_argv(sys.executable, modules, import_client)
    return subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=site), timeout=60,
                          check=False)


def test_pick_client_prefers_benchmark_serving_and_falls_back_without_importing(tmp_path, fake_sglang):
    boom = "raise RuntimeError('imported')\n"  # finding the client must not import sglang (torch) or the client
    both = fake_sglang(tmp_path / "both", {"sglang.benchmark.serving": boom, "sglang.bench_serving": boom}, boom)
    old = fake_sglang(tmp_path / "old", {"sglang.bench_serving": boom}, boom)
    none = fake_sglang(tmp_path / "none", {}, boom)
    r = pick(both)
    assert (r.returncode, r.stdout) == (0, "sglang.benchmark.serving\n")  # found, not imported
    assert pick(old).stdout == "sglang.bench_serving\n"
    r = pick(none)
    assert r.returncode == 1
    assert "no benchmark client (sglang.benchmark.serving or sglang.bench_serving) in " in r.stderr


# A client whose import does what transformers / datasets / huggingface_hub do at import time: read their offline
# switches (true values as huggingface_hub's constants read them) and go for the network when one is off.
HUB_CLIENT = (
    "import os\n"
    "for var in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_DATASETS_OFFLINE', 'HF_HUB_DISABLE_TELEMETRY'):\n"
    "    if os.environ.get(var, '').upper() not in ('1', 'ON', 'YES', 'TRUE'):\n"
    "        raise ConnectionError('%s is off: would reach huggingface.co' % var)\n"
)


def test_offline_env_keeps_the_client_import_off_the_hub(tmp_path, fake_sglang):
    # the module runs the picker (and the client) with environ_update=OFFLINE_ENV on top of the target's environment
    site = fake_sglang(tmp_path / "hub", {"sglang.benchmark.serving": HUB_CLIENT})
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    argv = c.pick_client_argv(sys.executable, import_client=True)

    def pick_with(env):
        return subprocess.run(argv, capture_output=True, text=True, env=dict(bare, PYTHONPATH=site, **env),
                              timeout=60, check=False)

    r = pick_with(c.OFFLINE_ENV)
    assert (r.returncode, r.stdout) == (0, "sglang.benchmark.serving\n"), r.stderr
    r = pick_with({})  # the same import without it: the hub would be contacted
    assert r.returncode == 1 and "ConnectionError: HF_HUB_OFFLINE is off: would reach huggingface.co" in r.stderr


def test_pick_client_with_import_reports_the_import_error_and_keeps_stdout_clean(tmp_path, fake_sglang):
    noisy = "print('banner on stdout')\nimport torchvision_missing_for_this_test\n"
    r = pick(fake_sglang(tmp_path / "bad", {"sglang.benchmark.serving": noisy}), import_client=True)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("sglang.benchmark.serving does not import in %s: ModuleNotFoundError: " % sys.prefix)
    assert "banner on stdout" in r.stderr and r.stdout == ""
    r = pick(fake_sglang(tmp_path / "good", {"sglang.benchmark.serving": "print('banner on stdout')\n"}),
             import_client=True)
    assert (r.returncode, r.stdout) == (0, "sglang.benchmark.serving\n")
    r = pick(fake_sglang(tmp_path / "explicit", {"sglang.bench_serving": ""}), import_client=True,
             modules=("sglang.benchmark.serving",))
    assert r.returncode == 1 and "no benchmark client (sglang.benchmark.serving) in " in r.stderr
