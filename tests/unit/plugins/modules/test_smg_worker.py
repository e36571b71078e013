"""smg_worker through its entry point: arguments, check mode, keys never in the output, open_url patched to the
SIMULATED gateway of tests/support/smg.py (the real smg is exercised by tests/lab/test_gateway.py)."""
import io
import json
import urllib.error

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuserve.sglang.plugins.modules import smg_worker

from ansible_collections.gpuserve.sglang.tests.support.smg import GW, KEY, URL, FakeSmg


@pytest.fixture
def gateway(monkeypatch):
    fake = FakeSmg(key=KEY, probes=1)

    def open_url(url, data=None, headers=None, method=None, timeout=None, validate_certs=True,
                 follow_redirects=None):
        assert follow_redirects == 'none' and validate_certs is False and timeout == 7.0
        status, text = fake.send(method, url, headers, data, timeout)
        if status >= 400:
            raise urllib.error.HTTPError(url, status, 'error', {}, io.BytesIO(text.encode()))

        class Res(object):
            def getcode(self):
                return status

            def read(self):
                return text.encode()
        return Res()
    monkeypatch.setattr(smg_worker, 'open_url', open_url)
    return fake


def run_module(capsys, **args):
    base = dict(gateway_url=GW, url=URL, api_key=KEY, timeout=7, validate_certs=False, poll_interval=0.01)
    base.update(args)
    with patch_module_args(base), pytest.raises(SystemExit) as exc:
        smg_worker.main()
    out = capsys.readouterr().out
    assert KEY not in out and 'wk-secret' not in out
    return exc.value.code, json.loads(out)


def test_register_rerun_and_remove(gateway, capsys):
    code, out = run_module(capsys, labels={'replica': 'ct101'}, health={'drain_settle_secs': 2},
                           worker_api_key='wk-secret')
    assert code == 0 and out['changed'] is True and out['action'] == 'added'
    assert out['worker']['status'] == 'ready' and out['worker']['health']['drain_settle_secs'] == 2
    assert gateway.calls[1][2]['api_key'] == 'wk-secret'
    code, out = run_module(capsys, labels={'replica': 'ct101'}, health={'drain_settle_secs': 2})
    assert code == 0 and out['changed'] is False and out['action'] == 'none'
    code, out = run_module(capsys, state='absent', worker_loads=False, _ansible_check_mode=True)
    assert code == 0 and out['changed'] is True and [m for m, path in gateway.changing()] == ['POST']
    code, out = run_module(capsys, state='absent', worker_loads=False)
    assert code == 0 and out['action'] == 'removed' and gateway.workers == {}


def test_an_http_error_is_reported_with_the_gateway_s_words(gateway, capsys):
    code, out = run_module(capsys, api_key='wrong')
    assert code == 1 and out['failed'] is True
    assert out['msg'] == ('the gateway at {0} answered GET /workers with HTTP 401: UNAUTHORIZED: Missing or invalid '
                          'Authorization header (set api_key to an admin control-plane key of the gateway: '
                          '--control-plane-api-keys)'.format(GW))


@pytest.mark.parametrize('args,msg', [
    (dict(timeout=0), 'timeout must be above 0 (drain_timeout and wait_timeout may be 0), got 0.0'),
    (dict(poll_interval=0), 'poll_interval must be above 0 (drain_timeout and wait_timeout may be 0), got 0.0'),
    (dict(drain_timeout=-1), 'drain_timeout must be above 0 (drain_timeout and wait_timeout may be 0), got -1.0'),
    (dict(keep_healthy=-1), 'keep_healthy is a count of other healthy workers, 0 or more, got -1'),
    (dict(url='10.0.0.1:30000'), "gateway_url and url are http:// or https:// URLs, got '{0}' and "
                                 "'10.0.0.1:30000'".format(GW)),
    (dict(gateway_url='gw:1'), "gateway_url and url are http:// or https:// URLs, got 'gw:1' and '{0}'".format(URL)),
])
def test_bad_arguments_are_refused_before_any_request(gateway, capsys, args, msg):
    code, out = run_module(capsys, **args)
    assert code == 1 and out['msg'] == msg and gateway.calls == []


def test_zero_timeouts_are_allowed_for_drain_and_wait(gateway, capsys):
    code, out = run_module(capsys, state='absent', drain_timeout=0, wait_timeout=0)
    assert code == 0 and out['action'] == 'none'
