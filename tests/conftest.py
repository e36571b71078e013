"""Puts the collection view on sys.path so tests import plugins as ansible_collections.gpuserve.sglang.*, and gives
tests that run ansible-playbook the same view."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, "collections")  # collections/ansible_collections/gpuserve/sglang links to ROOT
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


def pytest_configure(config):
    """pytest.ini's markers, for a run that does not read it: ansible-test units on the artifact (its own config,
    --strict-markers) runs the shipped tests of tests/unit/plugins, some of them marked foreign_python."""
    config.addinivalue_line("markers", "foreign_python: runs the collection's code in another process (pytest.ini)")


@pytest.fixture(scope="session")
def collections_path():
    """ANSIBLE_COLLECTIONS_PATH for an ansible-playbook a test runs: gpuserve.sglang is this checkout. Such a test
    is marked foreign_python: scripts/mutation's staging tree has no collections/ (and its trampolines cannot run
    in another process)."""
    return COLLECTIONS
