# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two ways to read and change an LXC container's config: the PVE API (proxmoxer) and `pct` on the node.

Private to this collection. Both answer the same four calls (config, update, status, reboot) and raise PveFailure
with PVE's own message, so the module reports what Proxmox said. Locks (a backup, a snapshot, another task holding
the config) are retried a bounded number of times; tasks are waited for with a deadline and fail on TASK ERROR
at once, never after a silent timeout.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
import traceback

try:
    from proxmoxer import ProxmoxAPI
    HAS_PROXMOXER = True
    PROXMOXER_IMPORT_ERROR = None
except ImportError:
    ProxmoxAPI = None
    HAS_PROXMOXER = False
    PROXMOXER_IMPORT_ERROR = traceback.format_exc()

# Words PVE uses when another operation holds the container (pve-guest-common AbstractConfig.pm, PVE::Tools lock_file).
LOCK_MARKERS = ('is locked', "can't lock file", 'got timeout', 'detected modified configuration',
                'checksum mismatch')
DENIED_DEV = 'configuring device passthrough is only allowed for root@pam'


class PveFailure(Exception):
    """What PVE (or pct) refused, with its message; `locked` when a retry may help."""

    def __init__(self, message, status=None):
        super(PveFailure, self).__init__(message)
        self.message = message
        self.status = status

    @property
    def locked(self):
        return any(m in self.message for m in LOCK_MARKERS)


def with_lock_retries(action, retries, delay, sleep=time.sleep):
    """Run action(); retry it while PVE reports a lock, at most `retries` more times. Returns (result, attempts)."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return action(), attempt
        except PveFailure as exc:
            if not exc.locked or attempt > retries:
                if exc.locked:
                    raise PveFailure('{0} (still locked after {1} attempts over {2:.0f}s; PVE holds this lock while '
                                     'a backup, snapshot, migration or another task runs: wait for it, or clear a '
                                     'stale lock with `pct unlock VMID` on the node)'.format(
                                         exc.message, attempt, delay * (attempt - 1)), exc.status)
                raise
            sleep(delay)


def _timed_out(exc):
    """requests' Timeout (ConnectTimeout, ReadTimeout), by name: module_utils does not import requests itself."""
    return any(cls.__name__ in ('Timeout', 'ReadTimeout', 'ConnectTimeout') for cls in type(exc).__mro__)


def _resource_message(exc):
    """PVE's message from a proxmoxer ResourceException (status, reason, per-field errors)."""
    status = getattr(exc, 'status_code', None)
    parts = [str(getattr(exc, 'content', '') or getattr(exc, 'status_message', '') or exc).strip()]
    errors = getattr(exc, 'errors', None)
    if errors:
        parts.append('; '.join('{0}: {1}'.format(k, str(v).strip()) for k, v in sorted(errors.items())))
    text = ' - '.join(p for p in parts if p)
    return '{0} {1}'.format(status, text).strip() if status else text, status


class ApiClient(object):
    """The PVE API through proxmoxer. devN needs root@pam with a password; tokens get PVE's 403."""

    method = 'api'

    def __init__(self, params, vmid, node, task_timeout=120, sleep=time.sleep, clock=time.time):
        self.vmid = vmid
        self.node = node
        self.task_timeout = task_timeout
        self.sleep = sleep
        self.clock = clock
        verify = params.get('validate_certs', True)
        if verify and params.get('ca_path'):
            verify = params['ca_path']
        auth = {'user': params['api_user']}
        if params.get('api_port'):
            auth['port'] = params['api_port']
        if params.get('api_password'):
            auth['password'] = params['api_password']
        else:
            user, _sep, token = str(params.get('api_token_id') or '').partition('!')
            if token and user:
                auth['user'] = user
            auth['token_name'] = token or params.get('api_token_id')
            auth['token_value'] = params.get('api_token_secret')
        self.host, self.timeout = params['api_host'], params.get('api_timeout') or 30
        try:
            self.api = ProxmoxAPI(params['api_host'], verify_ssl=verify, timeout=self.timeout, **auth)
        except Exception as exc:  # proxmoxer raises plain exceptions for login failures
            if _timed_out(exc):
                raise PveFailure('cannot log in to the PVE API at {0}: no answer within {1} s (api_timeout); '
                                 'check that pveproxy runs and answers on the node'.format(self.host, self.timeout))
            raise PveFailure('cannot log in to the PVE API at {0}: {1}'.format(
                params['api_host'], _resource_message(exc)[0]))

    def _call(self, fn):
        try:
            return fn()
        except PveFailure:
            raise
        except Exception as exc:
            if _timed_out(exc):
                raise PveFailure(
                    'the PVE API at {0} did not answer within {1} s (api_timeout): {2}. A change it was sent may '
                    'still be applied: the next run reads the config again before it changes anything'.format(
                        self.host, self.timeout, exc))
            message, status = _resource_message(exc)
            raise PveFailure(message, status)

    @property
    def _ct(self):
        return self.api.nodes(self.node).lxc(self.vmid)

    def version(self):
        return self._call(self.api.version.get)

    def config(self, current=False):
        """The config with pending changes applied (PVE's default view), or the values the container runs with."""
        if current:
            return self._call(lambda: self._ct.config.get(current=1))
        return self._call(self._ct.config.get)

    def update(self, sets, deletes, digest=None):
        args = dict(sets)
        if deletes:
            args['delete'] = ','.join(deletes)
        if digest:
            args['digest'] = digest
        self._call(lambda: self._ct.config.put(**args))

    def status(self):
        return self._call(self._ct.status.current.get).get('status')

    def reboot(self, timeout=None):
        upid = self._call(self._ct.status.reboot.post)
        self.wait(upid, timeout)

    def wait(self, upid, timeout=None):
        """Wait for a task; PveFailure with its exit status and last log lines when it ends in error."""
        deadline = self.clock() + (timeout or self.task_timeout)
        tasks = self.api.nodes(self.node).tasks(upid)
        while True:
            status = self._call(tasks.status.get)
            if status.get('status') == 'stopped':
                exitstatus = str(status.get('exitstatus') or '')
                if exitstatus == 'OK' or exitstatus.startswith('WARNINGS'):
                    return status
                raise PveFailure('task {0} ended in error: {1}{2}'.format(upid, exitstatus, self._log_tail(tasks)))
            if self.clock() >= deadline:
                raise PveFailure('task {0} still running after {1}s (bounded wait; the task goes on in PVE){2}'.format(
                    upid, timeout or self.task_timeout, self._log_tail(tasks)))
            self.sleep(0.5)

    def _log_tail(self, tasks):
        try:
            lines = [entry.get('t', '') for entry in tasks.log.get(limit=500)]
        except Exception:
            return ''
        lines = [line for line in lines if line and not line.startswith('TASK ')]
        return '; last log lines: ' + ' | '.join(lines[-3:]) if lines else ''


class PctClient(object):
    """`pct` on the PVE node, as root: what PVE's CLI allows without the API's token restrictions."""

    method = 'pct'

    def __init__(self, module, vmid, pct_path='/usr/sbin/pct'):
        self.module = module
        self.vmid = str(vmid)
        self.pct = pct_path

    def _run(self, *args):
        argv = [self.pct] + list(args)
        rc, out, err = self.module.run_command(argv)
        if rc != 0:
            text = (err or out or '').strip().splitlines()
            raise PveFailure('{0} failed (rc {1}): {2}'.format(
                ' '.join(argv[:3]), rc, ' | '.join(text[-3:]) or 'no output'))
        return out

    def config(self, current=False):
        """`pct config VMID` as a dict (the pending values, as the API's default view; snapshots left out), or with
        --current the values the container runs with."""
        cfg = {}
        for line in self._run('config', self.vmid, *(['--current'] if current else [])).splitlines():
            if line.startswith('['):
                break
            if not line or line.startswith('#'):
                continue
            key, sep, value = line.partition(':')
            if sep:
                cfg[key.strip()] = value.strip()
        return cfg

    def update(self, sets, deletes, digest=None):
        argv = ['set', self.vmid]
        for key in sorted(sets, key=lambda k: int(k[3:]) if k[3:].isdigit() else 0):
            argv += ['--' + key, sets[key]]
        if deletes:
            argv += ['--delete', ','.join(deletes)]
        self._run(*argv)

    def status(self):
        out = self._run('status', self.vmid)
        for line in out.splitlines():
            key, _sep, value = line.partition(':')
            if key.strip() == 'status':
                return value.strip()
        raise PveFailure('pct status {0}: unexpected output {1!r}'.format(self.vmid, out.strip()))

    def reboot(self, timeout=None):
        self._run('reboot', self.vmid)
