"""spawn(): module.run_command with its one-second race closed (real processes, a real AnsibleModule)."""
import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import pipes_closed, spawn, wait_once_closed

SH = '/bin/sh'


@pytest.fixture
def module(monkeypatch):
    monkeypatch.setattr(basic, '_ANSIBLE_ARGS', to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': {}})))
    monkeypatch.setattr(basic, '_ANSIBLE_PROFILE', 'legacy')
    return basic.AnsibleModule(argument_spec={})


def test_rc_stdout_and_stderr_are_returned_apart(module):
    assert spawn(module, [SH, '-c', 'printf out; printf err >&2; exit 3'], {}) == (3, 'out', 'err')


def test_environ_update_reaches_the_command_only(module, monkeypatch):
    monkeypatch.setenv('GPUSERVE_SPAWN_TEST', 'kept')
    monkeypatch.delenv('GPUSERVE_SPAWN_ONLY_CHILD', raising=False)
    rc, out, _err = spawn(module, [SH, '-c', 'printf "%s %s" "$GPUSERVE_SPAWN_ONLY_CHILD" "$GPUSERVE_SPAWN_TEST"'],
                          {'GPUSERVE_SPAWN_ONLY_CHILD': 'child'})
    assert (rc, out) == (0, 'child kept') and 'GPUSERVE_SPAWN_ONLY_CHILD' not in os.environ


def test_a_child_that_closes_its_output_first_is_waited_for_not_left_to_a_one_second_select(module, monkeypatch):
    # run_command's loop selects with a 1 s timeout; the stall is a select on no pipe at all. Counted, not timed:
    # a wall-clock bound fails on a loaded machine (CI's mutation run beside the lab took 2.5 s for this 0.3 s child).
    empty = []

    class Recording(basic.selectors.PollSelector):
        def select(self, timeout=None):
            if not self.get_map():
                empty.append(timeout)
            return super().select(timeout)

    monkeypatch.setattr(basic.selectors, 'PollSelector', Recording)
    rc, out, _err = spawn(module, [SH, '-c', 'printf done; exec >&- 2>&-; sleep 0.3; exit 4'], {})
    assert (rc, out) == (4, 'done') and empty == []


def test_spawn_hands_run_command_the_callback():
    class Recorder:
        def run_command(self, argv, **kwargs):
            self.call = (argv, kwargs)
            return 0, 'o', 'e'

    rec = Recorder()
    assert spawn(rec, ['true'], {'LC_ALL': 'C'}) == (0, 'o', 'e')
    assert rec.call == (['true'], dict(environ_update={'LC_ALL': 'C'}, before_communicate_callback=wait_once_closed))


@contextlib.contextmanager
def open_child(script):
    """A child with both output pipes; afterwards killed if still running, reaped, its pipes closed."""
    with subprocess.Popen([SH, '-c', script], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        try:
            yield child
        finally:
            if child.returncode is None:
                child.kill()


def test_poll_waits_for_the_child_once_both_pipes_are_closed_and_drained():
    with open_child('exec >&- 2>&-; sleep 0.3; exit 5') as child:
        deadline = time.monotonic() + 5
        while not pipes_closed(child.stdout, child.stderr):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        wait_once_closed(child)
        # the plain poll() would say None here (the child sleeps on); the callback's poll waits and says 5
        assert child.poll() == 5


@pytest.mark.parametrize('script, why', [
    ('sleep 0.5', 'both pipes open'),
    ('exec >&-; sleep 0.5', 'stderr still open'),
    ('exec 2>&-; sleep 0.5', 'stdout still open'),
    ('printf unread; exec >&- 2>&-; sleep 0.5', 'output not read yet'),
])
def test_poll_answers_at_once_while_a_pipe_is_open_or_holds_output(script, why):
    with open_child(script) as child:
        time.sleep(0.2)  # the child has done its closing by now
        wait_once_closed(child)
        # None, not the status: it did not wait for the child (which sleeps on), whatever the machine's load
        assert child.poll() is None, why


def test_poll_of_a_child_that_exited_with_output_unread_is_its_status():
    with open_child('printf unread; exit 7') as child:
        child.wait()  # reaped, so the real poll() knows the status; its pipe still holds the output
        wait_once_closed(child)
        assert child.poll() == 7


def test_pipes_closed_needs_every_pipe():
    with open_child('exec >&-; sleep 0.5') as child:
        time.sleep(0.2)
        assert pipes_closed(child.stdout) is True and pipes_closed(child.stdout, child.stderr) is False


def test_output_that_is_not_utf8_survives_as_surrogates(module):
    code = 'import sys; sys.stdout.buffer.write(b"a\\xffb"); sys.stderr.buffer.write(b"e\\xfe")'
    rc, out, err = spawn(module, [sys.executable, '-c', code], {})
    assert rc == 0 and out == 'a\udcffb' and err == 'e\udcfe'
