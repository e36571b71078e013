"""The test tree itself: pytest's default import mode (rootdir-less, `prepend`) imports every test module by its
basename, so two test files of one name anywhere under tests/ stop the whole run at collection ("import file
mismatch") once both are selected, as scripts/test selects them (the unit phase collects tests/, lab tests
deselected by marker but still imported)."""
import collections
import os

TESTS = os.path.join(os.path.dirname(__file__), "..", "..")


def test_module_basenames():
    by_name = collections.defaultdict(list)
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py") and (name.startswith("test_") or name == "conftest.py"):
                by_name[name].append(os.path.relpath(os.path.join(root, name), TESTS))
    dup = {k: v for k, v in by_name.items() if len(v) > 1 and k != "conftest.py"}
    assert not dup, "test files of one basename (rename one): %s" % dup
