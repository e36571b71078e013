"""gpuserve.sglang.preload: the pct_remote connection loaded in the controller when callbacks load, before forks."""
import pytest

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpuserve.sglang.plugins.callback import preload


@pytest.fixture
def loads(monkeypatch):
    calls = []

    def get(name, class_only=False):
        calls.append(('get', name, class_only))
        return object

    monkeypatch.setattr(preload.connection_loader, 'get', get)
    return calls


def test_it_loads_the_connection_class_when_it_is_made_and_prints_nothing(loads):
    callback = preload.CallbackModule()
    assert isinstance(callback, CallbackBase) and callback.CALLBACK_NEEDS_ENABLED
    assert loads == [('get', 'gpuserve.sglang.pct_remote', True)]
    assert not [name for name in dir(callback) if name.startswith('v2_') and name in vars(preload.CallbackModule)]


def test_a_connection_that_cannot_load_does_not_stop_the_run(loads, monkeypatch):
    def broken(name, class_only=False):
        loads.append(('get', name))
        raise ImportError('No module named paramiko')

    monkeypatch.setattr(preload.connection_loader, 'get', broken)
    preload.CallbackModule()
    assert loads == [('get', 'gpuserve.sglang.pct_remote')]
