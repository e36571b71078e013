"""Verdict, drift, throttle, plan and parser logic of the benchmark (plugins/module_utils/_bench*.py)."""
import json
import os

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_verdict as bv
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_stats as st
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_progress as pr

from ansible_collections.gpuserve.sglang.tests.support.bench import (
    ARMS, H200_GPU_STATE, IDLE_GPU, SERVER_ARGS, make_runs)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "nvidia-smi-h200")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


# ------------------------------------------------------------------ plan


def test_plan_interleaves_fresh_baselines_and_forces_equal_max_running_requests():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    assert [v["arm"] for v in visits] == ["baseline", "eagle3-s2", "baseline", "eagle3-s3", "baseline"]
    assert [v["index"] for v in visits] == [0, 1, 2, 3, 4]
    assert {v["args"]["max_running_requests"] for v in visits} == {48}
    base = visits[0]["args"]
    assert all(base[k] is None for k in b.SPECULATIVE_KEYS), base  # null drops the sglang_server base flag
    assert visits[1]["args"]["speculative_draft_model_path"] == "/models/kimi-eagle3"
    assert base["model_path"] == "/models/kimi" and base["tp_size"] == 8
    assert visits[1]["args"]["speculative_num_steps"] == 2
    assert visits[3]["args"]["speculative_num_draft_tokens"] == 4


def test_the_baseline_drops_every_speculative_setting_the_config_or_an_arm_names():
    # speculative_adaptive is not among the base args' keys: a list of them would carry it into the baseline
    arms = [{"name": "s3", "args": {"speculative_num_steps": 3, "speculative_draft_window_size": 64}}]
    visits = b.plan_arms(dict(SERVER_ARGS, speculative_adaptive=True), arms, 48)
    base = visits[0]["args"]
    assert base["speculative_adaptive"] is None and base["speculative_draft_window_size"] is None
    assert visits[1]["args"]["speculative_adaptive"] is True and visits[1]["args"]["speculative_draft_window_size"] == 64


def test_plan_rounds_repeat_the_interleave():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48, rounds=2)
    assert [v["arm"][0] for v in visits] == list("bebebebeb")
    assert visits[-1]["round"] == 2


@pytest.mark.parametrize("arms,mrr,msg", [
    ([], 48, "at least one"),
    ([{"name": "x", "args": {"max_running_requests": 16}}], 48, "every arm must run with 48"),
    ([{"name": "baseline"}], 48, "reserved"),
    ([{"name": "a"}, {"name": "a"}], 48, "reserved or repeated"),
    ([{"name": "a b"}], 48, "letters"),
    ([{"name": "a"}], 0, ">= 1"),
    ([{"name": "a"}], "many", "integer"),
])
def test_plan_rejects(arms, mrr, msg):
    with pytest.raises(b.BenchError, match=msg):
        b.plan_arms(SERVER_ARGS, arms, mrr)


def test_plan_refuses_a_speculative_baseline():
    with pytest.raises(b.BenchError, match="baseline must not be speculative"):
        b.plan_arms(SERVER_ARGS, ARMS, 48, baseline_args={"speculative_algorithm": "EAGLE3"})


# ------------------------------------------------------------------ JSONL


def _record(**kw):
    rec = {"backend": "sglang", "dataset_name": "random", "completed": 8, "output_throughput": 91.5,
           "mean_tpot_ms": 10.9, "accept_length": 2.7, "max_concurrency": 1, "random_input_len": 256,
           "random_output_len": 128, "random_range_ratio": 1.0, "duration": 11.2, "median_tpot_ms": 10.8}
    rec.update(kw)
    return json.dumps(rec)


def test_jsonl_takes_the_last_appended_line():
    text = _record(output_throughput=50.0) + "\n" + _record(output_throughput=91.5) + "\n\n"
    m = b.parse_bench_jsonl(text, expected_prompts=8)
    assert m["output_throughput"] == 91.5 and m["mean_tpot_ms"] == 10.9
    assert m["accept_length"] == 2.7 and m["completed"] == 8 and m["expected"] == 8
    assert m["raw"]["backend"] == "sglang"


def test_jsonl_accept_length_null_for_a_baseline():
    assert b.parse_bench_jsonl(_record(accept_length=None))["accept_length"] is None


@pytest.mark.parametrize("text,msg", [
    ("", "no result line"),
    ("Traceback (most recent call last):", "not JSON"),
    ("[1, 2]", "not an object"),
    (json.dumps({"completed": 3, "mean_tpot_ms": 1.0}), "lacks output_throughput"),
    (_record(output_throughput=None), "lacks output_throughput"),
    (_record(output_throughput="fast"), "finite number"),
    (_record(output_throughput=float("nan")), "finite number"),
    (_record(completed=2.5), "not an integer"),
    (_record(completed=True), "not an integer"),
    (_record(accept_length="2"), "accept_length"),
])
def test_jsonl_fails_closed(text, msg):
    with pytest.raises(b.BenchError, match=msg):
        b.parse_bench_jsonl(text)


# ------------------------------------------------------------------ nvidia-smi clocks


def test_clocks_parse_the_real_h200_capture():
    gpus = b.parse_gpu_clocks(fixture("clocks_busy.out"))
    assert gpus == [{
        "index": 0, "clocks_sm_mhz": 1980, "clocks_mem_mhz": 3201, "temperature_c": 36, "power_w": 89.37,
        "clocks_event_reasons": 0, "clocks_event_reasons_hex": "0x0000000000000000",
        "clocks_event_reason_names": [], "pstate": "P0"}]


def test_clocks_capture_with_two_reason_columns_is_refused():
    # clocks_idle was captured with clocks_throttle_reasons.active as well: 8 fields, not our query
    with pytest.raises(b.BenchError, match="8 fields, expected 7"):
        b.parse_gpu_clocks(fixture("clocks_idle.out"))


@pytest.mark.parametrize("text,msg", [
    ("", "no GPU line"),
    ("0, [N/A], 3201, 36, 89.37, 0x0000000000000000, P0", "non-numeric"),
    ("0, 1980, 3201, 36, [N/A], 0x0000000000000000, P0", "non-numeric"),
    ("0, 1980, 3201, 36, 89.37, Not Active, P0", "hex mask"),
    ("0, 1980, 3201, 36, 89.37, 0x0, P42", "pstate"),
    ("Field \"clocks_event_reasons.active\" is not a valid field to query.", "fields"),
    ("No devices were found", "fields"),
    (IDLE_GPU + "0, 1980, 3201, 36, 89.37, 0x0, P0\n", "twice"),
])
def test_clocks_fail_closed(text, msg):
    with pytest.raises(b.BenchError, match=msg):
        b.parse_gpu_clocks(text)


def test_throttle_detection_ignores_idle_and_names_the_reason():
    gpus = b.parse_gpu_clocks("0, 405, 3201, 36, 121.32, 0x0000000000000001, P0\n"
                              "1, 1500, 3201, 88, 700.00, 0x0000000000000060, P0\n"
                              "2, 1980, 3201, 40, 650.00, 0x0000000000000004, P0\n")
    # by default only thermal and hardware slowdowns always count; the power cap is judged by matching (verdict)
    assert b.throttled_gpus(gpus, b.throttle_mask()) == [(1, ["sw_thermal_slowdown", "hw_thermal_slowdown"])]
    assert b.throttled_gpus(gpus, b.throttle_mask(["sw_power_cap", "sw_thermal_slowdown"])) == [
        (1, ["sw_thermal_slowdown"]), (2, ["sw_power_cap"])]
    assert b.throttled_gpus(gpus, b.throttle_mask(["hw_thermal_slowdown"])) == [(1, ["hw_thermal_slowdown"])]
    with pytest.raises(b.BenchError, match="unknown clock event reason"):
        b.throttle_mask(["too_hot"])


def test_unknown_reason_bits_count_as_throttling():
    gpus = b.parse_gpu_clocks("0, 1980, 3201, 36, 89.37, 0x0000000000001000, P0")
    assert b.throttled_gpus(gpus, b.throttle_mask([])) == [(0, ["unknown_0x1000"])]


# ------------------------------------------------------------------ verdict


def test_verdict_picks_the_faster_arm():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 94.0, "eagle3-s3": 101.0}, concurrencies=(1, 8))
    v = bv.verdict(runs, visits)
    assert v["valid"] is True and v["winner"] == "eagle3-s3", v["summary"]
    arms = {a["name"]: a for a in v["arms"]}
    assert arms["eagle3-s3"]["decision"] == "accepted"
    assert arms["eagle3-s2"]["decision"] == "accepted"
    assert arms["eagle3-s3"]["speedup_pct"] == pytest.approx((101.0 / 88.8 - 1) * 100, rel=1e-6)
    assert arms["baseline"]["concurrency"]["1"]["output_throughput"]["n"] == 9
    assert arms["baseline"]["concurrency"]["1"]["output_throughput"]["median"] == pytest.approx(88.8)
    # max_running_requests 48 was not measured: the highest measured concurrency decides, and the verdict says why
    assert v["decision_concurrency"] == 8 and v["concurrencies"] == [1, 8] and v["serving_concurrency"] == 48
    assert v["decision_concurrency_why"] == (
        "the highest measured: the serving concurrency (max_running_requests 48) was not measured; add it to "
        "sglang_benchmark_concurrency to decide there")
    assert arms["eagle3-s3"]["concurrency"]["1"]["accept_length"]["median"] == 2.5
    assert "eagle3-s3 is 13.7% faster" in v["summary"]


def test_verdict_rejects_a_slower_eagle3_arm():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    # the story's bad day: EAGLE-3 at 59-61 tok/s against an 82.2 baseline
    runs = make_runs(visits, {"baseline": 82.2, "eagle3-s2": 60.0, "eagle3-s3": 61.0})
    v = bv.verdict(runs, visits)
    assert v["valid"] is True
    assert v["winner"] == "baseline"
    arms = {a["name"]: a for a in v["arms"]}
    assert arms["eagle3-s2"]["decision"] == "rejected" and arms["eagle3-s3"]["decision"] == "rejected"
    assert arms["eagle3-s2"]["speedup_pct"] < -25
    assert arms["eagle3-s2"]["reason"] == (
        "27.0% slower at concurrency 1 than the adjacent baselines: a loss beyond 3.0% at any measured concurrency "
        "blocks acceptance")
    assert v["summary"].startswith("no EAGLE-3 arm beat")
    assert v["summary"].endswith("; eagle3-s2 is 27.0% slower at concurrency 1; eagle3-s3 is 25.8% slower at "
                                 "concurrency 1")


def test_verdict_gain_within_noise_is_not_accepted():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    v = bv.verdict(make_runs(visits, {"baseline": 88.8, "eagle3-s2": 90.0}), visits)
    assert v["winner"] == "baseline"
    v = bv.verdict(make_runs(visits, {"baseline": 88.8, "eagle3-s2": 90.0}), visits, min_speedup_pct=1.0)
    assert v["winner"] == "eagle3-s2"


def test_verdict_detects_baseline_drift():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    # the story: 88.8 tok/s one day, 82.2 the next -> 8.0% drift
    runs = make_runs(visits, {0: 88.8, 1: 94.0, 2: 82.2, 3: 95.0, 4: 82.0})
    v = bv.verdict(runs, visits)
    assert v["valid"] is False and v["winner"] is None
    assert v["summary"].startswith("INVALID: visit 1 eagle3-s2 at concurrency 1: baseline drifted 8.0%")
    arms = {a["name"]: a for a in v["arms"]}
    assert arms["eagle3-s2"]["decision"] == "invalid"
    assert arms["eagle3-s3"]["decision"] == "accepted"  # its two baselines agree
    assert v["best_valid_arm"] == "eagle3-s3"
    assert v["baseline_drift_pct"] == pytest.approx((88.8 - 82.0) / 82.0 * 100)
    # a looser threshold accepts the same data
    assert bv.verdict(runs, visits, drift_pct=10.0)["valid"] is True


def test_verdict_invalid_when_a_gpu_throttled():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    runs[4]["gpu_after"] = b.parse_gpu_clocks("0, 1400, 3201, 87, 700.0, 0x0000000000000040, P0")
    v = bv.verdict(runs, visits)
    assert v["valid"] is False
    assert "GPU 0 throttled after the run (hw_thermal_slowdown)" in v["problems"][0]
    assert {a["name"]: a for a in v["arms"]}["eagle3-s2"]["decision"] == "invalid"


def h200_state(name):
    # sglang_bench_gpu_state's own results on a real H200 (realgpu/gpu_state_gpu.sh): under a matmul load the GPU
    # reported sw_power_cap (0x4) at 692 W; idle it reports gpu_idle (0x1), which is not throttling
    with open(os.path.join(H200_GPU_STATE, "gpu_state_%s.json" % name)) as f:
        return json.load(f)["gpus"]


def test_the_real_h200_power_cap_on_every_arm_keeps_the_comparison_valid():
    busy, idle = h200_state("busy"), h200_state("idle")
    assert busy[0]["clocks_event_reason_names"] == ["sw_power_cap"] and busy[0]["power_w"] > 690
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    for run in runs:
        run["gpu_before"], run["gpu_after"] = idle, busy  # every run ends at the cap, as a loaded H200 does
    v = bv.verdict(runs, visits)
    assert v["valid"] is True and v["winner"] == "eagle3-s2" and v["problems"] == []
    assert all(s["concurrency"][c]["matched_reasons"] == ["sw_power_cap"]
               for s in v["visits"] for c in s["concurrency"])
    # the old rule (the cap always invalidates) is still one setting away
    strict = bv.verdict(runs, visits, throttle_reasons=["sw_power_cap"], matched_reasons=[])
    assert strict["valid"] is False and "GPU 0 throttled after the run (sw_power_cap)" in strict["problems"][0]


@pytest.mark.parametrize("capped", ["baseline", "eagle3-s2"])
def test_the_real_h200_power_cap_on_one_side_only_invalidates_the_comparison(capped):
    busy, idle = h200_state("busy"), h200_state("idle")
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    for run in runs:
        run["gpu_before"] = idle
        run["gpu_after"] = busy if run["arm"] == capped else idle
    v = bv.verdict(runs, visits)
    assert v["valid"] is False and v["winner"] is None
    (comp,) = v["comparisons"]
    mine, theirs = ("sw_power_cap", "none") if capped == "eagle3-s2" else ("no matched reason", "sw_power_cap")
    assert comp["problems"] == [
        "visit 1 eagle3-s2 at concurrency 1: %s, but %s on baseline visit %d; a power cap must act on both sides "
        "of a comparison or on neither" % (mine, theirs, b_visit) for b_visit in (0, 2)]


def test_the_power_cap_seen_before_one_run_of_a_visit_counts_for_that_visit_and_concurrency_only():
    busy, idle = h200_state("busy"), h200_state("idle")
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    for run in runs:
        run["gpu_before"] = run["gpu_after"] = idle
    runs[3]["gpu_before"] = busy  # one run of the EAGLE-3 visit started on a capped GPU
    v = bv.verdict(runs, visits)
    capped_c = str(runs[3]["concurrency"])
    assert v["visits"][1]["concurrency"][capped_c]["matched_reasons"] == ["sw_power_cap"]
    assert [c for c, e in v["visits"][1]["concurrency"].items() if e["matched_reasons"]] == [capped_c]
    assert v["valid"] is False and all("at concurrency %s: sw_power_cap, but none" % capped_c in p
                                       for p in v["problems"])


def test_a_reason_cannot_be_both_fatal_and_matched():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    with pytest.raises(b.BenchError) as exc:
        bv.verdict(runs, visits, throttle_reasons=["sw_power_cap", "hw_slowdown", "sync_boost"],
                   matched_reasons=["sync_boost", "sw_power_cap"])
    assert str(exc.value) == ("a clock event reason cannot both always invalidate and need only to match: "
                              "sw_power_cap, sync_boost")


def test_each_side_names_all_the_matched_reasons_it_saw():
    idle = h200_state("idle")
    capped = [dict(idle[0], clocks_event_reasons=0x4 | 0x10)]  # sw_power_cap and sync_boost
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    for run in runs:
        run["gpu_before"] = idle
        run["gpu_after"] = capped if run["arm"] == "baseline" else idle
    (comp,) = bv.verdict(runs, visits, matched_reasons=["sw_power_cap", "sync_boost"])["comparisons"]
    assert comp["problems"][0] == ("visit 1 eagle3-s2 at concurrency 1: no matched reason, but sw_power_cap, "
                                   "sync_boost on baseline visit 0; a power cap must act on both sides of a "
                                   "comparison or on neither")
    for run in runs:
        run["gpu_after"] = capped if run["arm"] != "baseline" else idle
    (comp,) = bv.verdict(runs, visits, matched_reasons=["sw_power_cap", "sync_boost"])["comparisons"]
    assert comp["problems"][0].startswith("visit 1 eagle3-s2 at concurrency 1: sw_power_cap, sync_boost, but none on")


def test_verdict_invalid_on_failed_requests_dirty_tree_changed_commit_or_env():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    speeds = {"baseline": 88.8, "eagle3-s2": 99.0}
    runs = make_runs(visits, speeds)
    runs[0]["metrics"]["completed"] = 5
    assert "5 of 8 requests completed" in bv.verdict(runs, visits)["problems"][0]

    runs = make_runs(visits, speeds, sglang_dirty=True)
    assert "dirty" in bv.verdict(runs, visits)["problems"][0]
    assert bv.verdict(runs, visits, require_clean_tree=False)["valid"] is True

    runs = make_runs(visits, speeds)
    runs[-1]["provenance"]["sglang_commit"] = "b" * 40
    assert "commit changed" in bv.verdict(runs, visits)["problems"][0]

    runs = make_runs(visits, speeds)
    runs[3]["provenance"]["nccl_env"] = {}
    assert "NCCL environment differed" in bv.verdict(runs, visits)["problems"][0]


def test_verdict_needs_baselines_on_both_sides():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = [r for r in make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0}) if r["visit"] != 2]
    v = bv.verdict(runs, visits)
    assert v["valid"] is False and "needs a fresh baseline on both sides" in v["problems"][0]


def test_verdict_decision_concurrency_must_be_measured():
    visits = b.plan_arms(SERVER_ARGS, ARMS[:1], 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 99.0})
    with pytest.raises(b.BenchError, match="not measured"):
        bv.verdict(runs, visits, decision_concurrency=16)
    with pytest.raises(b.BenchError, match="no measured runs"):
        bv.verdict([], visits)


def test_summarize_and_spread():
    s = st.summarize([90.0, 100.0, 95.0])
    assert s["median"] == 95.0 and s["min"] == 90.0 and s["max"] == 100.0 and s["n"] == 3
    assert s["spread_pct"] == pytest.approx(10 / 95 * 100)
    assert st.summarize([1.0, 3.0])["median"] == 2.0
    assert st.summarize([])["median"] is None


def test_progress_line_with_eta():
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = make_runs(visits[:2], {"baseline": 88.8, "eagle3-s2": 94.0}, concurrencies=(1, 8))
    line = pr.progress_line(visits, runs, 1, 600.0)
    assert line.startswith("[2/5] eagle3-s2 (variant): c=1 94.00 tok/s (n=3, spread 0.4%); c=8 ")
    assert line.endswith("elapsed 10m00s, ETA 15m00s")


# ---------------------------------------------------------------------------------------------- accept length

def reading(tokens=None, calls=None, status=200):
    counters = {k: v for k, v in ((b.GENERATION_TOKENS, tokens), (b.SPEC_VERIFY_CALLS, calls)) if v is not None}
    return {"status": status, "counters": counters}


def test_accept_length_from_the_counters_over_the_run():
    got = b.accept_length(True, reading(1000, 400), reading(1256, 500), 9.9)
    assert got == {"accept_length": 2.56, "accept_length_source": "metrics", "generation_tokens": 256.0,
                   "spec_verify_calls": 100.0}


def test_accept_length_counts_a_counter_not_exported_yet_as_zero():
    # SGLang exports the verify counter's sample only once a speculative request finished
    got = b.accept_length(True, reading(10), reading(266, 100), None)
    assert (got["accept_length"], got["accept_length_source"]) == (2.56, "metrics")


def test_accept_length_from_server_info_when_the_server_has_no_metrics():
    assert b.accept_length(True, {"status": 404}, {"status": 404}, 2.5) == {
        "accept_length": 2.5, "accept_length_source": "server_info"}


def test_accept_length_from_server_info_when_no_verify_call_finished_in_the_run():
    assert b.accept_length(True, reading(10, 4), reading(40, 4), 3) == {
        "accept_length": 3.0, "accept_length_source": "server_info"}


def test_accept_length_none_when_neither_source_has_it():
    assert b.accept_length(True, {"status": 404}, {"status": 404}, None) == {
        "accept_length": None, "accept_length_source": "none"}


def test_a_baseline_has_no_accept_length_whatever_it_reads():
    assert b.accept_length(False, reading(0, 0), reading(100, 40), 2.5) == {
        "accept_length": None, "accept_length_source": "none"}
    assert b.accept_length(False, {"status": 500}, {}, None)["accept_length_source"] == "none"


def test_counters_that_went_down_fail_the_run():
    with pytest.raises(b.BenchError) as exc:
        b.accept_length(True, reading(500, 200), reading(100, 250), None)
    assert str(exc.value) == ("/metrics counters went down during the run (sglang:generation_tokens_total -400, "
                              "sglang:spec_verify_calls_total +50): did the server restart?")


@pytest.mark.parametrize("bad, message", [
    ({"status": 200, "error": "/metrics could not be parsed: ValueError: x"}, "/metrics could not be parsed: ValueError: x"),
    ({"status": None, "error": "GET /metrics failed: refused"}, "GET /metrics failed: refused"),
    ({"status": 503}, "GET /metrics returned 503"),
    ({"status": 200}, "GET /metrics returned 200"),
])
def test_a_metrics_reading_that_cannot_be_vouched_for_fails_the_run(bad, message):
    with pytest.raises(b.BenchError) as exc:
        b.accept_length(True, reading(1, 1), bad, 2.0)
    assert str(exc.value) == message
    assert b.metrics_counters({"status": 404}) is None


@pytest.mark.parametrize("values, band", [
    ([], (None, None)),
    ([5], (5.0, 5.0)),
    ([3, 1], (1.0, 3.0)),  # 50 %: the range, the widest there is
    ([3, 1, 2], (1.0, 3.0)),  # 75 %: exactly the confidence asked
    ([5, 1, 2, 4, 3], (1.0, 5.0)),  # the 2nd-4th would hold it only 62.5 % of the time
    ([6, 1, 2, 3, 4, 5], (2.0, 5.0)),  # 78.1 %: the extreme repeats leave the band
    ([8, 7, 6, 5, 4, 3, 2, 1], (2.0, 7.0)),  # the 3rd-6th: 71.1 %
    (list(range(1, 10)), (3.0, 7.0)),  # 82.0 %
    (list(range(1, 12)), (4.0, 8.0)),  # 77.3 %
])
def test_the_band_of_a_median_narrows_with_more_repeats(values, band):
    assert st.median_band(values) == band


@pytest.mark.parametrize("n, k, coverage", [(3, 1, 0.75), (6, 2, 0.78125), (5, 2, 0.625), (11, 4, 0.7734375),
                                            (2, 1, 0.5), (1, 1, 0.0)])
def test_the_bands_coverage_is_the_binomial_one(n, k, coverage):
    assert st._coverage(n, k) == coverage


def test_summarize_gives_every_figure_and_none_for_no_values():
    assert st.summarize([]) == {"n": 0, "median": None, "min": None, "max": None, "spread_pct": None, "stdev": None}
    assert st.summarize([2.0, 4.0, 9.0]) == {"n": 3, "median": 4.0, "min": 2.0, "max": 9.0, "mean": 5.0,
                                             "stdev": 13.0 ** 0.5, "spread_pct": 175.0}
    assert st.summarize([4.0])["stdev"] == 0.0 and st.summarize([0.0, 0.0])["spread_pct"] is None
    assert st.summarize([1.0, 3.0])["stdev"] == 2.0 ** 0.5  # two values: the sample stdev already


@pytest.mark.parametrize("values, mid", [([5, 1, 4, 2, 3], 3), ([6, 1, 5, 2, 4, 3], 3.5), ([7], 7)])
def test_the_median_is_the_middle_value_or_the_mean_of_the_two_middle_ones(values, mid):
    assert st.median(values) == mid


def test_the_median_of_nothing_is_refused():
    with pytest.raises(b.BenchError, match="^median of no values$"):
        st.median([])
