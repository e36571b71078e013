# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_server role's lifecycle lock as a run takes and releases it: the decisions around the container
helper's `gpuserve-sglang lock acquire|release` (_helper_lock.py), which holds the lock in the container.

Private to this collection. Used by the action gpuserve.sglang.lifecycle_lock on the controller. Runs nothing
itself: `run(argv) -> (rc, stdout, stderr)` runs a command in the container, and `gone(run) -> bool` says whether a
recorded run is known to be dead (_controller_run.state); both are injected.

The lock a run holds is a dict {run, token, scope}: `run` names this ansible-playbook run (controller host, PID,
user, playbook, start), `token` is the helper's for this hold ('' when none), `scope` the entry point that took it.
Re-entrant: restart.yml inside main.yml's hold takes nothing, and only the scope that took the lock releases it.
"""
from __future__ import annotations

import json

PYTHON = '/usr/bin/python3'
TAKEN, BUSY = 0, 2  # acquire's exit codes: taken; another run holds it (its owner in the JSON)


class LockError(Exception):
    """The lock was not taken or not released; the message says who holds it or what the helper said."""


def _json(text):
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _said(rc, out, err):
    """What a failed helper call said: its JSON message, else its stderr, else its stdout."""
    found = _json(out) or {}
    return found.get('message') or found.get('reason') or (err or '').strip() or (out or '').strip() or 'rc %s' % rc


def acquire(run, gone, held, scope, owner, helper, path, ttl, wait, steal=''):
    """(lock, cleared): take the lock, or keep the one this run holds.

    A first try without waiting learns who holds it. A holder that is a run of this controller known to be gone is
    taken over (its token is stolen); any other is waited for up to `wait` seconds (with the operator's `steal`
    token, if any). `cleared` is the owner of a lock its holder left without release (None when there was none)."""
    if held and held.get('token'):
        return dict(held), None
    base = [PYTHON, helper, 'lock', 'acquire', '--path', path, '--ttl', str(ttl), '--owner-json', json.dumps(owner)]
    stealing = ['--steal', steal] if steal else []
    rc, out, err = run(base + ['--wait', '0'] + stealing)
    if rc == BUSY:
        holder = (_json(out) or {}).get('owner') or {}
        if holder.get('token') and gone(holder.get('run') or {}):
            stealing = ['--steal', holder['token']]
        rc, out, err = run(base + ['--wait', str(wait)] + stealing)
    got = _json(out) if rc == TAKEN else None
    if not got or not got.get('token'):
        raise LockError(_said(rc, out, err))
    return dict(run=owner, token=got['token'], scope=scope), got.get('cleared') or None


def release(run, held, scope, helper, path):
    """(lock, released): release the lock when this scope took it; else the lock as it was, and nothing run."""
    if not held or not held.get('token') or held.get('scope') != scope:
        return dict(held or {}), False
    rc, out, err = run([PYTHON, helper, 'lock', 'release', '--path', path, '--token', held['token']])
    if rc != 0:
        raise LockError(_said(rc, out, err))
    return dict(held, token='', scope=''), True


def cleared_message(cleared):
    """The line a run prints when it cleared a lock left by a run that is gone."""
    run = cleared.get('run') or {}
    return ('cleared the lifecycle lock of a run that is gone: ansible-playbook PID %s on %s (taken %s)'
            % (run.get('pid', '?'), run.get('host', '?'), cleared.get('since', '?')))
