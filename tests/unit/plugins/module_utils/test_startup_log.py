"""Where an SGLang start went (plugins/module_utils/_startup_log.py), read from the real H200 runs' lines
(tests/fixtures/sglang-0.5.23-h200-helper): the unit's journal of a restart (microseconds) and a direct start's own
log (whole seconds)."""
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _startup_log
from ansible_collections.gpuserve.sglang.tests.support.sglang_helper import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "sglang-0.5.23-h200-helper")


def lines(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read().splitlines()


def test_the_journal_of_a_real_restart_splits_into_its_phases():
    got = _startup_log.phases(lines("startup_journal.txt"))
    # the helper's exec at 10:31:28.178844, then SGLang's milestones (journal times, microseconds)
    assert got["phases"] == [
        {"phase": "imports", "s": 13.836, "from": "exec"},            # server_args= (the main process imported)
        {"phase": "scheduler_start", "s": 12.656, "from": "imports"},  # Init parallel begin (the scheduler's imports)
        {"phase": "init", "s": 2.48, "from": "scheduler_start"},
        {"phase": "weight_load", "s": 0.188, "from": "init"},          # target and draft
        {"phase": "kv_cache", "s": 1.124, "from": "weight_load"},
        {"phase": "cuda_graph", "s": 8.258, "from": "kv_cache"},       # five captures
        {"phase": "server_start", "s": 0.032, "from": "cuda_graph"},
        {"phase": "warm_up", "s": 1.226, "from": "server_start"}]
    assert got["total_s"] == 39.8 and got["resolution_s"] == 1e-6
    assert got["milestones"]["cuda_graph"] == 38.542
    assert got["cuda_graphs"] == {"target prefill": 2.82, "target verify": 1.48, "draft prefill": 1.33,
                                  "draft decode": 1.39, "draft extend": 1.22}
    assert got["sglang"] == {"load_weight": 0.12, "kv_cache_allocation": 0.94, "scheduler_e2e": 12.07,
                             "tokenizer_e2e": 24.73,
                             "cuda_graph": {"prefill": 2.82, "decode": 0.0, "target_verify": 1.48,
                                            "draft_prefill": 1.33, "draft_decode": 1.39, "draft_extend": 1.22}}


def test_only_the_last_start_counts():
    # the fixture opens with the first start's "fired up" (10:31:01) and its stop: none of it is read
    journal = lines("startup_journal.txt")
    assert any("fired up" in line for line in journal[:10])
    assert _startup_log.phases(journal)["milestones"]["warm_up"] == 39.8


def test_the_lifecycles_ready_ends_a_last_phase():
    ready = _startup_log._epoch("2026-12-03T10:32:10.000000", "+0000")
    got = _startup_log.phases(lines("startup_journal.txt"), ready=ready)
    assert got["phases"][-1] == {"phase": "ready_probe", "s": 2.021, "from": "warm_up"}
    assert got["total_s"] == 41.821


def test_sglangs_own_log_has_whole_seconds_and_no_exec_line():
    got = _startup_log.phases(lines("server0_startup.log"))
    assert got["resolution_s"] == 1.0 and got["phases"][0] == {"phase": "imports", "s": 0.0, "from": "first line"}
    assert [(p["phase"], p["s"]) for p in got["phases"][1:]] == [
        ("scheduler_start", 19.0), ("init", 4.0), ("weight_load", 0.0), ("kv_cache", 1.0), ("cuda_graph", 7.0),
        ("server_start", 1.0), ("warm_up", 1.0)]
    assert got["sglang"]["tokenizer_e2e"] == 31.84


def test_a_missing_milestone_folds_its_phase_into_the_next():
    # --disable-cuda-graph: no capture lines; the KV cache and the server's start are one phase
    journal = [line for line in lines("startup_journal.txt") if "CUDA graph" not in line]
    got = _startup_log.phases(journal)
    assert [p["phase"] for p in got["phases"]] == ["imports", "scheduler_start", "init", "weight_load",
                                                   "server_start", "warm_up"]
    assert got["phases"][4] == {"phase": "server_start", "s": 9.414, "from": "weight_load"}


@pytest.mark.parametrize("line, epoch, message", [
    # journalctl --output short-iso-precise, and the realgpu shim's offset without a colon
    ("2026-12-03T10:31:28.5+00:00 ct101 sglang[2252]: [2026-12-03 10:31:28] Load weight begin.", 1796293888.5,
     "Load weight begin."),
    ("2026-12-03T11:31:28.5+0100 h sglang[1]: plain", 1796293888.5, "plain"),
    # SGLang's own: a TP rank's prefix, SGLANG_LOG_MS's milliseconds
    ("[2026-12-03 10:31:28 TP3] Load weight end. elapsed=0.1 s", 1796293888.0, "Load weight end. elapsed=0.1 s"),
    ("[2026-12-03 10:31:28.250] x", 1796293888.25, "x"),
    # tqdm's redraws in one line: the last one
    ("  0%|  | 0/20\r[2026-12-03 10:31:28] Capture target verify CUDA graph end. elapsed=1.48 s", 1796293888.0,
     "Capture target verify CUDA graph end. elapsed=1.48 s"),
    ("    at line 3 of a traceback", None, "    at line 3 of a traceback"),
])
def test_each_line_format(line, epoch, message):
    assert _startup_log.parse_line(line) == (epoch, message)


def test_no_timestamped_line_is_an_error():
    assert _startup_log.phases(["nothing", ""]) == {"error": "no timestamped line"}
