"""Process table parsing and the rules for what may be killed; then _procs exactly: the messages a failure carries,
and the edges of the rules for what may be killed."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _procs as procs
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result

from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import capture

PS = """\
    1     0     1 Ss   /sbin/init
   50     1    50 Ssl  /usr/bin/nvidia-persistenced --user nvidia-persistenced
  100     1   100 Ssl  /opt/sglang/venv/bin/python -m sglang.launch_server --model-path /models/k2 --tp 8
  101   100   100 Sl   sglang::scheduler_TP0
  102   100   100 Zl   sglang::scheduler_TP1
  103   100   100 Z    [sglang::detoken] <defunct>
  104   100   100 S    /opt/sglang/venv/bin/python -c from multiprocessing.spawn import spawn_main
  200     1   200 Ss   sshd: root@pts/0
  201   200   201 S    bash
  202   201   202 S+   /usr/bin/python3 /root/.ansible/tmp/AnsiballZ_gpu_release.py
  203   202   202 R    /usr/bin/timeout --kill-after=1 30s ps -ww -eo pid=,ppid=,pgid=,stat=,args=
  204   203   202 R    ps -ww -eo pid=,ppid=,pgid=,stat=,args=
  300     1   300 Sl   /usr/local/bin/sglang serve --model /m
  301     1   301 S    grep sglang serve-like
  400     1   400 Ssl  /usr/bin/dcgm-exporter
"""


def table():
    return procs.parse_ps(PS)


def test_parse_ps():
    t = table()
    assert t[100] == procs.Proc(100, 1, 100, 'Ssl',
                                '/opt/sglang/venv/bin/python -m sglang.launch_server --model-path /models/k2 --tp 8')
    assert t[200].args == 'sshd: root@pts/0'
    assert procs.parse_ps('  7 1 7 S\n')[7].args == ''


@pytest.mark.parametrize('text', ['abc 1 1 S x\n', '1 2\n', '', '\n'])
def test_parse_ps_fails_closed(text):
    with pytest.raises(procs.ProcError):
        procs.parse_ps(text)


def test_default_patterns_match_servers_not_bystanders():
    policy = procs.Policy(procs.DEFAULT_SERVER_PATTERNS, procs.DEFAULT_PROTECTED_PATTERNS)
    assert sorted(p.pid for p in policy.servers(table())) == [100, 101, 102, 300]


def test_never_local_covers_pid1_self_ancestors_helpers_protected():
    policy = procs.Policy([], procs.DEFAULT_PROTECTED_PATTERNS, exclude_pids=[104], self_pid=202)
    never = policy.never(table())
    assert never[1] == 'PID 1'
    assert {50, 400} <= set(p for p, why in never.items() if why == 'protected')
    assert {200, 201, 202, 203, 204} <= set(never)  # module, its shell, sshd, the ps listing and its wrapper
    assert never[104] == 'excluded'
    assert not {100, 101, 300} & set(never)


def test_never_in_container_knows_only_the_listing():
    rows = '    1     0     1 Ss   /sbin/init\n  9     0     9 R    ps -ww -eo pid=,ppid=,pgid=,stat=,args=\n' \
           '  5     1     5 S    sglang::scheduler_TP0\n'
    never = procs.Policy([], []).never(procs.parse_ps(rows))
    assert never == {1: 'PID 1', 9: 'this module, its ancestors or its helpers'}


def test_zombie_and_ancestors():
    t = table()
    assert procs.is_zombie(t[103]) and not procs.is_zombie(t[102]) and not procs.is_zombie(t[101])
    assert procs.ancestors(t, 204) == {204, 203, 202, 201, 200, 1}
    loop = {5: procs.Proc(5, 6, 5, 'S', ''), 6: procs.Proc(6, 5, 5, 'S', '')}
    assert procs.ancestors(loop, 5) == {5, 6}


def test_safe_group():
    t = table()
    assert procs.safe_group(t, 100, {1: 'PID 1'})
    assert not procs.safe_group(t, 100, {104: 'excluded'})
    assert not procs.safe_group(t, 1, {})
    assert not procs.safe_group(t, 0, {})


def test_kill_argv():
    assert procs.kill_argv('TERM', [12, 3]) == ['kill', '-s', 'TERM', '--', '3', '12']
    assert procs.kill_argv('KILL', [7], [100]) == ['kill', '-s', 'KILL', '--', '7', '-100']


@pytest.mark.parametrize('rc, err, bad', [
    (0, '', ''),
    (1, 'kill: (999): No such process\n', ''),
    (1, 'kill: (5): Operation not permitted\nkill: (6): No such process\n', 'Operation not permitted'),
    (255, '', 'no output'),
    (124, '', 'timed out'),
])
def test_kill_errors(rc, err, bad):
    msg = procs.kill_errors(Result([], rc, '', err))
    assert (bad in msg) if bad else msg == ''
    assert bool(msg) is bool(bad)


def test_expand_globs_skips_dirs():
    listing = 'autofs\ncpu/\nnvidia-caps/\nnvidia-uvm\nnvidia-uvm-tools\nnvidia0\nnvidia1\nnvidiactl\nnull\n'
    globs = ['/dev/nvidia*', '/dev/null']
    assert procs.listing_dirs(globs) == ['/dev']
    assert procs.expand(globs, {'/dev': listing}) == [
        '/dev/null', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools', '/dev/nvidia0', '/dev/nvidia1', '/dev/nvidiactl']


@pytest.mark.parametrize('glob', ['dev/nvidia*', '/dev/*/nvidia0'])
def test_listing_dirs_refuses(glob):
    with pytest.raises(procs.ProcError, match='absolute path'):
        procs.listing_dirs([glob])


def test_parse_fuser_real_captures():
    rc, out, err = capture('fuser_list')
    assert procs.parse_fuser(Result([], rc, out, err)) == {434}
    rc, out, err = capture('fuser_none')
    assert procs.parse_fuser(Result([], rc, out, err)) == set()


@pytest.mark.parametrize('rc, out', [(2, ''), (124, ''), (1, ' 434')])
def test_parse_fuser_fails_closed(rc, out):
    with pytest.raises(procs.ProcError, match='fuser failed'):
        procs.parse_fuser(Result([], rc, out, 'fuser: bad'))


def test_invalid_regex():
    with pytest.raises(procs.ProcError, match="invalid protected pattern regex '\\('"):
        procs.Policy([], ['('])


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
