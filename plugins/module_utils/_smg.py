# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A worker's registration at SGLang's gateway (SMG, Shepherd Model Gateway), through its worker REST API.

Private to this collection; the smg_worker module's logic. Facts it relies on, checked against smg 1.13.0
(docs/research/smg-1.13.0.md):

- `GET /workers` lists registered workers (ready, not_ready, draining), never pending registrations; worker ids are
  new UUIDs on every POST, so a worker is found by its URL.
- `POST /workers` answers 202 with `worker_id` (the registration runs in the background: the worker shows up once the
  gateway has probed it), 409 WORKER_ALREADY_EXISTS or WORKER_CREATE_IN_PROGRESS.
- `PATCH /workers/{id}` merges labels and sets priority and health fields (202).
- `DELETE /workers/{id}` makes the worker `draining` at once (no new requests) and removes it `drain_settle_secs`
  later whatever is still in flight: the gateway's `load` (its own in-flight count for that worker) is what tells
  that the worker has drained, and 404 that it is gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time

HEALTH_KEYS = ('timeout_secs', 'check_interval_secs', 'success_threshold', 'failure_threshold',
               'disable_health_check', 'drain_settle_secs')


class SmgError(Exception):
    """A refusal or failure, worded for the user; `worker` is the gateway's last view of the worker, if any."""

    def __init__(self, message, worker=None):
        super(SmgError, self).__init__(message)
        self.message = message
        self.worker = worker


def normalize_url(url):
    """A worker URL as the gateway compares it: no trailing slash."""
    return str(url).strip().rstrip('/')


def public(worker):
    """The worker as returned to the user: what identifies it and its state (never a key)."""
    if worker is None:
        return None
    keys = ('id', 'url', 'model_id', 'status', 'is_healthy', 'load', 'priority', 'labels', 'health')
    return dict((k, worker[k]) for k in keys if k in worker)


class Gateway(object):
    """The worker API of one gateway. `send(method, url, headers, body, timeout)` returns (status, text); it raises
    only when the gateway did not answer (OSError and the like)."""

    def __init__(self, base_url, send, api_key=None, timeout=10.0):
        self.base_url = normalize_url(base_url)
        self.send = send
        self.api_key = api_key
        self.timeout = timeout

    def call(self, method, path, body=None, ok=(200,)):
        headers = {'Accept': 'application/json'}
        if body is not None:
            headers['Content-Type'] = 'application/json'
        if self.api_key:
            headers['Authorization'] = 'Bearer ' + self.api_key
        url = self.base_url + path
        try:
            status, text = self.send(method, url, headers, None if body is None else json.dumps(body), self.timeout)
        except Exception as exc:  # noqa: BLE001 - any transport failure means the gateway did not answer
            raise SmgError('the gateway at {0} did not answer {1} {2}: {3}'.format(self.base_url, method, path, exc))
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            data = None
        if status not in ok:
            raise SmgError('the gateway at {0} answered {1} {2} with HTTP {3}: {4}{5}'.format(
                self.base_url, method, path, status, error_text(data, text), auth_hint(status)))
        return status, data

    def workers(self):
        data = self.call('GET', '/workers')[1]
        if not isinstance(data, dict) or not isinstance(data.get('workers'), list):
            raise SmgError('the gateway at {0} answered GET /workers without a "workers" list: is it SMG '
                           '(smg launch)?'.format(self.base_url))
        return data['workers']

    def find(self, url):
        """The registered worker with this URL, or None."""
        url = normalize_url(url)
        found = [w for w in self.workers() if normalize_url(w.get('url')) == url]
        if len(found) > 1:
            raise SmgError('the gateway at {0} lists {1} workers with URL {2} (ids {3}): remove the extra ones '
                           '(DELETE /workers/ID)'.format(self.base_url, len(found), url,
                                                         ', '.join(str(w.get('id')) for w in found)))
        return found[0] if found else None

    def get(self, worker_id):
        """The worker with this id, None once it is gone (404)."""
        status, data = self.call('GET', '/workers/' + str(worker_id), ok=(200, 404))
        return data if status == 200 else None

    def add(self, spec):
        """POST /workers; the new worker's id, or None when a registration of this URL is already under way."""
        status, data = self.call('POST', '/workers', spec, ok=(200, 201, 202, 409))
        if status == 409:
            code = error_code(data)
            if code == 'WORKER_CREATE_IN_PROGRESS':
                return None
            raise SmgError('the gateway at {0} refused to add {1}: {2}'.format(
                self.base_url, spec['url'],
                error_text(data, 'HTTP 409 (WORKER_ALREADY_EXISTS or another conflict)')))
        worker_id = (data or {}).get('worker_id')
        if not worker_id:
            raise SmgError('the gateway at {0} accepted {1} but named no worker_id: {2}'.format(
                self.base_url, spec['url'], data))
        return worker_id

    def patch(self, worker_id, fields):
        self.call('PATCH', '/workers/' + str(worker_id), fields, ok=(200, 202))

    def delete(self, worker_id):
        self.call('DELETE', '/workers/' + str(worker_id), ok=(200, 202, 404))


def error_code(data):
    if isinstance(data, dict):
        err = data.get('error')
        if isinstance(err, dict):
            return err.get('code')
        return data.get('code')
    return None


def error_text(data, text):
    if isinstance(data, dict):
        err = data.get('error')
        if isinstance(err, dict):
            return '{0}: {1}'.format(err.get('code', ''), err.get('message', '')).strip(': ')
        for key in ('message', 'detail', 'error'):
            if data.get(key):
                return str(data[key])
    return (text or '').strip()[:300] or '(no body)'


def auth_hint(status):
    if status == 401:
        return ' (set api_key to an admin control-plane key of the gateway: --control-plane-api-keys)'
    if status == 403:
        return ' (the key has the user role; adding and removing workers needs an admin key)'
    return ''


def spec_of(params):
    """The POST /workers body for the module's parameters."""
    spec = {'url': normalize_url(params['url'])}
    if params.get('labels'):
        spec['labels'] = dict((k, str(v)) for k, v in params['labels'].items())
    if params.get('priority') is not None:
        spec['priority'] = params['priority']
    health = dict((k, v) for k, v in (params.get('health') or {}).items() if v is not None)
    if health:
        spec['health'] = health
    if params.get('worker_api_key'):
        spec['api_key'] = params['worker_api_key']
    return spec


def changes(worker, spec):
    """The PATCH body that brings a registered worker to the spec (labels merged, as the gateway does); {} if none."""
    patch = {}
    labels = worker.get('labels') or {}
    wanted = dict((k, v) for k, v in (spec.get('labels') or {}).items() if labels.get(k) != v)
    if wanted:
        patch['labels'] = wanted
    if 'priority' in spec and worker.get('priority') != spec['priority']:
        patch['priority'] = spec['priority']
    health = worker.get('health') or {}
    wanted = dict((k, v) for k, v in (spec.get('health') or {}).items() if health.get(k) != v)
    if wanted:
        patch['health'] = wanted
    return patch


class Waiter(object):
    """Polls until a condition holds or a deadline passes (clock and sleep injectable for tests)."""

    def __init__(self, interval, clock=time.monotonic, sleep=time.sleep):
        self.interval = interval
        self.clock = clock
        self.sleep = sleep

    def until(self, probe, timeout):
        """probe() -> (done, value); returns (True, value, seconds) or (False, last value, seconds)."""
        start = self.clock()
        while True:
            done, value = probe()
            elapsed = self.clock() - start
            if done or elapsed >= timeout:
                return done, value, elapsed
            self.sleep(min(self.interval, max(timeout - elapsed, 0)))


def ready(worker):
    return worker is not None and worker.get('status') == 'ready' and worker.get('is_healthy') is True


def register(gw, params, check_mode, waiter):
    """state=present: add the worker or bring its labels, priority and health settings to what is wanted, then
    (wait) until the gateway reports it ready and healthy."""
    spec = spec_of(params)
    url = spec['url']
    result = {'changed': False, 'action': 'none'}
    worker = gw.find(url)
    if worker is not None and worker.get('status') == 'draining':
        # Being removed (an earlier run's DELETE): it cannot be re-added before the gateway has dropped it.
        if check_mode:
            result.update(changed=True, action='added', worker=public(worker))
            return result
        gone, worker, secs = waiter.until(lambda: (gw.get(worker['id']) is None, None),
                                          params['wait_timeout'])
        if not gone:
            raise SmgError('{0} is still draining at the gateway after {1:.0f} s (an earlier removal); it can be added '
                           'again once the gateway has dropped it (its drain_settle_secs)'.format(url, secs))
        worker = None
    if worker is None:
        result.update(changed=True, action='added')
        if check_mode:
            return result
        worker_id = gw.add(spec)
        if worker_id is None:
            # An earlier POST of this URL is still being probed: the gateway finishes it.
            def probe():
                found = gw.find(url)
                return found is not None, found
        else:
            def probe():
                found = gw.get(worker_id)
                return found is not None, found

        if not params['wait']:
            result['worker'] = public(gw.get(worker_id)) if worker_id else None
            return result
    else:
        patch = changes(worker, spec)
        if patch:
            result.update(changed=True, action='updated', patch_keys=sorted(patch))
            if check_mode:
                result['worker'] = public(worker)
                return result
            gw.patch(worker['id'], patch)
        worker_id = worker['id']

        def probe():
            found = gw.get(worker_id)
            return found is not None, found

        if not params['wait']:
            result['worker'] = public(gw.get(worker_id))
            return result

    def healthy():
        done, found = probe()
        return done and ready(found), found
    ok, worker, secs = waiter.until(healthy, params['wait_timeout'])
    result['worker'] = public(worker)
    if not ok:
        state = 'not registered yet (the gateway is still probing it: is its /health answering 200?)' \
            if worker is None or worker.get('status') == 'pending' else \
            'status {0}, is_healthy {1}'.format(worker.get('status'), worker.get('is_healthy'))
        job = (worker or {}).get('job_status') or {}
        raise SmgError('{0} did not become ready at the gateway within {1:.0f} s: {2}{3}'.format(
            url, secs, state, '; the gateway says: {0}'.format(job['message']) if job.get('message') else ''),
            public(worker))
    result['ready_after_s'] = round(secs, 2)
    return result


def refused(exc):
    """True when nothing listens at the address (the server is stopped): no request can be in flight there."""
    for err in (exc, getattr(exc, 'reason', None)):
        if isinstance(err, ConnectionRefusedError):
            return True
    return False


def worker_in_flight(send, url, api_key=None, timeout=10.0):
    """The requests running or waiting on the worker itself, from its GET /v1/loads (SGLang 0.5.23's load snapshot,
    summed over its dp ranks); 0 when nothing listens there. It counts requests sent past the gateway too, and the
    ones still streaming after the gateway dropped the worker."""
    headers = {'Accept': 'application/json'}
    if api_key:
        headers['Authorization'] = 'Bearer ' + api_key
    where = normalize_url(url) + '/v1/loads'
    try:
        status, text = send('GET', where, headers, None, timeout)
    except Exception as exc:  # noqa: BLE001 - see refused()
        if refused(exc):
            return 0
        raise SmgError('could not read {0}: {1}'.format(where, exc))
    try:
        loads = json.loads(text)['loads']
        return sum(int(x.get('num_running_reqs', 0)) + int(x.get('num_waiting_reqs', 0)) for x in loads)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SmgError('{0} answered HTTP {1} without a load snapshot (SGLang >= 0.5.23 serves it): {2}; set '
                       'worker_loads to false to rely on the gateway\'s count alone'.format(
                           where, status, (text or '').strip()[:200] or '(no body)'))


def refuse_to_empty(gw, url, keep):
    """Refuse to take url out when fewer than keep other workers of the gateway are ready and healthy: a
    rollout must not leave the gateway with nothing to route to."""
    if keep <= 0:
        return
    others = [w for w in gw.workers() if normalize_url(w.get('url') or '') != url]
    serving = [w.get('url') for w in others if ready(w)]
    if len(serving) < keep:
        raise SmgError('not taking {0} out of the gateway: {1} other worker(s) are ready and healthy ({2}), '
                       'keep_healthy asks for {3}; nothing was changed. Bring another replica up (or wait until '
                       'the gateway reports it healthy), or lower keep_healthy'.format(
                           url, len(serving), ', '.join(sorted(serving)) or 'none', keep))


def deregister(gw, params, check_mode, waiter):
    """state=absent: take the worker out of routing (DELETE: draining), wait until nothing is in flight to it (the
    gateway's `load` while it still lists the worker, and with worker_loads the worker's own count), bounded by
    drain_timeout, then (wait) until the gateway has dropped it."""
    url = normalize_url(params['url'])
    result = {'changed': False, 'action': 'none'}
    worker = gw.find(url)
    if worker is None:
        return result
    result['worker'] = public(worker)
    if worker.get('status') != 'draining':
        refuse_to_empty(gw, url, params['keep_healthy'])
        result.update(changed=True, action='removed')
        if check_mode:
            return result
        gw.delete(worker['id'])
    elif check_mode:
        return result
    worker_id = worker['id']
    if params['drain_timeout'] > 0:
        seen = {'gateway': worker.get('load') or 0, 'worker': None}

        def idle():
            found = gw.get(worker_id)
            if found is not None:
                seen['gateway'] = found.get('load') or 0
            elif not params['worker_loads'] and seen['gateway']:
                # Dropped after its drain_settle_secs with requests in flight at the last look: only the
                # worker's own count could tell whether they finished.
                raise SmgError('the gateway dropped {0} (its drain_settle_secs passed) with {1} request(s) in flight '
                               'at the last look; set health.drain_settle_secs above the longest request, or '
                               'worker_loads to true'.format(url, seen['gateway']), public(worker))
            gateway_busy = found is not None and seen['gateway'] > 0
            if params['worker_loads']:
                seen['worker'] = worker_in_flight(gw.send, url, params.get('worker_api_key'), gw.timeout)
            return not gateway_busy and not seen['worker'], found
        drained, found, secs = waiter.until(idle, params['drain_timeout'])
        if not drained:
            counts = []
            if found is not None and seen['gateway']:
                counts.append('{0} through the gateway'.format(seen['gateway']))
            if seen['worker']:
                counts.append('{0} on the server itself'.format(seen['worker']))
            raise SmgError('{0} still has requests in flight after {1:.0f} s (drain_timeout): {2}; the gateway sends '
                           'it no new requests (draining) and drops it after its drain_settle_secs'.format(
                               url, secs, ', '.join(counts)), public(found) or result['worker'])
        result['drained_after_s'] = round(secs, 2)
    if params['wait']:
        outcome = waiter.until(lambda: (gw.get(worker_id) is None, None), params['wait_timeout'])
        secs = outcome[2]
        if not outcome[0]:  # (dropped, value, seconds)
            raise SmgError('{0} is drained but the gateway still lists it after {1:.0f} s: its drain_settle_secs '
                           'is longer than wait_timeout'.format(url, secs), result['worker'])
    return result


def run(gw, params, check_mode, waiter):
    if params['state'] == 'present':
        return register(gw, params, check_mode, waiter)
    return deregister(gw, params, check_mode, waiter)
