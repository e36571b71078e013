"""sglang_install_state.py: what the role sends (the collection's _git_tree.py, then the script, on one stdin), and
facts --smoke --record: the import check is repeated only when its inputs change.

Runs the real script against a real git tree and a venv whose `python` is a wrapper: the import of
sglang.srt.server_args is answered by the wrapper (and counted), everything else runs in this interpreter."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
SCRIPT = os.path.join(ROOT, "roles", "sglang_install", "files", "sglang_install_state.py")
GIT_TREE = os.path.join(ROOT, "plugins", "module_utils", "_git_tree.py")
FINGERPRINT = os.path.join(ROOT, "plugins", "module_utils", "_install_fingerprint.py")


def sent(*argv):
    """Run the script as the role does (tasks/state.yml, facts.yml): python3 - MODE ... with the files on stdin, in
    the order of vars/main.yml's __sglang_install_state_script."""
    with open(GIT_TREE) as tree, open(FINGERPRINT) as fingerprint, open(SCRIPT) as script:
        stdin = tree.read() + "\n\n" + fingerprint.read() + "\n\n" + script.read()
    return subprocess.run([sys.executable, "-", *argv], input=stdin, capture_output=True, text=True, check=False)


@pytest.fixture
def world(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    git = ["git", "-C", str(src), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    (src / "README").write_text("sglang\n")
    subprocess.run(git + ["add", "README"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    calls, rc = tmp_path / "imports", tmp_path / "import.rc"
    rc.write_text("0")
    python = venv / "bin" / "python"
    site = tmp_path / "site"  # the venv's own site-packages, first on its path
    site.mkdir()
    # Called as `python -I -c CODE`: the import check is answered here; other code runs in this interpreter with
    # `site` first on sys.path.
    python.write_text('#!/bin/sh\ncase "$*" in *"import sglang.srt.server_args"*) echo . >> %s; '
                      'echo "import says $(cat %s)" >&2; exit "$(cat %s)";; esac\n'
                      'exec %s -I -c "import sys; sys.path.insert(0, \'%s\'); exec(sys.argv[1])" "$3"\n'
                      % (calls, rc, rc, sys.executable, site))
    python.chmod(0o755)

    class World:
        record = tmp_path / "state" / "smoke.json"

        def facts(self, *extra):
            proc = sent("facts", "--src", str(src), "--venv", str(venv), "--smoke", *extra)
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout)

        def imports(self):
            return len(calls.read_text().splitlines()) if calls.exists() else 0

    world = World()
    world.src, world.venv, world.rc, world.sitepackages = src, venv, rc, site
    return world


def test_without_a_record_the_import_runs_every_time(world):
    assert world.facts()["smoke"]["rc"] == 0 and world.facts()["smoke"]["rc"] == 0
    assert world.imports() == 2 and not world.record.exists()


def test_a_passed_import_is_recorded_and_not_repeated_while_the_inputs_hold(world):
    first = world.facts("--record", str(world.record))["smoke"]
    assert first["rc"] == 0 and "cached_since" not in first and world.imports() == 1
    rec = json.loads(world.record.read_text())
    assert len(rec["fingerprint"]) == 64 and rec["module"] == "sglang.srt.server_args" and rec["proven_at"]
    second = world.facts("--record", str(world.record))["smoke"]
    assert second == {"rc": 0, "stdout": "", "stderr": "", "cached_since": rec["proven_at"]}
    assert world.imports() == 1 and not os.path.exists(str(world.record) + ".tmp")


@pytest.mark.parametrize("change", ["new commit", "pyvenv.cfg", "a distribution"])
def test_any_changed_input_repeats_the_import(world, change):
    world.facts("--record", str(world.record))
    before = json.loads(world.record.read_text())["fingerprint"]
    if change == "new commit":
        (world.src / "README").write_text("two\n")
        subprocess.run(["git", "-C", str(world.src), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                        "commit", "-q", "-am", "two"], check=True)
    elif change == "pyvenv.cfg":
        (world.venv / "pyvenv.cfg").write_text("home = /opt/other\n")
    else:  # a new distribution on the venv's path, as pip install would leave
        site = world.sitepackages
        (site / "extra_dist-1.0.dist-info").mkdir()
        (site / "extra_dist-1.0.dist-info" / "METADATA").write_text("Name: extra-dist\nVersion: 1.0\n")
    again = world.facts("--record", str(world.record))["smoke"]
    assert "cached_since" not in again and world.imports() == 2
    assert json.loads(world.record.read_text())["fingerprint"] != before


@pytest.mark.parametrize("change", ["untracked file", "modified file"])
def test_a_dirty_tree_imports_every_time_and_keeps_no_record(world, change):
    world.facts("--record", str(world.record))
    if change == "untracked file":
        (world.src / "patch.py").write_text("x = 1\n")
    else:
        (world.src / "README").write_text("changed\n")
    for expected in (2, 3):  # patched again in place, the status line would read the same: never trusted
        assert "cached_since" not in world.facts("--record", str(world.record))["smoke"]
        assert world.imports() == expected and not world.record.exists()


def test_a_failed_import_is_reported_and_removes_the_record(world):
    world.facts("--record", str(world.record))
    (world.venv / "pyvenv.cfg").write_text("home = /opt/new\n")  # a changed input, so the import runs again
    world.rc.write_text("1")
    failed = world.facts("--record", str(world.record))["smoke"]
    assert failed["rc"] == 1 and failed["stderr"] == "import says 1" and not world.record.exists()
    # and the next run imports again rather than trusting anything
    world.rc.write_text("0")
    assert "cached_since" not in world.facts("--record", str(world.record))["smoke"] and world.imports() == 3


def test_an_unreadable_record_counts_as_none(world):
    world.record.parent.mkdir(parents=True)
    world.record.write_text("{not json")
    assert "cached_since" not in world.facts("--record", str(world.record))["smoke"] and world.imports() == 1
    assert json.loads(world.record.read_text())["fingerprint"]


def test_the_tree_is_read_by_the_collections_reader_in_both_modes(world):
    head = subprocess.run(["git", "-C", str(world.src), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (world.src / "README").write_text("patched\n")
    (world.src / "new dir").mkdir()
    (world.src / "new dir" / "x.py").write_text("")
    tree = {"rc": 0, "error": "", "commit": head, "changes": [" M README", '?? "new dir/x.py"'], "dirty": True}
    assert world.facts()["tree"] == tree
    proc = sent("state", "--src", str(world.src), "--venv", str(world.venv), "--pin", "HEAD")
    assert proc.returncode == 0, proc.stderr
    git = json.loads(proc.stdout)["git"]
    assert git["exists"] is True and git["tree"] == tree and git["want"]["stdout"] == head


@pytest.mark.parametrize("ahead", [(), ("tree",), ("fingerprint",)])
def test_without_both_collection_files_ahead_of_it_the_script_refuses_by_name(world, ahead):
    files = {"tree": GIT_TREE, "fingerprint": FINGERPRINT}
    stdin = "".join(open(files[name]).read() + "\n\n" for name in ahead) + open(SCRIPT).read()
    proc = subprocess.run([sys.executable, "-", "facts", "--src", str(world.src), "--venv", str(world.venv)],
                          input=stdin, capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == ("sglang_install_state.py: send plugins/module_utils/_git_tree.py and "
                                   "_install_fingerprint.py ahead of it on the same stdin")


def test_the_fingerprint_recipe_is_the_one_the_records_before_it_moved_were_written_with(world):
    """Moving the recipe into _install_fingerprint.py changed no fingerprint: a record written before stays valid, so
    no deploy after the upgrade imports SGLang again for nothing. The expected value is the old inline recipe's."""
    import hashlib
    world.facts("--record", str(world.record))
    probe = subprocess.run([str(world.venv / "bin" / "python"), "-I", "-c", FINGERPRINT_PROBE_OF_BEFORE],
                           capture_output=True, text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(world.src), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    inputs = {"module": "sglang.srt.server_args", "head": head, "status": [], "venv": probe,
              "pyvenv_cfg": hashlib.sha1((world.venv / "pyvenv.cfg").read_bytes()).hexdigest()}
    before = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    assert json.loads(world.record.read_text())["fingerprint"] == before


# sglang_install_state.py's _VENV_FINGERPRINT at 084c817, before the recipe moved
FINGERPRINT_PROBE_OF_BEFORE = r'''
import importlib.metadata as md, json, sys
print(json.dumps({"python": sys.version, "dists": sorted({(d.metadata["Name"] or "", d.version)
                                                          for d in md.distributions()})}))
'''
