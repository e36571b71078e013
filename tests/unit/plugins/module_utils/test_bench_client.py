"""bench_serving argv and /server_info checks (plugins/module_utils/_bench_client.py); the workers' environment
is read by the sglang_server helper (tests/unit/plugins/module_utils/test_helper_env.py, worker-env)."""
import os
import subprocess
import sys

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
