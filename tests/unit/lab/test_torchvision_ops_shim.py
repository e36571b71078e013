"""lab/torchvision_ops: the lab-only shim that lets PyPI's CUDA torchvision import beside the CPU torch.

The shim's logic runs here against a stand-in `torch` module (no torch on the controller); the lab test
tests/lab/test_benchmark.py runs it for real in the container, under the real bench client.
"""
import base64
import csv
import hashlib
import importlib
import io
import os
import subprocess
import sys
import types
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHIM_DIR = os.path.join(ROOT, "lab", "torchvision_ops")


@pytest.fixture
def shim(monkeypatch):
    monkeypatch.syspath_prepend(SHIM_DIR)
    sys.modules.pop("gpuserve_lab_torchvision_ops", None)
    meta_path = list(sys.meta_path)
    module = importlib.import_module("gpuserve_lab_torchvision_ops")
    yield module
    sys.meta_path[:] = meta_path
    sys.modules.pop("gpuserve_lab_torchvision_ops", None)


def fake_torch(monkeypatch, cuda=None, existing=()):
    """A stand-in for the few torch attributes the shim touches; records what gets defined."""
    defined = []

    class Library:
        def __init__(self, ns, kind):
            assert (ns, kind) == ("torchvision", "FRAGMENT")

        def define(self, schema):
            defined.append(schema)

    class Namespace:
        def __getattr__(self, name):
            if name in existing or any(s.startswith(name + "(") for s in defined):
                return object()
            raise AttributeError("'_OpNamespace' 'torchvision' object has no attribute '%s'" % name)

    torch = types.ModuleType("torch")
    torch.version = types.SimpleNamespace(cuda=cuda)
    torch.ops = types.SimpleNamespace(torchvision=Namespace())
    torch.library = types.SimpleNamespace(Library=Library)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return defined


def test_cpu_torch_gets_both_schemas_once(shim, monkeypatch):
    defined = fake_torch(monkeypatch)
    assert shim.define_missing_ops() == ["nms", "qnms"]
    assert defined == list(shim.SCHEMAS)
    assert shim.define_missing_ops() == []  # a second call finds them defined


def test_cuda_torch_is_left_alone(shim, monkeypatch):
    defined = fake_torch(monkeypatch, cuda="13.0")
    assert shim.define_missing_ops() == [] and defined == []


def test_ops_that_exist_are_not_redefined(shim, monkeypatch):
    defined = fake_torch(monkeypatch, existing=("nms",))
    assert shim.define_missing_ops() == ["qnms"] and len(defined) == 1


def test_finder_acts_on_torchvision_only_and_once(shim, monkeypatch):
    defined = fake_torch(monkeypatch)
    finders = [f for f in sys.meta_path if isinstance(f, shim._BeforeTorchvision)]
    assert len(finders) == 1
    shim.install()  # idempotent
    assert len([f for f in sys.meta_path if isinstance(f, shim._BeforeTorchvision)]) == 1
    assert finders[0].find_spec("torchvisionx") is None and defined == []
    assert finders[0].find_spec("torchvision") is None  # never finds the module itself
    assert len(defined) == 2
    assert not any(isinstance(f, shim._BeforeTorchvision) for f in sys.meta_path)


def build(tmp_path, name):
    out = tmp_path / name
    out.mkdir()
    path = subprocess.run([sys.executable, os.path.join(SHIM_DIR, "build_wheel.py"), str(out)], check=True,
                          capture_output=True, text=True).stdout.strip()
    return path


def test_wheel_is_reproducible_and_its_record_matches(tmp_path):
    first, second = build(tmp_path, "a"), build(tmp_path, "b")
    assert os.path.basename(first) == "gpuserve_lab_torchvision_ops-1.0.0-py3-none-any.whl"
    with open(first, "rb") as f1, open(second, "rb") as f2:
        assert f1.read() == f2.read()
    with zipfile.ZipFile(first) as whl:
        record = whl.read("gpuserve_lab_torchvision_ops-1.0.0.dist-info/RECORD").decode()
        rows = list(csv.reader(io.StringIO(record)))
        assert {r[0] for r in rows} == set(whl.namelist())
        for path, digest, size in rows:
            if path.endswith("RECORD"):
                continue
            data = whl.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == ("sha256=" + want, len(data))
        assert whl.read("gpuserve_lab_torchvision_ops.pth") == b"import gpuserve_lab_torchvision_ops\n"


def test_pip_installs_the_wheel_and_the_pth_loads_the_finder(tmp_path):
    whl = build(tmp_path, "w")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
                    "--target", str(target), whl], check=True)
    # a .pth is processed in site directories: make the target one and ask a fresh interpreter
    probe = ("import site, sys; site.addsitedir(%r); "
             "print([type(f).__name__ for f in sys.meta_path][0])" % str(target))
    out = subprocess.run([sys.executable, "-S", "-c", probe], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "_BeforeTorchvision"


def test_build_refuses_a_missing_directory(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(SHIM_DIR, "build_wheel.py"), str(tmp_path / "nope")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "usage" in r.stderr
