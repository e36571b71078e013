#!/usr/bin/env python3
"""Builds the lab's SGLang git repository from the real SGLang release files, with deterministic SHAs.

The lab has no network inside the container, so `sglang_install` clones a local bare repository
(bind-mounted or copied to /opt/gpuserve-lab/sglang.git in the container) instead of GitHub. Its two
commits hold the real `sglang/` package of two PyPI releases, laid out like upstream (`python/sglang/`,
`python/pyproject.toml`), so a pin change (0.5.22 -> 0.5.23), HEAD verification, a dirty tree and
`pip install -e "python[...]"` are exercised for real.

What is not upstream's: the history (two commits, not sgl-project's) and `python/pyproject.toml`, which
is generated from the wheel's METADATA (same name, version, dependencies, extras and entry points) with
a plain setuptools backend. SGLang 0.5.22/0.5.23 publish no sdist (checked 2026-11-29), so the files come
from the cp311 manylinux wheel, prebuilt Rust extensions (.so) included; upstream builds them with Rust,
which this lab cannot do offline. GPUSERVE-LAB.md in the tree says so.

Fixed author/committer names and dates, sorted file lists and explicit modes make the SHAs a function of
the wheel bytes only (checked against the pinned sha256 below), so inventory/lab can pin a SHA.

Usage: lab/sglang_repo.py [--cache DIR] [--output BARE_REPO]
Prints "<version> <sha>" per commit; exits non-zero if a built SHA differs from EXPECTED_SHAS.
"""
import argparse
import email.parser
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

# version -> sha256 of the cp311 manylinux wheel on PyPI
RELEASES = [
    ("0.5.22", "cc9a0f15bd8f877a0584fdb7a1702240177a1f1cc8d17c978715161717b9037b"),
    ("0.5.23", "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"),
]
WHEEL = "sglang-{v}-cp311-cp311-manylinux_2_34_x86_64.whl"
# Commit SHAs this script produces; inventory/lab pins the last one. Update both together.
EXPECTED_SHAS = {
    "0.5.22": "290b64acf887063fd9a030bf35946481c23ca84d",
    "0.5.23": "eaeec662aedac01d0934eefa0eb20aba0781315d",
}
DATES = {"0.5.22": "2026-11-01T00:00:00+00:00", "0.5.23": "2026-11-15T00:00:00+00:00"}
IDENT = {"name": "gpuserve lab", "email": "lab@gpuserve.invalid"}

GITIGNORE = """\
# as upstream: build outputs of `pip install -e python` and imports must not make the tree dirty
__pycache__/
*.py[cod]
*.egg-info/
build/
dist/
.eggs/
"""

LAB_README = """\
# GPUSERVE-LAB: not the upstream SGLang repository

Built by gpuserve's lab/sglang_repo.py from the PyPI wheel {wheel}
(sha256 {sha}). `python/sglang/` holds the wheel's files unchanged (prebuilt Rust extensions
included); `python/pyproject.toml` is generated from the wheel's METADATA. The history is two
lab commits (0.5.22, 0.5.23) with fixed dates, so their SHAs are reproducible.
"""


def git(args, cwd, env=None):
    return subprocess.run(["git"] + args, cwd=cwd, env=env, check=True, text=True,
                          stdout=subprocess.PIPE).stdout.strip()


def fetch_wheel(version, sha, cache):
    path = os.path.join(cache, WHEEL.format(v=version))
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
                        "--abi", "cp311", "--platform", "manylinux_2_34_x86_64",
                        "-d", cache, "sglang==%s" % version], check=True)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha:
        raise SystemExit("%s: sha256 %s, expected %s" % (path, digest.hexdigest(), sha))
    return path


def toml_str(value):
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pyproject(meta, entry_points):
    deps, extras = [], {}
    for req in meta.get_all("Requires-Dist") or []:
        if "extra ==" in req:
            spec, marker = req.split(";", 1)
            parts = [p.strip() for p in marker.split(" and ")]
            extra = [p for p in parts if p.startswith("extra ==")][0].split("==")[1].strip().strip('"')
            rest = " and ".join(p for p in parts if not p.startswith("extra =="))
            extras.setdefault(extra, []).append(spec.strip() + ("; " + rest if rest else ""))
        else:
            deps.append(req)
    scripts = []
    section = None
    for line in entry_points.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif line and section == "[console_scripts]":
            name, target = [x.strip() for x in line.split("=", 1)]
            scripts.append("%s = %s" % (name, toml_str(target)))
    out = [
        "# GPUSERVE-LAB: generated from the %s wheel's METADATA by lab/sglang_repo.py (see ../GPUSERVE-LAB.md)"
        % meta["Version"],
        "[build-system]",
        'requires = ["setuptools>=61"]',
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        'name = "sglang"',
        "version = %s" % toml_str(meta["Version"]),
        "description = %s" % toml_str(meta["Summary"]),
        "requires-python = %s" % toml_str(meta["Requires-Python"]),
        "dependencies = [",
    ] + ["  %s," % toml_str(d) for d in deps] + ["]", "", "[project.optional-dependencies]"]
    for extra in sorted(extras):
        out.append("%s = [%s]" % (toml_str(extra), ", ".join(toml_str(d) for d in extras[extra])))
    out += ["", "[project.scripts]"] + scripts
    out += ["", "[tool.setuptools.packages.find]", 'include = ["sglang*"]', "",
            "[tool.setuptools.package-data]", '"*" = ["*"]', ""]
    return "\n".join(out)


def populate(tree, wheel, version, sha):
    for name in sorted(os.listdir(tree)):
        if name != ".git":
            path = os.path.join(tree, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    pkg_root = os.path.join(tree, "python")
    with zipfile.ZipFile(wheel) as zf:
        dist_info = "sglang-%s.dist-info/" % version
        meta = email.parser.Parser().parsestr(zf.read(dist_info + "METADATA").decode())
        entry_points = zf.read(dist_info + "entry_points.txt").decode()
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            if info.filename.startswith(dist_info) or info.is_dir():
                continue
            dest = os.path.join(pkg_root, info.filename)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with zf.open(info) as src, open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.chmod(dest, 0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
    with open(os.path.join(pkg_root, "pyproject.toml"), "w") as fh:
        fh.write(pyproject(meta, entry_points))
    with open(os.path.join(tree, ".gitignore"), "w") as fh:
        fh.write(GITIGNORE)
    with open(os.path.join(tree, "GPUSERVE-LAB.md"), "w") as fh:
        fh.write(LAB_README.format(wheel=os.path.basename(wheel), sha=sha))


def build(cache, output):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=tempfile.mkdtemp(prefix="sglang-repo-home-"),
               GIT_AUTHOR_NAME=IDENT["name"], GIT_AUTHOR_EMAIL=IDENT["email"],
               GIT_COMMITTER_NAME=IDENT["name"], GIT_COMMITTER_EMAIL=IDENT["email"], TZ="UTC")
    shas = {}
    with tempfile.TemporaryDirectory(prefix="sglang-repo-") as tree:
        git(["init", "--quiet", "--initial-branch=main"], tree, env)
        git(["config", "core.fileMode", "true"], tree, env)
        git(["config", "core.autocrlf", "false"], tree, env)
        # Each commit adds ~6,000 loose objects, past gc.auto's 6,700 after the second: git would then start a
        # detached `gc --auto` that packs and prunes them while the clone below copies them ("failed to copy
        # file ... No such file or directory", seen in CI). The output is gc'ed explicitly, in the foreground.
        git(["config", "gc.auto", "0"], tree, env)
        git(["config", "maintenance.auto", "false"], tree, env)
        for version, sha in RELEASES:
            populate(tree, fetch_wheel(version, sha, cache), version, sha)
            git(["add", "--all", "."], tree, env)
            cenv = dict(env, GIT_AUTHOR_DATE=DATES[version], GIT_COMMITTER_DATE=DATES[version])
            git(["commit", "--quiet", "--no-gpg-sign", "-m", "sglang %s (files of the PyPI wheel, sha256 %s)"
                 % (version, sha)], tree, cenv)
            git(["tag", "v%s" % version], tree, env)
            shas[version] = git(["rev-parse", "HEAD"], tree, env)
        tmp_out = output + ".tmp"
        shutil.rmtree(tmp_out, ignore_errors=True)
        git(["clone", "--quiet", "--bare", tree, tmp_out], tree, env)
        git(["gc", "--quiet", "--prune=now"], tmp_out, env)
        shutil.rmtree(output, ignore_errors=True)
        os.rename(tmp_out, output)
    shutil.rmtree(env["HOME"], ignore_errors=True)
    return shas


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cache", default="/var/cache/gpuserve-lab/sglang-wheels")
    parser.add_argument("--output", default="/var/lib/gpuserve-lab/sglang.git")
    args = parser.parse_args()
    shas = build(args.cache, os.path.abspath(args.output))
    bad = []
    for version, sha in shas.items():
        print(version, sha)
        if EXPECTED_SHAS.get(version) and EXPECTED_SHAS[version] != sha:
            bad.append("%s: built %s, expected %s" % (version, sha, EXPECTED_SHAS[version]))
    if bad:
        raise SystemExit("SHA drift (git or wheel changed?):\n" + "\n".join(bad))


if __name__ == "__main__":
    main()
