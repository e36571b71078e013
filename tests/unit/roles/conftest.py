"""Fixtures shared by the tests of the roles' in-container code."""
import importlib
import os

import pytest

from ansible_collections.gpuserve.sglang.tests.support.gpuserve_sglang import HELPER, NAME


@pytest.fixture(scope="module")
def helper():
    """The sglang_server helper, imported by the name mutmut keys its mutants by (and so this checkout's file)."""
    mod = importlib.import_module(NAME)
    assert os.path.realpath(mod.__file__) == os.path.realpath(HELPER)
    return mod
