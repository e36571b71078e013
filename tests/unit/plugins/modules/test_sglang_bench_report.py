"""sglang_bench_report through its entry point (and _bench_report.write_report): what it writes, when it counts as a
change, check mode, and the failure when the runs cannot be judged."""
import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_verdict as bv
from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench_report as rep
from ansible_collections.gpuserve.sglang.plugins.modules import sglang_bench_report

from ansible_collections.gpuserve.sglang.tests.support.bench import ARMS, SERVER_ARGS, make_runs


@pytest.fixture
def args(tmp_path):
    visits = b.plan_arms(SERVER_ARGS, ARMS, 48)
    runs = make_runs(visits, {"baseline": 88.8, "eagle3-s2": 94.0, "eagle3-s3": 101.0})
    return dict(dest=str(tmp_path / "report"), runs=runs, visits=visits, meta={"host": "ct101"})


def run(capsys, args, check=False):
    with patch_module_args(dict(args, _ansible_check_mode=check)), pytest.raises(SystemExit):
        sglang_bench_report.main()
    return json.loads(capsys.readouterr().out)


def test_writes_the_three_files_once(args, capsys, tmp_path):
    out = run(capsys, args)
    assert out["changed"] is True and not out.get("failed")
    files = {"json": args["dest"] + "/results.json", "markdown": args["dest"] + "/report.md",
             "png": args["dest"] + "/chart.png"}
    assert out["files"] == files and sorted(os.listdir(args["dest"])) == ["chart.png", "report.md", "results.json"]
    assert out["verdict"]["winner"] == "eagle3-s3" and out["verdict"]["valid"] is True
    document = json.loads(open(files["json"]).read())
    assert document["meta"] == {"host": "ct101", "json": "results.json", "chart": "chart.png"}
    assert document["runs"] == args["runs"]
    judged = bv.verdict(args["runs"], args["visits"])
    assert open(files["png"], "rb").read() == rep.render_png(judged)
    assert open(files["markdown"]).read() == rep.render_markdown(judged, args["runs"], document["meta"])
    mtimes = {k: os.stat(p).st_mtime_ns for k, p in files.items()}
    # the same runs again: nothing differs, nothing is rewritten
    out = run(capsys, args)
    assert out["changed"] is False and {k: os.stat(p).st_mtime_ns for k, p in files.items()} == mtimes
    assert not [n for n in os.listdir(args["dest"]) if n.endswith(".tmp")]


def test_only_a_file_that_differs_is_rewritten(args, capsys):
    run(capsys, args)
    md = os.path.join(args["dest"], "report.md")
    good = open(md, "rb").read()
    with open(md, "wb") as handle:
        handle.write(b"edited")
    js = os.path.join(args["dest"], "results.json")
    before = os.stat(js).st_mtime_ns
    out = run(capsys, args)
    assert out["changed"] is True and open(md, "rb").read() == good and os.stat(js).st_mtime_ns == before


def test_check_mode_judges_and_writes_nothing(args, capsys):
    out = run(capsys, args, check=True)
    assert out["changed"] is False and out["verdict"]["winner"] == "eagle3-s3"
    assert not os.path.exists(args["dest"])
    assert out["files"]["png"] == os.path.join(args["dest"], "chart.png")


def test_thresholds_reach_the_verdict(args, capsys):
    out = run(capsys, dict(args, min_speedup_pct=50.0, drift_pct=1.0, decision_concurrency=1,
                           throttle_reasons=["hw_slowdown"], require_clean_tree=False))
    assert out["verdict"]["winner"] == "baseline"  # 13.7 % is under 50 %: no arm is accepted
    assert out["verdict"]["thresholds"]["min_speedup_pct"] == 50.0 and out["verdict"]["thresholds"]["drift_pct"] == 1.0


def test_defaults_are_the_verdicts_own(args, capsys):
    out = run(capsys, args, check=True)
    assert out["verdict"]["thresholds"]["min_speedup_pct"] == 3.0 and out["verdict"]["thresholds"]["drift_pct"] == 3.0
    assert rep.REPORT_ARGS["throttle_reasons"]["default"] == list(b.DEFAULT_THROTTLE_REASONS)
    assert rep.REPORT_ARGS["require_clean_tree"]["default"] is True


@pytest.mark.parametrize("change, message", [
    (lambda a: a["runs"][0].pop("metrics"), "cannot judge the runs: 'metrics'"),
    (lambda a: a.update(throttle_reasons=["too_hot"]), "cannot judge the runs: unknown clock event reason 'too_hot'"),
])
def test_runs_that_cannot_be_judged_fail_and_write_nothing(args, capsys, change, message):
    change(args)
    out = run(capsys, args)
    assert out["failed"] is True and out["msg"].startswith(message)
    assert not os.path.exists(args["dest"])


def test_write_report_refuses_a_chart_that_does_not_decode(args, monkeypatch, tmp_path):
    monkeypatch.setattr(rep, "render_png", lambda verdict: b"not a png")
    params = dict(rep_defaults(), **args)
    with pytest.raises(ValueError, match="not a PNG signature"):
        rep.write_report(params)
    assert not os.path.exists(args["dest"])


def rep_defaults():
    return {name: spec.get("default") for name, spec in rep.REPORT_ARGS.items()}
