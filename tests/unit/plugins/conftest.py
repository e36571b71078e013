"""Fixtures shared by the plugin tests."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _runner


@pytest.fixture(autouse=True)
def scripted_commands(monkeypatch):
    """The plugin tests script every command's answer through their fake module's run_command: route the runner's
    spawn() there. spawn itself runs real commands in test_runner_spawn.py, which imports it before this applies."""
    monkeypatch.setattr(_runner, 'spawn', lambda module, argv, environ_update: module.run_command(
        argv, environ_update=environ_update))


@pytest.fixture
def fake_sglang():
    """Makes a package named sglang under DIR/site: {dotted module: source}, plus its __init__ source.
    Returns DIR/site, to put on PYTHONPATH. Stands in for an installed SGLang where only the layout matters."""

    def make(directory, modules, init=""):
        pkg = directory / "site" / "sglang"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(init)
        for name, source in modules.items():
            path = pkg.joinpath(*name.split(".")[1:]).with_suffix(".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.parent != pkg and not (path.parent / "__init__.py").exists():
                (path.parent / "__init__.py").write_text("")
            path.write_text(source)
        return str(directory / "site")

    return make
