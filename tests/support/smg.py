"""A SIMULATED SMG gateway (SMG 1.13.0's worker API semantics, docs/research/smg-1.13.0.md) and its addresses and admin
key; shared by the tests of _smg and of smg_worker. The fake is checked against the real smg by
tests/lab/test_gateway.py."""
import json
import urllib.error

URL = 'http://10.66.0.101:30000'
GW = 'http://10.66.0.1:30080'
KEY = 'cp-admin-secret'


class FakeSmg(object):
    """SIMULATED gateway. Every request is one tick: pending registrations count their probes down, draining
    workers their settle time, and in-flight loads fall by `drain_rate` per tick."""

    def __init__(self, key=None, probes=2, settle=4, drain_rate=1):
        self.key, self.probes, self.settle, self.drain_rate = key, probes, settle, drain_rate
        self.workers, self.pending, self.calls, self.next_id = {}, {}, [], 1
        self.raw = []  # every request as sent: (method, url, headers, body, timeout)
        self.down = False
        self.worker_load, self.worker_answer = {}, None  # the worker's own in-flight counts per URL, or a fixed answer

    def add_worker(self, url, **fields):
        wid = 'w%d' % self.next_id
        self.next_id += 1
        worker = dict(id=wid, url=url, model_id='sim/Qwen-sim', status='ready', is_healthy=True, load=0,
                      priority=50, labels={'version': '0.5.23'}, health={'drain_settle_secs': 5})
        worker.update(fields)
        self.workers[wid] = worker
        return worker

    def tick(self):
        for wid, left in list(self.pending.items()):
            if left[1] is not None:
                left[1] -= 1
                if left[1] <= 0:
                    spec = self.pending.pop(wid)[0]
                    self.workers[wid] = dict(id=wid, url=spec['url'], model_id='sim/Qwen-sim', status='ready',
                                             is_healthy=True, load=0, priority=spec.get('priority', 50),
                                             labels=dict({'version': '0.5.23'}, **spec.get('labels', {})),
                                             health=dict({'drain_settle_secs': 5}, **spec.get('health', {})))
        for wid, w in list(self.workers.items()):
            if w['status'] == 'draining':
                w['load'] = max(0, w['load'] - self.drain_rate)
                w['settle'] -= 1
                if w['settle'] <= 0:
                    del self.workers[wid]

    def send(self, method, url, headers, body, timeout):
        self.raw.append((method, url, dict(headers), body, timeout))
        if url.endswith('/v1/loads'):
            return self.loads(url[:-len('/v1/loads')], headers)
        assert url.startswith(GW + '/workers'), url
        if self.down:
            raise OSError('[Errno 111] Connection refused')
        self.calls.append((method, url[len(GW):], json.loads(body) if body else None, headers.get('Authorization')))
        self.tick()
        if self.key and headers.get('Authorization') != 'Bearer ' + self.key:
            return 401, '{"error":{"code":"UNAUTHORIZED","message":"Missing or invalid Authorization header"}}'
        path = url[len(GW):]
        if method == 'GET' and path == '/workers':
            return 200, json.dumps({'workers': list(self.workers.values()), 'total': len(self.workers)})
        wid = path.split('/')[2] if path.count('/') == 2 else None
        if method == 'GET':
            if wid in self.workers:
                return 200, json.dumps(self.workers[wid])
            if wid in self.pending:
                return 200, json.dumps(dict(id=wid, url=self.pending[wid][0]['url'], status='pending',
                                            job_status={'message': 'Could not detect HTTP backend'}))
            return 404, '{"error":{"code":"WORKER_NOT_FOUND","message":"Worker not found"}}'
        if method == 'POST':
            spec = json.loads(body)
            for w in self.workers.values():
                if w['url'] == spec['url']:
                    return 409, json.dumps({'error': {'code': 'WORKER_ALREADY_EXISTS',
                                                      'message': 'Worker %s already exists' % w['id']}})
            if any(p[0]['url'] == spec['url'] for p in self.pending.values()):
                return 409, '{"error":{"code":"WORKER_CREATE_IN_PROGRESS","message":"in progress"}}'
            wid = 'w%d' % self.next_id
            self.next_id += 1
            self.pending[wid] = [spec, self.probes]
            return 202, json.dumps({'status': 'accepted', 'worker_id': wid, 'location': '/workers/' + wid})
        if method == 'PATCH':
            w, patch = self.workers[wid], json.loads(body)
            w['labels'].update(patch.get('labels', {}))
            w['health'].update(patch.get('health', {}))
            if 'priority' in patch:
                w['priority'] = patch['priority']
            return 202, '{"status":"accepted"}'
        if method == 'DELETE':
            w = self.workers.get(wid)
            if w is None:
                return 404, '{"error":{"code":"WORKER_NOT_FOUND"}}'
            w.update(status='draining', is_healthy=False, settle=self.settle)
            return 202, '{"status":"accepted"}'
        raise AssertionError((method, path))

    def loads(self, url, headers):
        """The SIMULATED worker's GET /v1/loads: its count falls by one per look; None = its server is stopped."""
        self.calls.append(('GET', url + '/v1/loads', None, headers.get('Authorization')))
        if self.worker_answer is not None:
            return self.worker_answer
        count = self.worker_load.get(url)
        if count is None:
            raise urllib.error.URLError(ConnectionRefusedError(111, 'Connection refused'))
        self.worker_load[url] = max(0, count - 1)
        return 200, json.dumps({'version': '0.5.23', 'loads': [
            {'dp_rank': 0, 'num_running_reqs': count, 'num_waiting_reqs': 0},
            {'dp_rank': 1, 'num_running_reqs': 0, 'num_waiting_reqs': 0}]})

    def changing(self):
        return [(m, p) for m, p, body, auth in self.calls if m != 'GET']
