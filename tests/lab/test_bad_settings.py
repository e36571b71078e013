"""A bad setting never touches the deployed lab server: each run fails naming the setting, and the server
keeps its PID, its NCCL env file, its args file and its manifest. The settings are the issue's own: an algorithm
SGLang does not have (refused by the real SGLang 0.5.23 in the container, its start checks), a port out of range,
a lifecycle setting out of range given to restart_server.yml (which runs no preflight), and a model directory that
is not in the container (the model check, off in the lab, turned on here), and a host the container does not have
(SGLang accepts it, then hangs at start on a GPU), and EAGLE with an EAGLE-3 draft (SGLang serves it at accept
length 1.00 without an error; the stand-in, SIMULATED, shows that 1.00). Then a new server that cannot serve (it exits
at start: the stand-in's SIMULATED startup fault) is rolled back within seconds, not at the readiness timeout.

Needs a deployed lab (scripts/deploy). The unit tests cover every class of setting against stub containers
(tests/unit/roles/test_sglang_server_bad_settings.py); these prove it on the real lifecycle.
"""
import json
import os
import time

import pytest
import yaml

from labutil import LAB_MARKS, ROOT, STANDIN_FAULT, finish, pct, playbook, wait_ready

pytestmark = LAB_MARKS
DEPLOY, RESTART = "playbooks/deploy_eagle3.yml", "playbooks/restart_server.yml"
FILES = ["/etc/gpuserve/nccl.env", "/etc/gpuserve/sglang.args", "/var/lib/gpuserve/sglang-manifest.json"]
with open(os.path.join(ROOT, "inventory", "lab", "group_vars", "sglang.yml"), encoding="utf-8") as _handle:
    LAB_ARGS = yaml.safe_load(_handle)["sglang_server_args"]


def server():
    """What a refused run must leave as it was: the unit's state and main PID, the files' sha1."""
    unit = pct("systemctl", "show", "sglang.service", "--property=ActiveState,MainPID").stdout
    return unit, pct("sha1sum", *FILES).stdout


@pytest.fixture
def deployed(lab_up):
    if pct("systemctl", "is-active", "sglang.service", check=False).stdout.strip() != "active":
        pytest.fail("sglang.service is not active: run scripts/deploy first", pytrace=False)
    return server()


@pytest.mark.parametrize("playbook_name, settings, message", [
    (DEPLOY, {"sglang_server_args": dict(LAB_ARGS, speculative_algorithm="EAGLE9")},
     "speculative_algorithm (--speculative-algorithm) is 'EAGLE9': SGLang refuses it at start (Unknown speculative "
     "algorithm name: EAGLE9). Nothing was written or stopped: the server runs as before."),
    (DEPLOY, {"gpuserve_port": 70000},
     "gpuserve_port is 70000: it must be a TCP port, a whole number from 1 to 65535"),
    (RESTART, {"sglang_server_ready_timeout": -1},
     "sglang_server_ready_timeout is -1: it must be a number of seconds above 0"),
    (DEPLOY, {"sglang_server_args": dict(LAB_ARGS, mem_fraction_static=0.8), "sglang_server_check_model": True},
     "model_path (--model-path): /models/Kimi-K2.5 is not a directory in this container"),
    # TEST-NET-1, no address of the container: refused by the bind in the container before the stop
    (DEPLOY, {"sglang_server_args": dict(LAB_ARGS, host="192.0.2.1")},
     "sglang_server_args.host is '192.0.2.1', and the server cannot listen there: cannot bind 192.0.2.1 (port 0) in "
     "this container: [Errno 99] Cannot assign requested address"),
], ids=["algorithm", "port", "restart-timeout", "model-dir", "unbindable-host"])
def test_a_bad_setting_fails_naming_it_and_leaves_the_server_as_it_was(deployed, playbook_name, settings, message):
    rc, out = finish(playbook(playbook_name, "-e", json.dumps(settings)))
    assert rc != 0
    assert message in " ".join(out.split()), "\n".join(line for line in out.splitlines() if "fatal" in line)
    assert server() == deployed


# An EAGLE-3 head's config, as SpecForge exports one for a Llama target (SIMULATED: no weights; SGLang reads only the
# config before the weights, and the argument check reads nothing else)
DRAFT = "/var/lib/gpuserve-lab/eagle3-draft"
EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 576,
                 "intermediate_size": 1536, "num_attention_heads": 9, "num_key_value_heads": 3,
                 "num_hidden_layers": 1, "vocab_size": 49152, "max_position_embeddings": 8192}


@pytest.fixture(scope="module")
def eagle3_draft(lab_up):
    pct("mkdir", "-p", DRAFT)
    pct("sh", "-c", "cat > %s/config.json" % DRAFT, stdin=json.dumps(EAGLE3_CONFIG))
    yield DRAFT
    pct("rm", "-rf", DRAFT, check=False)


def test_eagle_with_an_eagle3_draft_is_refused_before_anything_stops(deployed, eagle3_draft):
    settings = {"sglang_server_args": dict(LAB_ARGS, speculative_algorithm="EAGLE",
                                           speculative_draft_model_path=eagle3_draft)}
    rc, out = finish(playbook(DEPLOY, "-e", json.dumps(settings)))
    flat = " ".join(out.split())
    assert rc != 0
    assert ("speculative_algorithm is EAGLE, but the draft %s is an EAGLE-3 head (LlamaForCausalLMEagle3): SGLang "
            "serves that pair without an error at accept length 1.00" % eagle3_draft) in flat, flat[-3000:]
    assert "Nothing was written or stopped: the server runs as before." in flat
    assert server() == deployed  # the same PID, env file, args file and manifest


# The stand-in run by hand beside the server, on SIMULATED device files of its own (it holds no lab GPU), killed when
# the script ends whatever happened
STANDIN_BY_HAND = r"""
set -eu
dev=$(mktemp -d)
touch "$dev/nvidia0" "$dev/nvidiactl" "$dev/nvidia-uvm"
GPUSIM_DEV_DIR=$dev GPUSIM_WARMUP_S=0.1 GPUSIM_TOKENS_PER_S=4000 python3 /opt/gpuserve-lab/sglang_standin.py   --model-path /models/x --port 30919 --speculative-algorithm EAGLE --speculative-draft-model-path "$1"   --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 >/dev/null 2>&1 &
pid=$!
trap 'kill $pid; wait $pid || true; rm -rf "$dev"' EXIT
for _ in $(seq 100); do curl -sf http://127.0.0.1:30919/health >/dev/null && break; sleep 0.1; done
curl -sf http://127.0.0.1:30919/generate -H 'Content-Type: application/json'   -d '{"text": "The capital of France is", "sampling_params": {"max_new_tokens": 32}}'
echo
curl -sf http://127.0.0.1:30919/server_info
"""


def test_the_standin_serves_eagle_with_an_eagle3_draft_at_accept_length_one(eagle3_draft):
    """SIMULATED: what the refusal spares an operator. Every verify step emits only the target's own token."""
    generated, info = pct("sh", "-c", STANDIN_BY_HAND, "sh", eagle3_draft, timeout=60).stdout.splitlines()
    meta = json.loads(generated)["meta_info"]
    assert (meta["completion_tokens"], meta["spec_verify_ct"]) == (32, 31)
    assert json.loads(info)["internal_states"][0]["avg_spec_accept_length"] == 1.0


def test_a_new_server_that_cannot_serve_is_rolled_back_in_seconds(deployed):
    """A changed config passes every check before the stop, and its new server exits at start (the stand-in's
    SIMULATED startup fault, set for this one start): the readiness wait ends at its next poll, not after
    sglang_server_ready_timeout (1800 s), and the last verified config serves again."""
    settings = {"sglang_server_args": dict(LAB_ARGS, mem_fraction_static=0.75)}
    pct("touch", STANDIN_FAULT)
    try:
        began = time.monotonic()
        proc = playbook(DEPLOY, "-e", json.dumps(settings))
        rc, out = finish(proc)
        took = time.monotonic() - began
    finally:
        pct("rm", "-f", STANDIN_FAULT)  # the start took it; a run that failed before its start leaves it
    flat = " ".join(out.split())
    assert rc != 0 and "the server stopped while starting" in flat, flat[-3000:]
    assert "SIMULATED startup failure" in flat, flat[-3000:]
    assert "Rollback: done: the last verified config is serving again" in flat, flat[-3000:]
    assert "the restart failed at" in flat and "sglang.service is failed" in flat, flat[-3000:]
    manifest = json.loads(pct("cat", FILES[2]).stdout)
    assert manifest["phase"] == "rollback" and wait_ready()["ready"] is True
    assert "0.75" not in manifest["argv"]  # the last verified config, not the new one
    # verified by the same lifecycle, and written by this run (what a rollout summary reads)
    assert manifest["env_proof"]["ok"] and manifest["gate"]["passed"], manifest
    assert manifest["run"]["pid"] == proc.pid, manifest["run"]
    # "stopped while starting" is the wait that ended on the unit's state, not on sglang_server_ready_timeout ("not
    # ready after"): the time is a figure, not an assertion
    print("GPUSERVE_BAD_SETTINGS rollback of a server that exits at start: the whole deploy run took %.1f s" % took)
