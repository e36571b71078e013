"""_python_script: a module_utils file run as a script by another Python, its source read through its loader."""
import subprocess
import sys
import types

from ansible_collections.gpuserve.sglang.plugins.module_utils import _fingerprint_probe, _python_script


def test_the_source_is_the_files_text():
    with open(_fingerprint_probe.__file__, encoding="utf-8") as handle:
        assert _python_script.source(_fingerprint_probe) == handle.read()


def test_a_loader_that_gives_bytes_gives_text():
    """Ansible's collection loader, as ansible-test's units run it, returns the source as bytes."""
    loader = types.SimpleNamespace(get_source=lambda name: ("# %s é\n" % name).encode("utf-8"))
    module = types.SimpleNamespace(__loader__=loader, __name__="m")
    assert _python_script.source(module) == "# m é\n"


def test_the_script_runs_isolated_with_its_arguments():
    argv = _python_script.script_argv(sys.executable, _fingerprint_probe, "a", "b")
    assert argv[:3] == [sys.executable, "-I", "-c"] and argv[3:] == [_python_script.source(_fingerprint_probe), "a", "b"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    assert out.startswith('{"python": ')
    assert _python_script.script_argv("/p", _fingerprint_probe, "a", isolated=False) == [
        "/p", "-c", _python_script.source(_fingerprint_probe), "a"]
