"""scripts/cpuprof.py: the CI profile's figures (wall, CPU, the lab cgroups) and its top-N table."""
import json
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cpuprof  # noqa: E402  pylint: disable=wrong-import-position


def snap(t, busy, idle, own, cgroups):
    return {"t": t, "busy": busy, "idle": idle, "own": own, "cgroups": cgroups}


def test_measure_counts_own_cpu_and_the_cgroups_that_moved():
    before = snap(10.0, 100.0, 50.0, 2.0, {"lxc.payload.101": 5.0, "gpuserve-lab.sshd-lab-pve": 1.0,
                                          "lxc.payload.102": 7.0})
    after = snap(12.5, 103.0, 51.0, 3.5, {"lxc.payload.101": 6.25, "gpuserve-lab.sshd-lab-pve": 1.5,
                                         "lxc.payload.102": 7.0, "lxc.payload.103": 0.75})
    row = cpuprof.measure(before, after)
    assert row == {"wall_s": 2.5, "cpu_s": 1.5 + 1.25 + 0.5 + 0.75, "host_busy_s": 3.0, "host_idle_s": 1.0,
                   "cgroups": {"lxc.payload.101": 1.25, "gpuserve-lab.sshd-lab-pve": 0.5, "lxc.payload.103": 0.75}}
    # a lane counts only its own cgroups into cpu_s; the others still show
    lane = cpuprof.measure(before, after, lambda name: name in ("lxc.payload.103",))
    assert lane["cpu_s"] == 1.5 + 0.75 and len(lane["cgroups"]) == 3


def test_cgroup_usage_reads_v1_and_v2_and_lab_cgroups_takes_the_first_hierarchy_with_any(tmp_path, monkeypatch):
    v1, v2 = tmp_path / "cpuacct", tmp_path / "unified"
    (v1 / "lxc.payload.101").mkdir(parents=True)
    (v1 / "lxc.payload.101" / "cpuacct.usage").write_text("2500000000\n")
    (v1 / "lxc.monitor.101").mkdir()  # not the container's own processes
    (v1 / "lxc.monitor.101" / "cpuacct.usage").write_text("1\n")
    (v1 / "other").mkdir()
    (v2 / "gpuserve-lab.pve-api").mkdir(parents=True)
    (v2 / "gpuserve-lab.pve-api" / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    monkeypatch.setattr(cpuprof, "CGROUP_ROOTS", (str(v1), str(v2)))
    assert cpuprof.lab_cgroups() == {"lxc.payload.101": 2.5}
    monkeypatch.setattr(cpuprof, "CGROUP_ROOTS", (str(tmp_path / "missing"), str(v2)))
    assert cpuprof.lab_cgroups() == {"gpuserve-lab.pve-api": 1.5}
    monkeypatch.setattr(cpuprof, "CGROUP_ROOTS", (str(tmp_path / "missing"),))
    assert cpuprof.lab_cgroups() == {}


def test_host_cpu_reads_busy_and_idle_from_proc_stat(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal
    stat.write_text("cpu  100 20 30 400 50 6 4 10 0 0\ncpu0 1 2 3 4\n")
    real_open = open
    monkeypatch.setattr(cpuprof, "CLK_TCK", 10)
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(stat if path == "/proc/stat" else path,
                                                                          *a, **k))
    assert cpuprof.host_cpu() == (17.0, 45.0)


def test_run_appends_one_phase_line_and_returns_the_commands_status(tmp_path, monkeypatch):
    profile = tmp_path / "profile.jsonl"
    monkeypatch.setenv("GPUSERVE_PROFILE", str(profile))
    assert cpuprof.main(["run", "ok", "--", sys.executable, "-c", "sum(range(10 ** 6))"]) == 0
    assert cpuprof.main(["run", "fails", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    rows = [json.loads(line) for line in profile.read_text().splitlines()]
    assert [(r["kind"], r["name"], r["rc"]) for r in rows] == [("phase", "ok", 0), ("phase", "fails", 3)]
    assert rows[0]["cpu_s"] > 0 and rows[0]["wall_s"] >= rows[0]["cpu_s"] * 0.5


def test_run_without_a_separator_is_refused():
    with pytest.raises(SystemExit, match="usage"):
        cpuprof.main(["run", "name", "cmd"])


def test_top_table_ranks_by_cpu_names_lanes_and_sums_each_kind():
    rows = [{"kind": "phase", "name": "unit tests", "cpu_s": 50.0, "wall_s": 60.0, "host_busy_s": 55.0},
            {"kind": "test", "name": "t::a", "cpu_s": 80.0, "wall_s": 90.0, "host_busy_s": 120.0, "lane": "fleet"},
            {"kind": "test", "name": "t::b", "cpu_s": 5.0, "wall_s": 9.0, "host_busy_s": 6.0}]
    lines = cpuprof.top_table(rows, 2).splitlines()
    assert lines[1].split() == ["test", "80.0", "90.0", "120.0", "t::a", "[fleet]"]
    assert lines[2].split()[-1] == "tests"
    assert len(lines) == 1 + 2 + 2
    assert lines[-2:] == ["all 1 phase items: cpu_s 50.0, wall_s 60.0", "all 2 test items: cpu_s 85.0, wall_s 99.0"]


def test_the_meter_keeps_a_restarted_or_destroyed_containers_seconds():
    readings = iter([{"lxc.payload.101": 10.0},                          # at start
                     {"lxc.payload.101": 12.0, "lxc.payload.102": 1.0},  # 101 used 2 s, 102 appeared
                     {"lxc.payload.101": 0.5, "lxc.payload.102": 1.5},   # 101 restarted: a new cgroup from 0
                     {"lxc.payload.102": 2.0}])                          # 101 destroyed
    meter = cpuprof.CgroupMeter(read=lambda: next(readings))
    meter.sample()
    meter.sample()
    meter.sample()
    assert meter.total == {"lxc.payload.101": 2.5, "lxc.payload.102": 2.0}


def test_the_meter_samples_in_its_thread_until_stopped():
    values = {"n": 0.0}

    def read():
        values["n"] += 1.0
        return {"lxc.payload.101": values["n"]}

    meter = cpuprof.CgroupMeter(interval=0.01, read=read).start()
    while values["n"] < 5:
        time.sleep(0.005)
    total = meter.stop()
    assert total["lxc.payload.101"] == values["n"] - 1.0 and values["n"] >= 6


def test_a_lane_counts_its_own_cgroups_and_outside_the_lanes_every_one(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUSERVE_LANE_CGROUPS", raising=False)
    assert cpuprof.lane_filter() is None
    monkeypatch.setenv("GPUSERVE_LANE_CGROUPS", "lxc.payload.103,gpuserve-lab.sshd-lab-pve3")
    keep = cpuprof.lane_filter()
    assert [keep(n) for n in ("lxc.payload.103", "lxc.payload.101", "gpuserve-lab.sshd-lab-pve3",
                              "gpuserve-lab.sshd-lab-pve", "lxc.payload.1030")] == [True, False, True, False, False]
    monkeypatch.setenv("GPUSERVE_LANE_CGROUPS", "gpuserve-lab.sshd-lab-pve")  # lane main's node: not lab-pve3's
    assert not cpuprof.lane_filter()("gpuserve-lab.sshd-lab-pve3")
    # a phase run in a lane is named after it
    monkeypatch.setenv("GPUSERVE_LANE", "faults")
    monkeypatch.setenv("GPUSERVE_PROFILE", str(tmp_path / "p.jsonl"))
    assert cpuprof.main(["run", "step", "--", sys.executable, "-c", "pass"]) == 0
    assert json.loads((tmp_path / "p.jsonl").read_text())["lane"] == "faults"


def test_a_check_run_with_own_counts_no_lab_cgroup(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUSERVE_PROFILE", str(tmp_path / "p.jsonl"))
    monkeypatch.delenv("GPUSERVE_LANE_CGROUPS", raising=False)
    reads = {"n": 0}

    def read():  # 1 s at the meter's start, 9 s at every later look: the container used 8 s meanwhile
        reads["n"] += 1
        return {"lxc.payload.101": 1.0 if reads["n"] == 1 else 9.0}

    monkeypatch.setattr(cpuprof, "lab_cgroups", read)
    assert cpuprof.main(["run", "--own", "check", "--", sys.executable, "-c", "pass"]) == 0
    reads["n"] = 0
    assert cpuprof.main(["run", "phase", "--", sys.executable, "-c", "pass"]) == 0
    own, phase = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert own["cgroups"] == phase["cgroups"] == {"lxc.payload.101": 8.0}  # both see it move
    assert phase["cpu_s"] - own["cpu_s"] > 7.5  # only the plain phase counts it
