"""The collection as users get it: the Galaxy artifact holds every plugin, role and playbook and nothing of the
lab; it installs into an empty path and works from outside the repository; the declared dependencies are exactly
the ones used and agree across galaxy.yml, requirements.yml, requirements.txt and the EE requirements; the role
READMEs are current. Runs `ansible-galaxy`, `ansible-doc` and `ansible-playbook` from the controller venv."""
import glob
import os
import re
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.dirname(sys.executable)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import role_readmes  # noqa: E402  pylint: disable=wrong-import-position

FQCN = re.compile(r"\b([a-z_]+\.[a-z_]+)\.[a-z_]+\b")


def tool(name):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.skip("%s is not installed beside this Python (scripts/bootstrap makes .venv)" % name)
    return path


def run(argv, cwd, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    clean.update(env)
    res = subprocess.run(argv, cwd=cwd, env=clean, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, "%s\n%s%s" % (" ".join(argv), res.stdout, res.stderr)
    return res.stdout


def load_yaml(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return yaml.safe_load(f)


def git_files(*dirs):
    out = subprocess.run(["git", "ls-files", "--"] + list(dirs), cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return {f for f in out if os.path.isfile(os.path.join(ROOT, f)) and "__pycache__" not in f}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("artifact")
    run([tool("ansible-galaxy"), "collection", "build", "--output-path", str(out)], cwd=ROOT)
    (path,) = glob.glob(str(out / "gpuserve-sglang-*.tar.gz"))
    with tarfile.open(path) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    return path, names


def test_the_artifact_holds_every_plugin_role_and_playbook(artifact):
    names = artifact[1]
    missing = git_files("plugins", "roles", "playbooks", "meta") - names
    assert not missing, sorted(missing)
    for required in ("galaxy.yml", "LICENSE", "README.md", "CHANGELOG.rst", "changelogs/changelog.yaml",
                     "bindep.txt", "meta/execution-environment.yml", "meta/ee-requirements.txt", "MANIFEST.json"):
        if required == "galaxy.yml":
            continue  # the build turns it into MANIFEST.json
        assert required in names, required


def test_the_artifact_holds_nothing_of_the_lab(artifact):
    names = artifact[1]
    lab_only = [n for n in names
                if n.split("/")[0] in ("lab", "molecule", "realgpu", "results", "scripts", "collections", ".ci")
                or n.startswith(("docs/research/", "inventory/lab/", "tests/lab/",
                                 "tests/unit/lab/", "tests/unit/docs/",
                                 "tests/fixtures/sglang-0.5.23-h200/"))]
    assert lab_only == []


TEST_IMPORT = re.compile(r"^\s*(?:from|import)\s+ansible_collections\.gpuserve\.sglang\.tests\.([\w.]+)", re.M)


def test_the_artifact_s_tests_import_only_what_it_holds(artifact):
    # ansible-test units runs the shipped tests from the installed artifact: a helper they import that the build
    # leaves out (tests/support was build-ignored while tests/unit/plugins imported it) fails their collection there
    names = artifact[1]
    missing = {}
    for rel in sorted(n for n in names if n.startswith("tests/") and n.endswith(".py")):
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            for dotted in TEST_IMPORT.findall(f.read()):
                path = "tests/" + dotted.replace(".", "/")
                if path + ".py" not in names and path + "/__init__.py" not in names:
                    missing.setdefault(rel, []).append(path + ".py")
    assert not missing, "shipped tests import files the artifact lacks (galaxy.yml build_ignore): %s" % missing


def test_the_artifact_installs_and_works_from_outside_the_repository(artifact, tmp_path):
    path = artifact[0]
    cpath = tmp_path / "collections"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run([tool("ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(cpath), path], cwd=str(elsewhere))
    env = {"ANSIBLE_COLLECTIONS_PATH": str(cpath)}
    modules = sorted(os.path.basename(m)[:-3] for m in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
    # one ansible-doc per plugin type (it documents every name given, each under its own heading) and one syntax
    # check for all playbooks: each start of ansible-core costs about a second of CPU
    out = run([tool("ansible-doc")] + ["gpuserve.sglang." + m for m in modules], cwd=str(elsewhere),
              ANSIBLE_NOCOLOR="1", **env)
    for m, doc in docs_by_name(out, modules, "MODULE").items():
        assert str(cpath) in doc and "EXAMPLES" in doc, m  # the installed copy, not the checkout
    roles = role_readmes.roles()
    out = run([tool("ansible-doc"), "-t", "role"] + ["gpuserve.sglang." + r for r in roles], cwd=str(elsewhere),
              ANSIBLE_NOCOLOR="1", **env)
    for role, doc in docs_by_name(out, roles, "ROLE").items():
        assert str(cpath) in doc and "ENTRY POINT: *main*" in doc, role
    playbooks = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(ROOT, "playbooks", "*.yml")))
    run([tool("ansible-playbook"), "--syntax-check"] + ["gpuserve.sglang." + pb for pb in playbooks],
        cwd=str(elsewhere), **env)


def docs_by_name(out, names, kind):
    """{name: its part of one ansible-doc output for several names}; every name must have its heading, once (in
    any order: ansible-doc sorts roles its own way)."""
    heading = re.compile(r"^> %s:? \*?gpuserve\.sglang\.(\w+)" % kind, re.M)
    starts = [(m.group(1), m.start()) for m in heading.finditer(out)]
    assert sorted(n for n, _ in starts) == sorted(names), (kind, [n for n, _ in starts], out[:2000])
    ends = [at for _, at in starts[1:]] + [len(out)]
    return {name: out[at:end] for (name, at), end in zip(starts, ends)}


def fqcn_collections():
    used = set()
    for rel in git_files("roles", "playbooks", "plugins"):
        if rel.endswith((".yml", ".yaml", ".py", ".j2")):
            with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                used |= {m for m in FQCN.findall(f.read()) if m.split(".")[0] in ("community", "ansible")}
    # ansible-core's own packages; ansible.utils is its (Display), not the collection of that name
    return used - {"ansible.builtin", "ansible.module_utils", "ansible.plugins", "ansible.errors", "ansible.cli",
                   "ansible.utils"}


def test_declared_collection_dependencies_are_exactly_the_ones_used():
    galaxy = load_yaml("galaxy.yml")["dependencies"]
    assert set(galaxy) == fqcn_collections()
    reqs = {c["name"]: c["version"] for c in load_yaml("requirements.yml")["collections"]}
    assert reqs == galaxy


def test_the_pinned_ansible_package_bundles_a_matching_community_proxmox():
    from ansible.module_utils.compat.version import LooseVersion  # pylint: disable=import-outside-toplevel
    bundled = pytest.importorskip("ansible_collections.community.proxmox")
    with open(os.path.join(list(bundled.__path__)[0], "MANIFEST.json"), encoding="utf-8") as f:
        version = LooseVersion(yaml.safe_load(f)["collection_info"]["version"])
    for bound in load_yaml("galaxy.yml")["dependencies"]["community.proxmox"].split(","):
        op, ver = re.match(r"([<>=]+)(.*)", bound.strip()).groups()
        assert {">=": version >= LooseVersion(ver), "<": version < LooseVersion(ver)}[op], (bound, str(version))


def pins(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return dict(line.split("#")[0].strip().split("==") for line in f if line.split("#")[0].strip())


@pytest.mark.parametrize("path", ["meta/ee-requirements.txt", "tests/unit/requirements.txt"])
def test_other_python_requirements_agree_with_requirements_txt(path):
    other, repo = pins(path), pins("requirements.txt")
    assert other and all(repo.get(name) == version for name, version in other.items()), (other, repo)


def test_role_readmes_are_generated_from_the_current_argument_specs():
    assert role_readmes.main(["--check"]) == 0, "run: python scripts/role_readmes.py"


def test_the_readme_generator_renders_markup_defaults_and_entry_points():
    out = role_readmes.render("sglang_server")
    assert "## Entry point `restart`" in out and "tasks_from: restart" in out
    assert "| `sglang_server_force_restart` | bool | `false` | `main`, `audit` |" in out
    assert "O(" not in out and "C(" not in out


def test_each_option_is_listed_once_in_one_table():
    """An option four entry points take was listed four times (52 KB); now once, with the entry points that take it."""
    out = role_readmes.render("sglang_server")
    rows = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| `")]
    assert len(rows) == len(set(rows)) and "| `sglang_server_gate_timeout`" in rows
    assert out.count("## Options") == 1 and "Options (see [Options](#options)): every one." in out
