"""gpuserve.sglang.preload: the collection's connection, action and filter plugins loaded in the controller when
callbacks load, before any worker forks."""
import pytest

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpuserve.sglang.plugins.callback import preload


class Warm:
    warmed = 0

    @classmethod
    def preload(cls):
        cls.warmed += 1


@pytest.fixture
def loads(monkeypatch):
    calls = []
    for loader in {loader for loader, _name in preload.PRELOAD}:
        def get(name, class_only=False, _loader=loader):
            calls.append((_loader.type, name, class_only))
            return Warm if name == 'gpuserve.sglang.setting_types' else object
        monkeypatch.setattr(loader, 'get', get)
    Warm.warmed = 0
    return calls


def test_it_loads_each_plugin_when_it_is_made_and_prints_nothing(loads):
    callback = preload.CallbackModule()
    assert isinstance(callback, CallbackBase) and callback.CALLBACK_NEEDS_ENABLED
    assert loads == [('connection', 'gpuserve.sglang.pct_remote', True), ('action', 'gpuserve.sglang.lifecycle_lock', True),
                     ('action', 'gpuserve.sglang.result_line', True), ('action', 'gpuserve.sglang.setting_types', True),
                     ('filter', 'gpuserve.sglang.sglang_state', True)]
    assert Warm.warmed == 1  # the plugin that has more to warm up, once
    assert not [name for name in dir(callback) if name.startswith('v2_') and name in vars(preload.CallbackModule)]


def test_a_plugin_that_cannot_load_does_not_stop_the_run_or_the_others(loads, monkeypatch):
    def broken(name, class_only=False):
        loads.append(('connection', name))
        raise ImportError('No module named paramiko')

    monkeypatch.setattr(preload.connection_loader, 'get', broken)
    preload.CallbackModule()
    assert [call[1] for call in loads] == [name for _loader, name in preload.PRELOAD]
