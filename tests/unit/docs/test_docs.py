"""The docs describe the repository as it is: docs/architecture.md's table of the tree names every module, role,
playbook, plugin type and script of the tree and nothing the tree lacks, and every path it lists exists; no doc (README.md, docs/**/*.md, roles/*/README.md)
links to or cites a repository file that does not exist, and none cites the project's notes outside the
repository (DESIGN.md, LAB_NOTES, ../shared/...) as if they were in it. Each failure names the doc and the path."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def repo_files():
    """Tracked files and untracked ones git does not ignore (a file about to be committed counts)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return {f for f in out if os.path.exists(os.path.join(ROOT, f))}


FILES = repo_files()
DIRS = {os.path.dirname(f) for f in FILES}
for _d in list(DIRS):
    while _d:
        DIRS.add(_d)
        _d = os.path.dirname(_d)
TOP = sorted({f.split("/")[0] for f in FILES} - {".git"})
ROLE_PARTS = ("defaults/", "meta/", "tasks/", "vars/", "handlers/", "templates/", "files/")
DOCS = sorted(f for f in FILES if f == "README.md" or re.fullmatch(r"docs/.+\.md|roles/[^/]+/README\.md", f))

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# A citation: a path that starts with one of the repository's top-level names, not inside a longer path
# (/opt/sglang/..., artifacts/...). A path followed by a placeholder or a glob (<date>, *, {a,b}) names a pattern.
CITE = re.compile(r"(?<![\w./~$-])((?:%s)(?:/[\w.+@-]+)*/?)(?![\w<*{…])" % "|".join(re.escape(t) for t in TOP))
OUTSIDE = re.compile(r"DESIGN\.md|LAB_NOTES|\.\./shared/")


def exists(path):
    path = path.rstrip("/")
    return path in FILES or path in DIRS


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def resolves(doc, path):
    """A cited path is the repository root's, the doc's own folder's, or (meta/main.yml) a role's."""
    if exists(path) or exists(os.path.normpath(os.path.join(os.path.dirname(doc), path))):
        return True
    return path.startswith(ROLE_PARTS) and any(exists("roles/%s/%s" % (r, path)) for r in roles())


def roles():
    return sorted({f.split("/")[1] for f in FILES if f.startswith("roles/") and f.count("/") >= 2})


@pytest.mark.parametrize("doc", DOCS)
def test_every_link_of_a_doc_points_into_the_repository(doc):
    bad = []
    for target in LINK.findall(read(doc)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        if not exists(os.path.normpath(os.path.join(os.path.dirname(doc), target))):
            bad.append(target)
    assert not bad, "%s links to files the repository does not have: %s" % (doc, bad)


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_cites_exists(doc):
    bad = []
    for path in CITE.findall(read(doc)):
        path = path.rstrip(".")
        if "/" not in path and "." not in path:
            continue  # a bare word such as "lab" or "scripts"
        if not resolves(doc, path):
            bad.append(path)
    assert not bad, "%s cites paths the repository does not have: %s" % (doc, sorted(set(bad)))


@pytest.mark.parametrize("doc", DOCS)
def test_no_doc_cites_the_projects_notes_as_if_in_the_repository(doc):
    found = sorted(set(OUTSIDE.findall(read(doc))))
    assert not found, ("%s cites %s, which this repository does not have: say \"the project's design notes (not in "
                       "this repository)\" or drop the citation" % (doc, found))


TREE_DOC, TREE_SECTION = "docs/architecture.md", "The tree"


def layout():
    """{path in the first column: the names in backticks of the others} of docs/architecture.md's table of the tree."""
    section = read(TREE_DOC).split("\n## %s\n" % TREE_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2 or cells[0] in ("path", "---"):
            continue
        names = re.findall(r"`([^`]+)`", "|".join(cells[1:]))
        for path in re.findall(r"`([^`]+)`", cells[0]):
            rows[path] = names
    return rows


def matches(path):
    """A listed path exists; one with a placeholder or a glob (`roles/<role>/files/`, `_*.py`) matches something."""
    path = path.rstrip("/")
    if not re.search(r"[<*]", path):
        return exists(path)
    pattern = re.compile("".join("[^/]+" if part.startswith("<") else "[^/]*" if part == "*" else re.escape(part)
                                 for part in re.split(r"(<[^>/]+>|\*)", path)))
    return any(pattern.fullmatch(p) for p in FILES | DIRS)


def tree(folder, pattern):
    return sorted({m.group(1) for f in FILES for m in [re.fullmatch(folder + pattern, f)] if m})


LAYOUT = layout()


def test_the_layout_table_lists_only_paths_that_exist():
    missing = [p for p in LAYOUT if not matches(p)]
    assert not missing, "%s's table of the tree lists paths the repository does not have: %s" % (TREE_DOC, missing)


def test_a_placeholder_path_of_the_table_must_match_the_tree():
    assert matches("roles/<role>/tasks/") and matches("plugins/module_utils/_*.py")
    assert not matches("roles/<role>/no_such_folder/") and not matches("plugins/module_utils/*.txt")


def test_the_layout_table_lists_every_top_level_folder():
    folders = sorted(t for t in TOP if not t.startswith(".") and t in DIRS)
    missing = [f for f in folders if not any(p.startswith(f + "/") for p in LAYOUT)]
    assert not missing, "%s's table of the tree lacks a row for %s" % (TREE_DOC, missing)


def test_the_layout_table_lists_every_plugin_type():
    types = tree("plugins/", r"([^/_][^/]*)/[^/]+")
    missing = [t for t in types + ["doc_fragments"] if "plugins/%s/" % t not in LAYOUT]
    assert not missing, "%s's table of the tree lacks the plugin types %s" % (TREE_DOC, missing)


@pytest.mark.parametrize("row, names", [
    ("plugins/modules/", tree("plugins/modules/", r"([^_][^/]*)\.py")),
    ("plugins/connection/", tree("plugins/connection/", r"([^_][^/]*)\.py")),
    ("plugins/action/", tree("plugins/action/", r"([^_][^/]*)\.py")),
    ("plugins/callback/", tree("plugins/callback/", r"([^_][^/]*)\.py")),
    ("plugins/lookup/", tree("plugins/lookup/", r"([^_][^/]*)\.py")),
    ("roles/", tree("roles/", r"([^/]+)/.+")),
    ("playbooks/", tree("playbooks/", r"([^/]+\.yml)")),
    ("scripts/", tree("scripts/", r"([^/]+)")),
])
def test_a_layout_row_names_each_of_its_files_and_only_those(row, names):
    assert names, "no %s in the tree" % row
    listed = set(LAYOUT.get(row, []))
    missing = [n for n in names if n not in listed]
    assert not missing, "%s's table of the tree: row %s does not name %s" % (TREE_DOC, row, missing)
    # the row's own names that look like one of its files (others are prose in backticks: `lab/lab up`)
    strays = [n for n in listed if re.fullmatch(r"[\w.-]+", n) and n not in names]
    assert not strays, "%s's table of the tree: row %s names %s, which the tree does not have" % (TREE_DOC, row, strays)
