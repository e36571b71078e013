"""Fixtures every lab test module can use (labutil.LAB_MARKS refers to lab_up by name)."""
from labutil import idle_gpus, lab_up  # noqa: F401  (registers the fixtures)
