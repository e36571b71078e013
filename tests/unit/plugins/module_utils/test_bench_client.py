"""bench_serving arguments, a visit's runs and /server_info checks (plugins/module_utils/_bench_client.py); picking the
client runs in the driver (test_bench_driver.py); the workers' environment is read by the sglang_server helper
(tests/unit/plugins/module_utils/test_helper_env.py, worker-env)."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_client as c
from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import BenchError


def args(dataset="sharegpt", **kw):
    base = dict(base_url="http://127.0.0.1:30000", dataset=dataset, dataset_path="/d.json", tokenizer="/models/kimi",
                num_prompts=32, input_len=1024, output_len=512, concurrency=1, output_file="/out.jsonl")
    base.update(kw)
    return c.client_argv(**base)


def test_sharegpt_sends_the_prompts_as_written_with_a_fixed_output_length_local_files_jsonl_and_flush():
    argv = args()
    joined = " ".join(argv)
    for part in ("--backend sglang", "--dataset-name sharegpt", "--dataset-path /d.json", "--tokenizer /models/kimi",
                 "--sharegpt-output-len 512", "--max-concurrency 1", "--output-file /out.jsonl",
                 "--warmup-requests 1", "--base-url http://127.0.0.1:30000", "--num-prompts 32"):
        assert part in joined
    assert "--random-input-len" not in joined and "--random-output-len" not in joined
    # the driver applies the chat template: the client's option deletes every copy of the BOS string
    assert "--apply-chat-template" not in joined
    assert argv[-1] == "--flush-cache" and "--model" not in argv


def test_random_keeps_fixed_lengths_and_no_chat_template():
    joined = " ".join(args("random", model="kimi", flush_cache=False, extra_args=["--x", 2], warmup_requests=0))
    for part in ("--dataset-name random", "--random-input-len 1024 --random-output-len 512 --random-range-ratio 1.0",
                 "--warmup-requests 0", "--model kimi"):
        assert part in joined
    assert joined.endswith("--model kimi --x 2")
    assert "--apply-chat-template" not in joined and "--sharegpt-output-len" not in joined
    assert "--flush-cache" not in joined


@pytest.mark.parametrize("kw, message", [
    (dict(dataset="mooncake"), "unknown dataset 'mooncake': use one of sharegpt, random"),
    (dict(output_len=3), "the sharegpt dataset needs an output length of at least 4 tokens, got 3"),
])
def test_a_dataset_the_client_would_refuse_is_refused_first(kw, message):
    with pytest.raises(BenchError) as exc:
        args(**kw)
    assert str(exc.value) == message
    assert args(output_len=4) and args("random", output_len=2)


def test_the_clients_own_warmup_request_goes_when_the_visit_warms_up_itself():
    assert [c.client_warmup_requests(n) for n in (0, 1, 3)] == [1, 0, 0]


def test_a_visits_runs_are_its_warmups_then_its_repeats_each_at_every_concurrency():
    runs = c.visit_runs(1, 2, [1, 16], "/w/v3-eagle3")
    assert [(r["measured"], r["repeat"], r["concurrency"]) for r in runs] == [
        (False, 0, 1), (False, 0, 16), (True, 0, 1), (True, 0, 16), (True, 1, 1), (True, 1, 16)]
    assert [r["label"] for r in runs[:3]] == ["warmup 0 c=1", "warmup 0 c=16", "repeat 0 c=1"]
    assert [r["output_file"] for r in runs[1:4]] == [
        "/w/v3-eagle3-c16-w0.jsonl", "/w/v3-eagle3-c1-r0.jsonl", "/w/v3-eagle3-c16-r0.jsonl"]
    assert c.visit_runs(0, 1, ["4"], "/p") == [{"measured": True, "repeat": 0, "concurrency": 4,
                                                "label": "repeat 0 c=4", "output_file": "/p-c4-r0.jsonl"}]


def test_pick_args_name_the_driver_command_and_the_modules():
    assert c.pick_args() == ["pick", "sglang.benchmark.serving", "sglang.bench_serving"]
    assert c.pick_args(("m",), import_client=True) == ["pick", "--import", "m"]


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
