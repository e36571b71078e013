"""bench_serving argv, /server_info checks and worker environ parsing (plugins/module_utils/_bench_client.py)."""
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
    assert c.OFFLINE_ENV["HF_HUB_OFFLINE"] == "1"


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
    same = c.worker_env({10: env, 11: dict(env), 12: None})
    assert same["consistent"] is True and same["env"] == env and same["pids"] == [10, 11, 12]
    # the story: the variables never reached the spawned workers
    diff = c.worker_env({10: env, 11: {}})
    assert diff["consistent"] is False and diff["env"] == {} and diff["per_pid"]["11"] == {}
    assert c.cgroup_procs_path("/system.slice/sglang.service") == "/sys/fs/cgroup/system.slice/sglang.service/cgroup.procs"
    assert c.cgroup_procs_path("") is None
