"""pytest plugin: one profile line per lab test (wall, CPU, the lab cgroups that moved) in $GPUSERVE_PROFILE, the
file scripts/test writes its phases to (scripts/cpuprof.py). A test's cpu_s is the pytest process's own CPU and its
waited-for children's (the ansible-playbook runs) plus the lab cgroups of its lane (GPUSERVE_LANE_CGROUPS, a
comma-separated list of name prefixes; unset: every lab cgroup). Off when GPUSERVE_PROFILE is unset."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))
import cpuprof  # noqa: E402  (scripts/cpuprof.py: stdlib only, shared with scripts/test)

PROFILE = os.environ.get("GPUSERVE_PROFILE")
LANE = os.environ.get("GPUSERVE_LANE", "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # lab tests only: a conftest's hook wrapper sees every item of the run (the unit tests under tests/lab too);
    # scripts/test profiles the unit tests as one phase
    if not PROFILE or item.get_closest_marker("lab") is None:
        yield
        return
    meter = cpuprof.CgroupMeter().start()
    before = cpuprof.snapshot(include_self=True, cgroups={})
    outcome = {}
    item.stash[_OUTCOME] = outcome
    yield
    after = cpuprof.snapshot(include_self=True, cgroups=meter.stop())
    row = dict(cpuprof.measure(before, after, cpuprof.lane_filter()), kind="test", name=item.nodeid,
               outcome=outcome.get("outcome", "unknown"))
    if LANE:
        row["lane"] = LANE
    cpuprof.append(PROFILE, row)


_OUTCOME = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    result = yield
    report = result.get_result()
    outcome = item.stash.get(_OUTCOME, None)
    if outcome is not None and (report.failed or call.when == "call"):
        if report.failed or "outcome" not in outcome:
            outcome["outcome"] = "failed (%s)" % call.when if report.failed else report.outcome
