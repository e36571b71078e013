"""spawn(): the runner's own way to run a command (real processes; no fake module answers here)."""
import os
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import spawn

SH = '/bin/sh'


class Failed(Exception):
    pass


class Module:
    def fail_json(self, **kwargs):
        raise Failed(kwargs)


def test_rc_stdout_and_stderr_are_returned_apart():
    assert spawn(Module(), [SH, '-c', 'printf out; printf err >&2; exit 3'], {}) == (3, 'out', 'err')


def test_environ_update_reaches_the_command_and_the_rest_of_the_environment_stays(monkeypatch):
    monkeypatch.setenv('GPUSERVE_SPAWN_TEST', 'kept')
    rc, out, _err = spawn(Module(), [SH, '-c', 'printf "%s %s" "$LC_ALL" "$GPUSERVE_SPAWN_TEST"'], {'LC_ALL': 'C'})
    assert (rc, out) == (0, 'C kept')
    assert os.environ['GPUSERVE_SPAWN_TEST'] == 'kept'


def test_environ_update_does_not_change_the_module_environment(monkeypatch):
    monkeypatch.delenv('GPUSERVE_SPAWN_ONLY_CHILD', raising=False)
    rc, out, _err = spawn(Module(), [SH, '-c', 'printf %s "$GPUSERVE_SPAWN_ONLY_CHILD"'],
                          {'GPUSERVE_SPAWN_ONLY_CHILD': 'child'})
    assert (rc, out) == (0, 'child') and 'GPUSERVE_SPAWN_ONLY_CHILD' not in os.environ


def test_stdin_is_empty_so_a_reader_of_stdin_never_waits():
    # Give this process a stdin that never ends: `cat` reading it would wait until `timeout` (rc 124). From
    # /dev/null it ends at once with nothing.
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        assert spawn(Module(), ['timeout', '2', 'cat'], {}) == (0, '', '')
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)


def test_output_that_is_not_utf8_survives_as_surrogates():
    rc, out, _err = spawn(Module(), [sys.executable, '-c', 'import sys; sys.stdout.buffer.write(b"a\\xffb")'], {})
    assert rc == 0 and out == 'a\udcffb'


def test_a_command_that_cannot_start_fails_the_module_with_its_name():
    with pytest.raises(Failed) as exc:
        spawn(Module(), ['/nonexistent/gpuserve-no-such-binary', '--flag'], {})
    msg = exc.value.args[0]['msg']
    assert msg.startswith('cannot run /nonexistent/gpuserve-no-such-binary: ') and 'No such file' in msg
    assert exc.value.args[0]['cmd'] == '/nonexistent/gpuserve-no-such-binary --flag'


def test_stderr_that_is_not_utf8_survives_as_surrogates():
    rc, _out, err = spawn(Module(), [sys.executable, '-c', 'import sys; sys.stderr.buffer.write(b"e\\xfe")'], {})
    assert rc == 0 and err == 'e\udcfe'
