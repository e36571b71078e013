"""_sglang_install: the sglang_install role's reads in the container. facts with smoke and a record: the import
check is repeated only when its inputs change (never on a dirty tree, never trusted after a failure; check mode
writes nothing); state: the system packages, the tree, the pin, the venv's closure and the rendered files, each
command's status reported, never raised.

Runs against a real git tree and a venv whose `python` is a wrapper: the import of sglang.srt.server_args is
answered by the wrapper (and counted), everything else runs in this interpreter."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _sglang_install as si
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result
from ansible_collections.gpuserve.sglang.tests.support.git_tree import commit_tree


def run(argv):
    """The module's runner without Ansible: argv to its end, its status and output."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        return Result(argv, 127, "", str(exc))
    return Result(argv, proc.returncode, proc.stdout, proc.stderr)


def params(**kw):
    out = {name: spec.get("default") for name, spec in si.INFO_ARGS.items()}
    out.update(kw)
    return out


@pytest.fixture
def world(tmp_path):
    src = tmp_path / "src"
    commit_tree(src, {"README": "sglang\n"})
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    calls, rc = tmp_path / "imports", tmp_path / "import.rc"
    rc.write_text("0")
    python = venv / "bin" / "python"
    site = tmp_path / "site"  # the venv's own site-packages, first on its path
    site.mkdir()
    # Called as `python -I -c CODE [ARG...]`: the import check is answered here; other code runs in this interpreter
    # with `site` first on sys.path and its arguments in sys.argv.
    python.write_text('#!/bin/sh\ncase "$*" in *"import sglang.srt.server_args"*) echo . >> %s; '
                      'echo "import says $(cat %s)" >&2; exit "$(cat %s)";; esac\n'
                      'shift 2; exec %s -I -c "import sys; sys.path.insert(0, \'%s\'); exec(sys.argv.pop(1))" "$@"\n'
                      % (calls, rc, rc, sys.executable, site))
    python.chmod(0o755)

    class World:
        record = tmp_path / "state" / "smoke.json"

        def facts(self, record=None, smoke=True, write=True):
            return si.read_facts(run, params(read="facts", src=str(src), venv=str(venv), smoke=smoke,
                                             smoke_record=record and str(record)), write=write, now=1796000000)

        def imports(self):
            return len(calls.read_text().splitlines()) if calls.exists() else 0

    world = World()
    world.src, world.venv, world.rc, world.sitepackages = src, venv, rc, site
    return world


def test_without_a_record_the_import_runs_every_time(world):
    assert world.facts()["smoke"]["rc"] == 0 and world.facts()["smoke"]["rc"] == 0
    assert world.imports() == 2 and not world.record.exists()


def test_a_passed_import_is_recorded_and_not_repeated_while_the_inputs_hold(world):
    first = world.facts(world.record)["smoke"]
    assert first["rc"] == 0 and "cached_since" not in first and world.imports() == 1
    rec = json.loads(world.record.read_text())
    assert len(rec["fingerprint"]) == 64 and rec["module"] == "sglang.srt.server_args" and rec["proven_at"]
    second = world.facts(world.record)["smoke"]
    assert second == {"rc": 0, "stdout": "", "stderr": "", "cached_since": rec["proven_at"]}
    assert world.imports() == 1 and not os.path.exists(str(world.record) + ".tmp")


@pytest.mark.parametrize("change", ["new commit", "pyvenv.cfg", "a distribution"])
def test_any_changed_input_repeats_the_import(world, change):
    world.facts(world.record)
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
    again = world.facts(world.record)["smoke"]
    assert "cached_since" not in again and world.imports() == 2
    assert json.loads(world.record.read_text())["fingerprint"] != before


@pytest.mark.parametrize("change", ["untracked file", "modified file"])
def test_a_dirty_tree_imports_every_time_and_keeps_no_record(world, change):
    world.facts(world.record)
    if change == "untracked file":
        (world.src / "patch.py").write_text("x = 1\n")
    else:
        (world.src / "README").write_text("changed\n")
    for expected in (2, 3):  # patched again in place, the status line would read the same: never trusted
        assert "cached_since" not in world.facts(world.record)["smoke"]
        assert world.imports() == expected and not world.record.exists()


def test_a_failed_import_is_reported_and_removes_the_record(world):
    world.facts(world.record)
    (world.venv / "pyvenv.cfg").write_text("home = /opt/new\n")  # a changed input, so the import runs again
    world.rc.write_text("1")
    failed = world.facts(world.record)["smoke"]
    assert failed["rc"] == 1 and failed["stderr"] == "import says 1" and not world.record.exists()
    # and the next run imports again rather than trusting anything
    world.rc.write_text("0")
    assert "cached_since" not in world.facts(world.record)["smoke"] and world.imports() == 3


def test_an_unreadable_record_counts_as_none(world):
    world.record.parent.mkdir(parents=True)
    world.record.write_text("{not json")
    assert "cached_since" not in world.facts(world.record)["smoke"] and world.imports() == 1
    assert json.loads(world.record.read_text())["fingerprint"]


def test_the_tree_is_read_by_the_collections_reader_in_both_reads(world):
    head = subprocess.run(["git", "-C", str(world.src), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (world.src / "README").write_text("patched\n")
    (world.src / "new dir").mkdir()
    (world.src / "new dir" / "x.py").write_text("")
    tree = {"rc": 0, "error": "", "commit": head, "changes": [" M README", '?? "new dir/x.py"'], "dirty": True}
    assert world.facts()["tree"] == tree
    git = si.read_state(run, params(read="state", src=str(world.src), venv=str(world.venv), pin="HEAD"))["git"]
    assert git["exists"] is True and git["tree"] == tree and git["want"]["stdout"] == head


def test_check_mode_uses_a_valid_record_but_never_writes_or_removes_it(world):
    first = world.facts(world.record, write=False)["smoke"]
    assert first["rc"] == 0 and world.imports() == 1 and not world.record.exists()
    world.facts(world.record)
    written = world.record.read_text()
    assert world.facts(world.record, write=False)["smoke"]["cached_since"] and world.imports() == 2
    (world.venv / "pyvenv.cfg").write_text("home = /opt/new\n")
    world.rc.write_text("1")
    assert world.facts(world.record, write=False)["smoke"]["rc"] == 1 and world.record.read_text() == written


def test_the_record_says_when_the_import_passed():
    assert si.read_record("/nonexistent/record") == {}


def test_without_smoke_no_import_runs(world):
    out = world.facts(world.record, smoke=False)
    assert "smoke" not in out and world.imports() == 0 and not world.record.exists()


def test_state_reads_the_packages_tree_pin_origin_venv_and_files(world, tmp_path):
    git = ["git", "-C", str(world.src)]
    subprocess.run(git + ["remote", "add", "origin", "https://example.invalid/sglang.git"], check=True)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("pytest==1\n")
    os.chmod(str(constraints), 0o640)
    big = tmp_path / "big"
    big.write_bytes(b"x" * si.TEXT_LIMIT)
    dep = world.sitepackages / "gpuserve_dep-1.0.dist-info"
    dep.mkdir()
    (dep / "METADATA").write_text("Name: gpuserve-dep\nVersion: 1.0\n")
    dist = world.sitepackages / "sglang-0.5.23.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Name: sglang\nVersion: 0.5.23\nRequires-Dist: gpuserve-dep\n"
                                   "Requires-Dist: gpuserve-no-such-dist\n")
    (dist / "direct_url.json").write_text('{"url": "file:///opt/sglang/src/python", "dir_info": {"editable": true}}')
    out = si.read_state(run, params(read="state", src=str(world.src), venv=str(world.venv), pin="no-such-ref",
                                    system_packages=["dpkg", "gpuserve-no-such-package"], packages=["sglang"],
                                    constraints=["sglang==0.5.23", "gpuserve-dep<1"],
                                    files=[str(constraints), str(big), str(tmp_path / "none")]))
    assert out["dpkg"] == {"dpkg": True, "gpuserve-no-such-package": False}
    assert out["git"]["want"]["rc"] != 0 and out["git"]["remote_url"] == {
        "rc": 0, "stdout": "https://example.invalid/sglang.git", "stderr": ""}
    assert out["venv"]["python_exists"] is True and out["venv"]["pyvenv_cfg"]["text"] == "home = /usr/bin\n"
    assert out["venv"]["dist"] == {"version": "0.5.23", "direct_url": {
        "url": "file:///opt/sglang/src/python", "dir_info": {"editable": True}}}
    intact = out["venv"]["intact"]
    assert intact["ok"] is False and intact["checked"] == 3
    assert sorted(intact["problems"]) == ["gpuserve-dep 1.0 does not satisfy gpuserve-dep<1",
                                          "gpuserve-no-such-dist is not installed"]
    assert out["files"][str(constraints)] == {
        "exists": True, "sha1": hashlib.sha1(b"pytest==1\n").hexdigest(), "mode": "0640",
        "uid": os.getuid(), "gid": os.getgid(), "text": "pytest==1\n"}
    assert out["files"][str(big)]["text"] is None and out["files"][str(tmp_path / "none")] == {"exists": False}


def test_state_without_a_tree_or_a_venv_reads_what_is_there(tmp_path):
    out = si.read_state(run, params(read="state", src=str(tmp_path / "src"), venv=str(tmp_path / "venv"),
                                    pin="HEAD"))
    assert out == {"dpkg": {}, "git": {"exists": False}, "files": {},
                   "venv": {"python_exists": False, "pyvenv_cfg": {"exists": False}}}


def test_a_venv_probe_that_does_not_answer_json_is_reported(world):
    (world.venv / "bin" / "python").write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    out = si.read_state(run, params(read="state", src=str(world.src), venv=str(world.venv), pin="HEAD"))
    assert out["venv"]["error"] == {"rc": 3, "stdout": "", "stderr": "broken"}


def test_a_long_error_keeps_its_end():
    res = si.command(Result(["x"], 1, " out \n", "a" * 3000 + "the cause\n"))
    assert res == {"rc": 1, "stdout": "out", "stderr": ("a" * 3000 + "the cause")[-2000:]}


def test_the_fingerprint_recipe_is_the_one_the_records_before_it_moved_were_written_with(world):
    """Moving the recipe into _install_fingerprint.py (and the reads into this module) changed no fingerprint: a record
    written before stays valid, so no deploy after the upgrade imports SGLang again for nothing. The expected value is
    the old inline recipe's."""
    world.facts(world.record)
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
