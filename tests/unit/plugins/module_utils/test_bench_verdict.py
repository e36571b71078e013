"""The A/B verdict's rules that decide an arm (plugins/module_utils/_bench.py verdict): every round must be valid,
the speedup is taken against the mean of both adjacent baselines, and a changed SGLang build invalidates the arms.

Runs are measured on the real idle H200 state (tests/fixtures/h200-gpu-state), so no GPU throttle interferes.
"""
import json
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_verdict as bv

from ansible_collections.gpuserve.sglang.tests.unit.plugins.module_utils.test_bench import (
    ARMS,
    H200_GPU_STATE,
    SERVER_ARGS,
    make_runs,
)

COMMIT_A = "a" * 40  # make_runs' commit
COMMIT_B = "b" * 40


def h200_runs(visits, speeds, **prov):
    """make_runs with the GPU state sglang_bench_gpu_state recorded on an idle H200 before and after each run."""
    with open(os.path.join(H200_GPU_STATE, "gpu_state_idle.json")) as f:
        idle = json.load(f)["gpus"]
    runs = make_runs(visits, speeds, **prov)
    for run in runs:
        run["gpu_before"] = run["gpu_after"] = idle
    return runs


def arms_of(v):
    return {a["name"]: a for a in v["arms"]}


# ------------------------------------------------------------------ one valid round does not carry an arm


@pytest.mark.parametrize("drifted_round,speeds", [
    # visits: 0 baseline, 1 eagle3-s2 (round 1), 2 baseline, 3 eagle3-s2 (round 2), 4 baseline
    (1, {0: 80.0, 1: 99.0, 2: 88.8, 3: 99.0, 4: 88.8}),   # 80.00 -> 88.80: +11.0% around round 1
    (2, {0: 88.8, 1: 99.0, 2: 88.8, 3: 99.0, 4: 98.568}),  # 88.80 -> 98.57: +11.0% around round 2
])
def test_an_arm_with_one_drifted_round_is_invalid_not_accepted(drifted_round, speeds):
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48, rounds=2)
    assert [(v["arm"], v["round"]) for v in visits if v["kind"] == "variant"] == [("eagle3-s2", 1), ("eagle3-s2", 2)]
    v = bv.verdict(h200_runs(visits, speeds), visits)
    comps = {visits[c["visit"]]["round"]: c for c in v["comparisons"]}
    clean = 3 - drifted_round
    assert comps[clean]["valid"] is True and comps[clean]["problems"] == []
    assert comps[drifted_round]["valid"] is False
    assert comps[drifted_round]["concurrency"]["1"]["drift_pct"] == pytest.approx(11.0)
    arm = arms_of(v)["eagle3-s2"]
    # both rounds clear the 3% needed, so only the drifted round can keep the arm out
    assert all(c["concurrency"]["1"]["speedup_pct"] > 5 for c in comps.values()) and arm["speedup_pct"] > 5
    assert arm["valid"] is False and arm["decision"] == "invalid"
    drift = "visit %d eagle3-s2 at concurrency 1: baseline drifted 11.0%%" % comps[drifted_round]["visit"]
    assert len(arm["problems"]) == 1 and arm["problems"][0].startswith(drift), arm["problems"]
    assert "more than the 3.0% allowed" in arm["problems"][0]
    assert v["valid"] is False and v["winner"] is None and v["best_valid_arm"] == "baseline"
    assert v["summary"].startswith("INVALID: " + drift)


# ------------------------------------------------------------------ the speedup is against the mean of both baselines


@pytest.mark.parametrize("before,after", [(90.0, 87.65), (87.65, 90.0)])
def test_speedup_is_against_the_mean_of_the_preceding_and_following_baseline(before, after):
    # the baselines differ by 2.7%, within the 3% drift allowed; 92.12 tok/s is +3.71% over their mean (88.825),
    # but only +2.36% over the faster one alone: one side alone would reject an arm the mean accepts
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    v = bv.verdict(h200_runs(visits, {0: before, 1: 92.12, 2: after}), visits, min_speedup_pct=3.0)
    assert (92.12 / max(before, after) - 1) * 100 == pytest.approx(2.36, abs=0.01)  # one side alone: below 3%
    (comp,) = v["comparisons"]
    entry = comp["concurrency"]["1"]
    assert comp["baseline_visits"] == [0, 2] and entry["baseline_medians"] == [before, after]
    assert entry["drift_pct"] == pytest.approx(2.68, abs=0.01)
    assert entry["baseline_ref"] == pytest.approx(88.825)
    assert entry["speedup_pct"] == pytest.approx(3.71, abs=0.01)
    assert entry["speedup_pct"] == pytest.approx((92.12 / 88.825 - 1) * 100, rel=1e-9)
    arm = arms_of(v)["eagle3-s2"]
    assert arm["speedup_pct"] == pytest.approx(3.71, abs=0.01)
    assert arm["decision"] == "accepted" and arm["problems"] == []
    assert v["valid"] is True and v["winner"] == "eagle3-s2"
    assert v["summary"] == "eagle3-s2 is 3.7% faster than the fresh baseline at concurrency 1"


# ------------------------------------------------------------------ provenance: the SGLang build under the arms


@pytest.mark.parametrize("changed_visits", [(3, 4), (3,)])
def test_a_sglang_commit_change_mid_benchmark_invalidates_the_arm_that_saw_it(changed_visits):
    # visits: 0 baseline, 1 eagle3-s2, 2 baseline, 3 eagle3-s3, 4 baseline; SGLang is rebuilt before visit 3
    # (and stays, or is put back for visit 4): eagle3-s3's figures come from another build than its baseline's
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = h200_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0, "eagle3-s3": 101.0})
    for run in runs:
        if run["visit"] in changed_visits:
            run["provenance"]["sglang_commit"] = COMMIT_B
    clean = bv.verdict(h200_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0, "eagle3-s3": 101.0}), visits)
    assert {a["name"]: a.get("decision") for a in clean["arms"]} == {
        "baseline": None, "eagle3-s2": "accepted", "eagle3-s3": "accepted"}  # the same figures, one build
    v = bv.verdict(runs, visits)
    change = "the SGLang commit changed during the benchmark: %s, %s" % (COMMIT_A, COMMIT_B)
    arm = arms_of(v)["eagle3-s3"]
    assert arm["valid"] is False and arm["decision"] == "invalid"
    assert change in arm["problems"]
    assert arm["speedup_pct"] == pytest.approx((101.0 / 88.8 - 1) * 100)  # the figure stays, the decision goes
    # the provenance must be the same everywhere: the arm measured before the change is not vouched for either
    assert arms_of(v)["eagle3-s2"]["decision"] == "invalid" and change in arms_of(v)["eagle3-s2"]["problems"]
    assert all(c["valid"] is False for c in v["comparisons"])
    assert v["valid"] is False and v["winner"] is None and v["best_valid_arm"] == "baseline"
    assert v["problems"] == [change] and v["summary"] == "INVALID: " + change


def test_a_dirty_sglang_tree_invalidates_the_comparison_of_the_visit_that_ran_on_it():
    # the dirty flag is checked per run: it invalidates the comparisons that use the visit, not the others
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = h200_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0, "eagle3-s3": 101.0})
    runs[4]["provenance"]["sglang_dirty"] = True  # visit 1 (eagle3-s2), second repeat
    v = bv.verdict(runs, visits)
    dirty = "visit 1 eagle3-s2: the SGLang tree was dirty (patches cost throughput)"
    arms = arms_of(v)
    assert arms["eagle3-s2"]["decision"] == "invalid" and arms["eagle3-s2"]["problems"] == [dirty]
    assert arms["eagle3-s3"]["decision"] == "accepted" and arms["eagle3-s3"]["problems"] == []
    assert v["valid"] is False and v["problems"] == [dirty] and v["best_valid_arm"] == "eagle3-s3"
    assert bv.verdict(runs, visits, require_clean_tree=False)["winner"] == "eagle3-s3"
