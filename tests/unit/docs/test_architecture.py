"""The import rules of docs/architecture.md, read from the code: imports point one way (modules, filters and the other
plugins import module_utils; module_utils imports only module_utils; no plugin imports a module, a filter, a lookup
or a role's file), without a cycle; a module_utils file a role sends into the container imports at load only the
standard library and the files sent with it; the container helper's package (_helper_cli.PACKAGE) is exactly what
_helper_cli imports at load, each file of it loading with the standard library and the package alone; and every
arrow the page draws is in the code. Each failure names the file."""
import ast
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PREFIX = "ansible_collections.gpuserve.sglang.plugins."
UTILS = os.path.join(ROOT, "plugins", "module_utils")


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def plugin_files():
    out = []
    for kind in sorted(os.listdir(os.path.join(ROOT, "plugins"))):
        folder = os.path.join(ROOT, "plugins", kind)
        if os.path.isdir(folder):
            out += ["plugins/%s/%s" % (kind, f) for f in sorted(os.listdir(folder)) if f.endswith(".py")]
    return out


def imports(rel, top_level_only=False):
    """The collection's plugin files rel imports ('plugins/module_utils/_gate.py'), and its other top-level modules."""
    tree = ast.parse(read(rel))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found, others = set(), set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(PREFIX):
                path = node.module[len(PREFIX):].split(".")
                if len(path) == 1:  # from ...plugins.module_utils import _pve_client
                    found |= {"plugins/%s/%s.py" % (path[0], a.name) for a in node.names}
                else:
                    found.add("plugins/%s.py" % "/".join(path))
            else:
                others.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    found.add("plugins/%s.py" % alias.name[len(PREFIX):].replace(".", "/"))
                else:
                    others.add(alias.name.split(".")[0])
    return found, others


GRAPH = {rel: imports(rel)[0] for rel in plugin_files()}


@pytest.mark.parametrize("rel", sorted(GRAPH))
def test_plugins_import_only_module_utils(rel):
    bad = sorted(dep for dep in GRAPH[rel] if not dep.startswith("plugins/module_utils/"))
    assert not bad, "%s imports %s: put the shared code in plugins/module_utils/ and import it from there" % (rel, bad)


@pytest.mark.parametrize("rel", sorted(GRAPH))
def test_every_import_names_an_existing_file(rel):
    missing = sorted(dep for dep in GRAPH[rel] if not os.path.exists(os.path.join(ROOT, dep)))
    assert not missing, "%s imports %s, which the tree does not have" % (rel, missing)


def test_the_import_graph_has_no_cycle():
    state = {}

    def visit(node, path):
        if state.get(node) == "done":
            return None
        if state.get(node) == "open":
            return path[path.index(node):] + [node]
        state[node] = "open"
        for dep in sorted(GRAPH.get(node, ())):
            cycle = visit(dep, path + [node])
            if cycle:
                return cycle
        state[node] = "done"
        return None

    for start in sorted(GRAPH):
        cycle = visit(start, [])
        assert not cycle, "import cycle: %s" % " -> ".join(cycle)


def sent_by_role(root=ROOT):
    """{role: module_utils files its tasks, vars or files name}: code a role would send into the container by hand
    (pasted on stdin, copied, read by path) instead of in a module's payload."""
    names = {f for f in os.listdir(UTILS) if f.endswith(".py")}
    out = {}
    for role in sorted(os.listdir(os.path.join(root, "roles"))):
        text = ""
        for sub in ("tasks", "vars", "files", "templates"):
            for dirpath, _dirs, files in os.walk(os.path.join(root, "roles", role, sub)):
                for f in sorted(files):
                    with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as handle:
                        text += handle.read()
        sent = {n for n in re.findall(r"\b(_[a-z0-9_]+\.py)\b", text) if n in names}
        sent |= {"(by path)"} if "plugins/module_utils" in text else set()
        if sent:
            out[role] = sorted(sent)
    return out


def test_no_role_sends_collection_code_into_the_container():
    # docs/architecture.md, "The import graph": collection code reaches the container only in a module's payload (the
    # container helper is a package a module installs: the rules below); no role names a module_utils file
    sent = sent_by_role()
    assert sent == {}, "roles that name plugins/module_utils files, sent into the container by hand: %s" % sent


def test_the_check_sees_a_file_named_in_tasks_vars_or_files(tmp_path):
    for role, sub, text in (("a", "vars", "x: \"{{ lookup('file', role_path ~ '/../../plugins/module_utils/' ~ n) }}\""),
                            ("b", "tasks", "stdin: _git_tree.py"), ("c", "files/usr/sbin", "import _gate.py"),
                            ("d", "tasks", "_not_a_collection_file.py")):
        (tmp_path / "roles" / role / sub).mkdir(parents=True)
        (tmp_path / "roles" / role / sub / "main.yml").write_text(text)
    assert sent_by_role(str(tmp_path)) == {"a": ["(by path)"], "b": ["_git_tree.py"], "c": ["_gate.py"]}


CLI = "plugins/module_utils/_helper_cli.py"


def helper_package():
    """_helper_cli.PACKAGE as its source writes it (a tuple of file names)."""
    for node in ast.parse(read(CLI)).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["PACKAGE"]:
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("%s has no PACKAGE = (...)" % CLI)


def load_imports(rel):
    """What rel imports when it loads: imports anywhere but inside a function (which run only when called), as
    (collection plugin files, other top-level modules)."""
    found, others = set(), set()
    todo = list(ast.parse(read(rel)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(PREFIX):
                path = node.module[len(PREFIX):].split(".")
                if len(path) == 1:
                    found |= {"plugins/%s/%s.py" % (path[0], a.name) for a in node.names}
                else:
                    found.add("plugins/%s.py" % "/".join(path))
            else:
                others.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    found.add("plugins/%s.py" % alias.name[len(PREFIX):].replace(".", "/"))
                else:
                    others.add(alias.name.split(".")[0])
        todo += list(ast.iter_child_nodes(node))
    return found, others


PACKAGE = helper_package()


def test_the_helper_package_is_what_its_command_line_loads():
    """PACKAGE, which sglang_helper installs, is the closure of _helper_cli's imports at load: a file the helper
    imports is installed, and nothing it does not."""
    closure, todo = set(), [CLI]
    while todo:
        rel = todo.pop()
        if rel not in closure:
            closure.add(rel)
            todo += sorted(load_imports(rel)[0])
    assert sorted(os.path.basename(rel) for rel in closure) == sorted(PACKAGE), (
        "%s's PACKAGE differs from what it imports at load" % CLI)
    assert len(set(PACKAGE)) == len(PACKAGE), PACKAGE


@pytest.mark.parametrize("name", PACKAGE)
def test_a_file_of_the_helper_package_loads_with_the_standard_library_and_the_package(name):
    rel = "plugins/module_utils/" + name
    found, others = load_imports(rel)
    strays = sorted(os.path.basename(d) for d in found if os.path.basename(d) not in PACKAGE)
    foreign = sorted(m for m in others if m not in sys.stdlib_module_names and m != "__future__")
    assert not strays and not foreign, (
        "%s is in the container helper's package (_helper_cli.PACKAGE) and imports at load %s: the container has "
        "the standard library and the package only" % (rel, strays + foreign))


def test_a_load_import_inside_a_block_is_seen_and_one_inside_a_function_is_not():
    """load_imports on _gate.py: its module_utils at load, and not _runner (ansible-core), which it imports in the
    function that builds the controller's runner."""
    found, _others = load_imports("plugins/module_utils/_gate.py")
    assert "plugins/module_utils/_nvidia_smi.py" in found and "plugins/module_utils/_runner.py" not in found
    assert "plugins/module_utils/_runner.py" in GRAPH["plugins/module_utils/_gate.py"]


def drawn():
    """(solid arrows, dotted arrows) of the mermaid picture, as (from file, to file)."""
    text = read("docs", "architecture.md")
    (block,) = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    folders = {"m": "plugins/modules/%s.py", "f": "plugins/filter/%s.py", "u": "plugins/module_utils/_%s.py",
               "a": "plugins/action/%s.py", "l": "plugins/lookup/%s.py"}

    def path(node):
        kind, _, stem = node.partition("_")
        if kind == "c":
            hits = [os.path.relpath(os.path.join(d, f), ROOT) for d, _s, fs in os.walk(os.path.join(ROOT, "roles"))
                    for f in fs if f == stem + ".py"]
            assert len(hits) == 1, "docs/architecture.md draws %s: no single roles/*/files/**/%s.py" % (node, stem)
            return hits[0]
        return folders[kind] % stem

    solid = [(path(a), path(b)) for a, b in re.findall(r"^\s*(\w+) --> (\w+)\s*$", block, re.M)]
    dotted = [(path(a), path(b)) for a, b in re.findall(r"^\s*(\w+) -\..*?\.-> (\w+)\s*$", block, re.M)]
    return solid, dotted


SOLID, DOTTED = drawn()


def test_the_picture_draws_arrows_and_no_dotted_one():
    # a dotted arrow was code a role sent into the container by hand; there is none left
    assert len(SOLID) > 20 and DOTTED == []


@pytest.mark.parametrize("arrow", SOLID, ids=lambda a: "%s->%s" % (os.path.basename(a[0]), os.path.basename(a[1])))
def test_every_solid_arrow_of_the_picture_is_an_import(arrow):
    src, dep = arrow
    assert dep in GRAPH.get(src, ()), "docs/architecture.md draws %s -> %s, which the code does not import" % arrow
