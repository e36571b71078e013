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
