"""The test tree itself: pytest's default import mode (rootdir-less, `prepend`) imports every test module by its
basename, so two test files of one name anywhere under tests/ stop the whole run at collection ("import file
mismatch") once both are selected, as scripts/test selects them (the unit phase collects tests/, lab tests
deselected by marker but still imported); and no test file imports another."""
import ast
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


COLLECTION = "ansible_collections.gpuserve.sglang.tests"


def sources():
    """Every Python file under tests/, relative to tests/ ('unit/plugins/module_utils/test_gate.py')."""
    out = []
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "output"))
        out += [os.path.relpath(os.path.join(root, f), TESTS) for f in sorted(files) if f.endswith(".py")]
    return out


def resolve(parts):
    """The file under tests/ that the dotted parts (below tests/) name, a module or a package; None if none."""
    if not parts:
        return None
    base = os.path.join(TESTS, *parts)
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return os.path.relpath(path, TESTS)
    return None


def imports_under_tests(rel):
    """The files under tests/ that tests/rel imports: by collection path (ansible_collections.gpuserve.sglang.tests.*),
    relatively (from .nodes import ...), or by the bare name of a file beside it (pytest's `prepend` import mode puts
    a test's own folder on sys.path, so `import test_gate` there would load test_gate.py)."""
    here = [p for p in os.path.dirname(rel).split(os.sep) if p]
    with open(os.path.join(TESTS, rel), encoding="utf-8") as f:
        tree = ast.parse(f.read(), rel)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names)
            if node.level:  # relative: from its own package, or one above per extra dot
                base = here[:len(here) - node.level + 1]
                parts = base + (node.module.split(".") if node.module else [])
                found |= {t for t in [resolve(parts)] + [resolve(parts + [n]) for n in names] if t}
                continue
            targets = [(node.module, names)]
        else:
            continue
        for module, names in targets:
            dotted = module.split(".")
            if module == COLLECTION or module.startswith(COLLECTION + "."):
                parts = dotted[len(COLLECTION.split(".")):]
            elif resolve(here + dotted):  # a bare name: a file beside it
                parts = here + dotted
            else:
                continue
            # `from package import module` imports the module too
            found |= {t for t in [resolve(parts)] + [resolve(parts + [n]) for n in names] if t}
    return found


def test_no_test_file_imports_another():
    """A test file takes shared fakes and helpers from tests/support/<subject>.py and fixtures from a conftest.py,
    never from another test file: importing one loads it a second time under its collection name and ties one
    subject's tests to another's file."""
    bad = {}
    for rel in sources():
        tests = sorted(t for t in imports_under_tests(rel) if os.path.basename(t).startswith("test_"))
        if tests:
            bad["tests/" + rel] = ["tests/" + t for t in tests]
    assert not bad, "test files importing test files (move what they share to tests/support/): %s" % bad
