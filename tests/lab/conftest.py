"""Fixtures every lab test module can use (labutil.LAB_MARKS refers to lab_up by name)."""
import os

import pytest

from labutil import idle_gpus, lab_up  # noqa: F401  (registers the fixtures)
# the CI profile: one line per lab test in GPUSERVE_PROFILE (tests/lab/cpuprofile.py, scripts/cpuprof.py)
from cpuprofile import pytest_runtest_makereport, pytest_runtest_protocol  # noqa: F401,E402


def pytest_collection_finish(session):
    """Every selected lab test runs in the lane it belongs to (tests/lab/lanes.py): one of another lane would act on
    this lane's container, or on none; one of no lane would never run in CI."""
    import lanes  # pylint: disable=import-outside-toplevel
    here = lanes.current()["name"]
    wrong = {}
    for item in session.items:
        if item.get_closest_marker("lab") is None:
            continue
        lane = lanes.lane_of(str(item.path))
        if lane != here:
            wrong.setdefault(lane, set()).add(os.path.relpath(str(item.path), lanes.ROOT))
    if wrong:
        lines = ["%s: %s" % (", ".join(sorted(files)), "in no lane: add it to one in tests/lab/lanes.py" if lane is None
                 else "lane %s (GPUSERVE_LANE=%s)" % (lane, lane)) for lane, files in sorted(wrong.items(), key=str)]
        raise pytest.UsageError("lab tests selected outside lane %s (GPUSERVE_LANE; scripts/lab-lanes runs every "
                                "lane): %s" % (here, "; ".join(lines)))
