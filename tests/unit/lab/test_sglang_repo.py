"""lab/sglang_repo.py: the lab's SGLang git repository, built here from two small synthetic wheels.

The real build (two PyPI wheels, ~6,000 files each) runs in every `lab up`; these tests cover the same code on
wheels made in the test, so they run in seconds and offline.
"""
import hashlib
import importlib.util
import os
import subprocess
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES_PER_WHEEL = 1200  # enough loose objects to cross a gc.auto of 1 in every objects/xx/ bucket


@pytest.fixture
def repo_mod(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("sglang_repo", os.path.join(ROOT, "lab", "sglang_repo.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cache = tmp_path / "cache"
    cache.mkdir()
    releases = []
    for version in ("0.5.22", "0.5.23"):
        path = cache / mod.WHEEL.format(v=version)
        with zipfile.ZipFile(path, "w") as zf:
            dist_info = "sglang-%s.dist-info/" % version
            zf.writestr(dist_info + "METADATA", "Metadata-Version: 2.1\nName: sglang\nVersion: %s\n"
                        "Summary: test wheel\nRequires-Python: >=3.10\nRequires-Dist: aiohttp\n"
                        "Requires-Dist: torch; extra == \"srt\"\n" % version)
            zf.writestr(dist_info + "entry_points.txt", "[console_scripts]\nsglang = sglang.cli:main\n")
            for i in range(FILES_PER_WHEEL):
                zf.writestr("sglang/m%04d.py" % i, "VERSION = %r\nN = %d\n" % (version, i))
        releases.append((version, hashlib.sha256(path.read_bytes()).hexdigest()))
    monkeypatch.setattr(mod, "RELEASES", releases)
    monkeypatch.setattr(mod, "EXPECTED_SHAS", {})
    return mod, str(cache)


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo] + list(args), check=True, text=True,
                          stdout=subprocess.PIPE).stdout.strip()


def test_build_makes_a_bare_repo_with_tagged_reproducible_commits(repo_mod, tmp_path):
    mod, cache = repo_mod
    first = mod.build(cache, str(tmp_path / "a.git"))
    second = mod.build(cache, str(tmp_path / "b.git"))
    assert first == second and set(first) == {"0.5.22", "0.5.23"}
    repo = str(tmp_path / "a.git")
    assert git(repo, "rev-parse", "--is-bare-repository") == "true"
    assert git(repo, "rev-parse", "v0.5.22^{commit}") == first["0.5.22"]
    assert git(repo, "rev-parse", "main") == first["0.5.23"]
    assert git(repo, "count-objects", "-v").splitlines()[0] == "count: 0"  # packed, nothing loose
    files = git(repo, "ls-tree", "-r", "--name-only", "v0.5.23").splitlines()
    assert {".gitignore", "GPUSERVE-LAB.md", "python/pyproject.toml", "python/sglang/m0000.py"} <= set(files)
    pyproject = git(repo, "show", "v0.5.23:python/pyproject.toml")
    assert 'version = "0.5.23"' in pyproject and '"srt" = ["torch"]' in pyproject
    assert 'sglang = "sglang.cli:main"' in pyproject
    assert not (tmp_path / "a.git.tmp").exists()


def test_no_automatic_gc_runs_in_the_work_tree_before_the_clone(repo_mod, tmp_path):
    """CI failed once with "failed to copy file to .../objects/7c/...: No such file or directory": the second
    commit crossed gc.auto's 6,700 loose objects, git started a detached `gc --auto`, and it pruned objects the
    clone was copying. A global gc.auto of 1 with autoDetach off makes that gc certain and synchronous here: the
    build must still reach the clone with every object loose (its own config turns automatic gc off)."""
    mod, cache = repo_mod
    real_git = mod.git
    seen = {}

    def spy(args, cwd, env=None):
        if args[0] == "init":
            with open(os.path.join(env["HOME"], ".gitconfig"), "w") as fh:
                fh.write("[gc]\n\tauto = 1\n\tautoDetach = false\n")
        if args[0] == "clone":
            seen["objects"] = real_git(["count-objects", "-v"], cwd, env)
        return real_git(args, cwd, env)

    mod.git = spy
    mod.build(cache, str(tmp_path / "out.git"))
    counts = dict(line.split(": ") for line in seen["objects"].splitlines())
    assert counts["in-pack"] == "0" and int(counts["count"]) > 2 * FILES_PER_WHEEL, seen["objects"]
