"""The lab's SIMULATED SGLang server models the accept length per algorithm/draft pairing, as SGLang 0.5.23 serves it:
EAGLE (or NEXTN) with an EAGLE-3 head emits one token per verify step (accept length exactly 1.00, no error), a
matched pair more than one, no speculative algorithm none. Seen where the benchmark and SGLang's own test kit read
it: /server_info's avg_spec_accept_length and /generate's meta_info (spec_accept_length, spec_verify_ct). Runs the
stand-in on this host (loopback, one rank, SIMULATED GPU files and a draft directory in a temporary directory)."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from ansible_collections.gpuserve.sglang.tests.support.net import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")


def call(port, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read() or b"null")


def served(tmp_path, *argv):
    """(meta_info of a 16-token /generate, internal_states[0] of /server_info after it) from a stand-in run with
    argv."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_bytes(b"")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSIM_")}
    env.update(GPUSIM_DEV_DIR=str(dev), GPUSIM_WARMUP_S="0.1", GPUSIM_TOKENS_PER_S="4000", GPUSIM_NOISE="0",
               GPUSIM_WATCHDOG_S="0.1")
    proc = subprocess.Popen([sys.executable, STANDIN, "--model-path", "sim/x", "--host", "127.0.0.1", "--port",
                             str(port), "--speculative-num-steps", "3"] + list(argv), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                call(port, "/health")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the stand-in did not come up"
                time.sleep(0.05)
        meta = call(port, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 16}})["meta_info"]
        return meta, call(port, "/server_info")["internal_states"][0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def draft(tmp_path, arch):
    path = tmp_path / "draft"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": [arch]}))
    return str(path)


@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN"])
def test_eagle_with_an_eagle3_head_serves_at_accept_length_exactly_one(tmp_path, algorithm):
    meta, state = served(tmp_path, "--speculative-algorithm", algorithm, "--speculative-draft-model-path",
                         draft(tmp_path, "LlamaForCausalLMEagle3"))
    # the prefill makes the first token, then one token per verify step
    assert (meta["completion_tokens"], meta["spec_verify_ct"], meta["spec_accept_length"]) == (16, 15, 16 / 15)
    assert state["avg_spec_accept_length"] == 1.0


@pytest.mark.parametrize("algorithm, arch", [("EAGLE3", "LlamaForCausalLMEagle3"), ("EAGLE", "LlamaForCausalLMEagle")])
def test_a_matched_pair_accepts_more_than_one_token_a_step(tmp_path, algorithm, arch):
    meta, state = served(tmp_path, "--speculative-algorithm", algorithm, "--speculative-draft-model-path",
                         draft(tmp_path, arch))
    assert meta["completion_tokens"] == 16 and meta["spec_verify_ct"] <= 8  # 2 or 3 tokens a step (2.6 on average)
    assert state["avg_spec_accept_length"] >= 2.0


def test_a_draft_without_a_readable_config_keeps_the_set_accept_length(tmp_path):
    # the lab's draft directory does not exist: the pairing cannot be told, the stand-in serves as configured
    meta, state = served(tmp_path, "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path",
                         str(tmp_path / "absent"))
    assert state["avg_spec_accept_length"] >= 2.0 and meta["spec_verify_ct"] <= 8


def test_without_a_speculative_algorithm_there_is_no_accept_length(tmp_path):
    meta, state = served(tmp_path)
    assert meta["completion_tokens"] == 16 and "spec_verify_ct" not in meta and "spec_accept_length" not in meta
    assert "avg_spec_accept_length" not in state
