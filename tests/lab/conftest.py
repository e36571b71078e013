"""Fixtures every lab test module can use (labutil.LAB_MARKS refers to lab_up by name)."""
from labutil import idle_gpus, lab_up  # noqa: F401  (registers the fixtures)
# the CI profile: one line per lab test in GPUSERVE_PROFILE (tests/lab/cpuprofile.py, scripts/cpuprof.py)
from cpuprofile import pytest_runtest_makereport, pytest_runtest_protocol  # noqa: F401,E402
