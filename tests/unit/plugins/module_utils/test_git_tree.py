"""_git_tree: the one reader of a tree's commit and changes. Real git trees; git's own v1 output is the oracle."""
import subprocess

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _git_tree

IDENT = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]


def git(src, *args, check=True):
    return subprocess.run(["git", "-C", str(src), *IDENT, *args], capture_output=True, text=True, check=check)


def read(src):
    proc = subprocess.run(_git_tree.status_argv(str(src)), capture_output=True, text=True, check=False)
    return _git_tree.parse_status(proc.returncode, proc.stdout, proc.stderr)


def v1(src):
    """git's own porcelain v1 lines, untracked files one by one."""
    out = git(src, "status", "--porcelain=v1", "--untracked-files=all").stdout
    return [line for line in out.splitlines() if line]


@pytest.fixture
def tree(tmp_path):
    git(tmp_path, "init", "-q")
    for name in ("keep.py", "edit.py", "gone.py", "old_name.py", "both.py", "clash.py"):
        (tmp_path / name).write_text("%s = 1\n" % name.split(".", maxsplit=1)[0])
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "one")
    return tmp_path


def test_a_clean_tree_reads_its_commit_and_no_change(tree):
    head = git(tree, "rev-parse", "HEAD").stdout.strip()
    assert read(tree) == {"rc": 0, "error": "", "commit": head, "changes": [], "dirty": False}


def test_every_kind_of_change_reads_as_git_status_porcelain_v1_writes_it(tree):
    git(tree, "checkout", "-q", "-b", "side")
    (tree / "clash.py").write_text("clash = 'side'\n")
    git(tree, "commit", "-q", "-am", "side")
    git(tree, "checkout", "-q", "main")
    (tree / "clash.py").write_text("clash = 'main'\n")
    git(tree, "commit", "-q", "-am", "main")
    assert git(tree, "merge", "-q", "side", check=False).returncode != 0  # clash.py unmerged: "UU"
    head = git(tree, "rev-parse", "HEAD").stdout.strip()
    (tree / "edit.py").write_text("edit = 2\n")                   # " M"
    (tree / "both.py").write_text("both = 2\n")
    git(tree, "add", "both.py")
    (tree / "both.py").write_text("both = 3\n")                   # "MM"
    (tree / "gone.py").unlink()                                   # " D"
    git(tree, "mv", "old_name.py", "new name.py")                 # "R ", a space in the name (quoted by git)
    (tree / "pkg" / "deep").mkdir(parents=True)
    (tree / "pkg" / "deep" / "new.py").write_text("")             # "??", listed file by file, not "pkg/"
    (tree / "staged.py").write_text("")
    git(tree, "add", "staged.py")                                 # "A "
    (tree / "# odd name").write_text("")                          # "??", named like a header, quoted
    (tree / "tab\there.py").write_text("")                        # "??", quoted by git in both formats
    got = read(tree)
    assert sorted(got["changes"]) == sorted(v1(tree))  # v2 lists unmerged entries last, v1 by path
    assert {line[:2] for line in got["changes"]} == {"UU", " M", "MM", " D", "R ", "??", "A "}
    assert '"new name.py"' in [line for line in got["changes"] if line.startswith("R ")][0]
    assert got["commit"] == head and got["dirty"] is True and got["rc"] == 0


def test_a_repository_with_no_commit_names_none(tmp_path):
    git(tmp_path, "init", "-q")
    assert read(tmp_path) == {"rc": 0, "error": "", "commit": None, "changes": [], "dirty": False}
    (tmp_path / "a.py").write_text("")
    assert read(tmp_path)["changes"] == ["?? a.py"] == v1(tmp_path)


def test_no_repository_reads_as_a_failure_not_as_clean(tmp_path):
    got = read(tmp_path / "nowhere")
    assert got["rc"] != 0 and got["commit"] is None and got["changes"] == [] and got["dirty"] is None
    assert "nowhere" in got["error"]


@pytest.mark.parametrize("line, expected", [
    ("1 .M N... 100644 100644 100644 aaaa bbbb a b.py", ' M "a b.py"'),  # a space in a name is the name's
    ("1 .M N... 100644 100644 100644 aaaa bbbb \"a\\tb.py\"", ' M "a\\tb.py"'),  # quoted by git already
    ("2 R. N... 100644 100644 100644 aaaa aaaa R100 new.py\told.py", "R  old.py -> new.py"),
    ("u UU N... 100644 100644 100644 100644 a b c x.py", "UU x.py"),
    ("? # odd name", '?? "# odd name"'),                                 # an untracked file named like a header
    ("? plain.py", "?? plain.py"),
    ("! build/", "!! build/"),
    ("1 .M N... too short", "1 .M N... too short"),                     # not understood: kept, still a change
    ("2 R. N... 1 2 3 a b R100 no-tab.py", "2 R. N... 1 2 3 a b R100 no-tab.py"),
    ("2 R. N... short\tx", "2 R. N... short\tx"),
    ("u UU N... short", "u UU N... short"),
    ("x something new", "x something new"),
    # names with runs of spaces: fields are split on single spaces, and only up to the name
    ("1 .M N... 1 2 3 a b two  spaces.py", ' M "two  spaces.py"'),
    ("1 .M N... 1 2 3 a b  lead.py", ' M " lead.py"'),
    ("u UU N... 1 2 3 4 a b c x  y.py", 'UU "x  y.py"'),
    ("2 R. N... 1 2 3 a b R100 new  name.py\told  name.py", 'R  "old  name.py" -> "new  name.py"'),
    ("u UU N... 1 2 3 4 a b c  lead.py", 'UU " lead.py"'),
    ("2 R. N... 1 2 3 a b R100  lead.py\told.py", 'R  old.py -> " lead.py"'),
    ("? a  b.py", '?? "a  b.py"'),
    ('? "quoted already.py"', '?? "quoted already.py"'),
])
def test_each_v2_entry_as_its_v1_line(line, expected):
    out = "# branch.oid abc\n# branch.head main\n%s\n" % line
    expect = {"rc": 0, "error": "", "commit": "abc", "changes": [expected], "dirty": True}
    assert _git_tree.parse_status(0, out, "") == expect


def test_headers_are_not_changes_and_a_header_value_may_hold_a_space():
    out = "# branch.oid abc def\n# branch.head main\n# branch.upstream origin/main\n\n"
    expect = {"rc": 0, "error": "", "commit": "abc def", "changes": [], "dirty": False}
    assert _git_tree.parse_status(0, out, "") == expect


def test_a_failure_keeps_the_last_500_characters_of_its_error_and_ignores_its_output():
    err = "  " + "e" * 100 + "0123456789" * 50 + " \n"
    got = _git_tree.parse_status(128, "# branch.oid abc\n1 .M N... 1 2 3 a b x.py\n", err)
    assert got == {"rc": 128, "error": "0123456789" * 50, "commit": None, "changes": [], "dirty": None}


def test_the_command_reads_untracked_files_one_by_one_in_any_owners_tree():
    assert _git_tree.status_argv("/opt/sglang/src") == [
        "git", "-c", "safe.directory=*", "-C", "/opt/sglang/src", "status", "--porcelain=v2", "--branch",
        "--untracked-files=all"]
