"""gpuserve.sglang.pct_remote: the parent plugin's options, unchanged, plus pipelining without a pty."""
import ast
import inspect

import yaml

from ansible_collections.community.proxmox.plugins.connection import proxmox_pct_remote as parent
from ansible_collections.gpuserve.sglang.plugins.connection import pct_remote


def _doc(module):
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'DOCUMENTATION':
            return yaml.safe_load(node.value.value)
    raise AssertionError('no DOCUMENTATION in %s' % module.__name__)


def test_options_are_the_parents():
    assert _doc(pct_remote)['options'] == _doc(parent)['options']


def test_declares_pipelining_and_subclasses_the_parent():
    assert pct_remote.Connection.has_pipelining is True
    assert issubclass(pct_remote.Connection, parent.Connection)


def test_no_pty_when_sending_stdin(monkeypatch):
    seen = []

    def fake_exec(self, cmd, in_data=None, sudoable=True):
        seen.append((cmd, in_data, sudoable))
        return 0, b'', b''

    monkeypatch.setattr(parent.Connection, 'exec_command', fake_exec)
    conn = pct_remote.Connection.__new__(pct_remote.Connection)
    conn.exec_command('python3', in_data=b'module')
    conn.exec_command('mkdir x')
    conn.exec_command('true', sudoable=False)
    assert seen == [('python3', b'module', False), ('mkdir x', None, True), ('true', None, False)]


REXEC = b'Device or resource busy - Failed to rexec as memfd\nfree(): invalid pointer\n'


def conn_with(monkeypatch, answers):
    seen = []

    def fake_exec(self, cmd, in_data=None, sudoable=True):
        seen.append((cmd, in_data))
        return answers.pop(0)

    monkeypatch.setattr(parent.Connection, 'exec_command', fake_exec)
    return pct_remote.Connection.__new__(pct_remote.Connection), seen


def test_a_pct_exec_that_failed_before_attaching_runs_once_more(monkeypatch):
    # the real failure seen in the lab: lxc-attach's self re-exec (src/lxc/rexec.c), rc -6, nothing on stdout
    conn, seen = conn_with(monkeypatch, [(-6, b'', REXEC), (0, b'{"ok": true}', b'')])
    assert conn.exec_command('python3', in_data=b'module') == (0, b'{"ok": true}', b'')
    assert seen == [('python3', b'module'), ('python3', b'module')]


def test_only_once_and_only_for_that_failure(monkeypatch):
    conn, seen = conn_with(monkeypatch, [(-6, b'', REXEC), (-6, b'', REXEC)])
    assert conn.exec_command('true') == (-6, b'', REXEC) and len(seen) == 2
    # any other failure, or one after the command printed something, is the command's own: never run again
    for answer in [(1, b'', b'Error: container 101 not running!\n'), (-6, b'partial', REXEC), (0, b'', REXEC)]:
        conn, seen = conn_with(monkeypatch, [answer])
        assert conn.exec_command('true') == answer and len(seen) == 1
