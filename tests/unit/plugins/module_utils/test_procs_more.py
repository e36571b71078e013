"""_procs exactly: the messages a failure carries, and the edges of the rules for what may be killed."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _procs as procs
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result


def error(func, *args):
    with pytest.raises(procs.ProcError) as exc:
        func(*args)
    return str(exc.value)


def test_parse_ps_messages_name_the_line():
    assert error(procs.parse_ps, '    1     0     1 Ss   /sbin/init\nabc 1 1 S x\n') == "unparseable ps line 'abc 1 1 S x'"
    assert error(procs.parse_ps, '') == 'ps listed no process at all'
    assert error(procs.parse_ps, '\n  \n') == 'ps listed no process at all'


def test_parse_ps_reads_on_past_a_blank_line():
    table = procs.parse_ps('    1     0     1 Ss   /sbin/init\n\n   7     1     7 S    sleep 1\n')
    assert sorted(table) == [1, 7] and table[7].args == 'sleep 1'


def test_invalid_regex_message_is_exact():
    msg = error(procs.Policy, ['sglang('], [])
    assert msg.startswith("invalid server pattern regex 'sglang(': missing ), unterminated subpattern")


def test_a_directory_with_capital_letters_is_a_plain_directory():
    assert procs.listing_dirs(['/X11/nvidia*', '/dev/nvidia*', '/X11/card?']) == ['/X11', '/dev']
    assert not procs.glob_chars('/dev/XX')


def test_listing_dirs_message_is_exact():
    assert error(procs.listing_dirs, ['nvidia*']) == (
        "device glob 'nvidia*': give an absolute path with wildcards in the last part only")


@pytest.mark.parametrize('rc, out, err, msg', [
    (1, '', 'kill: (5): Operation not permitted\nkill: (6): Operation not permitted\n',
     'rc 1: kill: (5): Operation not permitted; kill: (6): Operation not permitted'),
    (1, 'kill: (7): No such process\n', 'kill: (5): Operation not permitted\n', 'rc 1: kill: (5): Operation not permitted'),
    (255, '', '', 'rc 255: no output'),
    (124, '', '', 'rc 124 (timed out): no output'),
    (137, '', 'kill: (5): No such process\n', 'rc 137 (timed out): no output'),
    (1, '', 'kill: (5): No such process\nkill: (6): No such process\n', ''),
])
def test_kill_errors_exact(rc, out, err, msg):
    assert procs.kill_errors(Result([], rc, out, err)) == msg


@pytest.mark.parametrize('rc, out, err, msg', [
    (2, '', 'fuser: bad option\n', 'fuser failed (rc 2): fuser: bad option'),
    (1, ' 434', '', 'fuser failed (rc 1): 434'),
    (1, ' 434', '/dev/nvidia0: m\n', 'fuser failed (rc 1): /dev/nvidia0: m'),
    (124, '', '', 'fuser failed (rc 124):  (timed out)'),
    (137, '', 'killed\n', 'fuser failed (rc 137): killed (timed out)'),
])
def test_parse_fuser_messages_are_exact(rc, out, err, msg):
    assert error(procs.parse_fuser, Result([], rc, out, err)) == msg


def test_group_2_may_be_killed_whole():
    table = procs.parse_ps('    1     0     1 Ss   /sbin/init\n    2     1     2 S    sglang::scheduler_TP0\n'
                           '    3     2     2 S    python -c spawn_main\n')
    assert procs.safe_group(table, 2, {1: 'PID 1'})
    assert not procs.safe_group(table, 2, {3: 'excluded'})


def test_split_records_pid_cmdline_and_reason():
    table = procs.parse_ps('    1     0     1 Ss   /sbin/init\n    8     1     8 S    sglang::scheduler_TP0\n')
    killable, skipped = procs.split(table.values(), {1: 'PID 1'})
    assert killable == [table[8]]
    assert skipped == [dict(pid=1, cmdline='/sbin/init', reason='PID 1')]
