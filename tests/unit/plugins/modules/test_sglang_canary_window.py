"""sglang_canary_window through its entry point: its arguments, open_url patched to two SIMULATED pages, the clock
and sleep patched so the window passes at once (the reading loop itself: test_sglang_metrics.py)."""
import io
import json
import urllib.error

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import sglang_canary_window as mod
from ansible_collections.gpuserve.sglang.tests.support.sglang_metrics import Server


@pytest.fixture
def servers(monkeypatch):
    served = Server()
    served.finish(n=2)
    seen = []

    def open_url(url, method=None, timeout=None, follow_redirects=None):
        assert method == 'GET' and follow_redirects == 'none' and timeout == 3.0
        seen.append(url)
        if url.startswith('http://b'):
            raise urllib.error.HTTPError(url, 404, 'Not Found', {}, io.BytesIO(b'{"detail":"Not Found"}'))

        class Res(object):
            def getcode(self):
                return 200

            def read(self):
                return served.text().encode()
        return Res()

    now = [1000.0]
    monkeypatch.setattr(mod, 'open_url', open_url)
    monkeypatch.setattr(mod.time, 'time', lambda: now[0])
    monkeypatch.setattr(mod.time, 'sleep', lambda s: now.__setitem__(0, now[0] + s))
    return seen


def run(capsys, **args):
    with patch_module_args(dict(dict(urls=['http://a:1', 'http://b:1'], window=4, interval=2, timeout=3), **args)), \
            pytest.raises(SystemExit) as exc:
        mod.main()
    return exc.value.code, json.loads(capsys.readouterr().out)


def test_every_url_is_read_at_each_reading_and_a_404_is_returned_not_failed(servers, capsys):
    code, out = run(capsys)
    assert code == 0 and out['changed'] is False
    assert [r['t'] for r in out['rounds']] == [1000.0, 1002.0, 1004.0]
    assert servers == ['http://a:1/metrics', 'http://b:1/metrics'] * 3
    page = out['rounds'][0]['pages']
    assert page['http://b:1'] == {'status': 404, 'text': '{"detail":"Not Found"}'}
    assert page['http://a:1']['status'] == 200 and 'sglang:num_requests_total' in page['http://a:1']['text']
    assert 'num_running_reqs' not in page['http://a:1']['text']


@pytest.mark.parametrize('args', [dict(window=0), dict(interval=0), dict(timeout=-1), dict(interval=9)])
def test_bounds_are_refused_naming_them(servers, capsys, args):
    code, out = run(capsys, **args)
    assert code == 1 and out['msg'].startswith('window, interval and timeout are seconds above 0, interval at most '
                                               'the window; got ')
