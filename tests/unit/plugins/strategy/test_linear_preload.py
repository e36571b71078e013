"""gpuserve.sglang.linear_preload: linear, plus the pct_remote connection loaded in the controller before forks."""
import pytest

from ansible.plugins.strategy.linear import StrategyModule as Linear

from ansible_collections.gpuserve.sglang.plugins.strategy import linear_preload


@pytest.fixture
def loads(monkeypatch):
    calls = []
    monkeypatch.setattr(Linear, '__init__', lambda self, tqm: calls.append(('linear', tqm)))

    def get(name, class_only=False):
        calls.append(('get', name, class_only))
        return object

    monkeypatch.setattr(linear_preload.connection_loader, 'get', get)
    return calls


def test_it_is_linear_and_loads_the_connection_class_after_linear_is_set_up(loads):
    strategy = linear_preload.StrategyModule('tqm')
    assert isinstance(strategy, Linear)
    assert loads == [('linear', 'tqm'), ('get', 'gpuserve.sglang.pct_remote', True)]


def test_a_connection_that_cannot_load_does_not_stop_the_play(loads, monkeypatch):
    def broken(name, class_only=False):
        loads.append(('get', name))
        raise ImportError('No module named paramiko')

    monkeypatch.setattr(linear_preload.connection_loader, 'get', broken)
    linear_preload.StrategyModule('tqm')
    assert loads == [('linear', 'tqm'), ('get', 'gpuserve.sglang.pct_remote')]
