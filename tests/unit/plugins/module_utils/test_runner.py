"""The exec runner: argv lists only, the timeout wrapper, and the three targets; then exactly: binaries looked up
as required, defaults, where, the Result it hands back."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result, Runner


class FakeModule:
    def __init__(self, rc=0, out='', err=''):
        self.calls, self.answer = [], (rc, out, err)

    def get_bin_path(self, name, required=False):
        return '/usr/sbin/' + name

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return self.answer


@pytest.mark.parametrize('target, extra, prefix', [
    ('local', {}, []),
    ('pct', dict(vmid=105), ['/usr/sbin/pct', 'exec', '105', '--']),
    ('lxc', dict(container_name='sglang-a'), ['/usr/sbin/lxc-attach', '-n', 'sglang-a', '--']),
])
def test_argv_per_target(target, extra, prefix):
    module = FakeModule(0, 'out', 'err')
    runner = Runner(module, target, timeout=7, **extra)
    res = runner.run(['ps', '-eo', 'pid='])
    argv, kwargs = module.calls[0]
    assert argv == ['/usr/sbin/timeout', '--kill-after=1', '7s'] + prefix + ['ps', '-eo', 'pid=']
    assert isinstance(argv, list) and not kwargs.get('use_unsafe_shell')
    # C locale for every command: callers parse messages (kill's 'No such process') that a locale would translate
    assert kwargs.get('environ_update', {}).get('LC_ALL') == 'C'
    assert (res.rc, res.out, res.err, res.timed_out) == (0, 'out', 'err', False)
    assert runner.local is (target == 'local')


def test_per_call_timeout_and_timed_out():
    module = FakeModule(124)
    res = Runner(module).run(['nvidia-smi'], timeout=0.5)
    assert module.calls[0][0][:3] == ['/usr/sbin/timeout', '--kill-after=1', '0.5s']
    assert res.timed_out and res.cmd.endswith('nvidia-smi')


def test_from_params_and_where():
    runner = Runner.from_params(FakeModule(), dict(target='pct', vmid=101, container_name=None))
    assert runner.where == 'CT 101' and runner.timeout == 30.0


def test_unknown_target():
    with pytest.raises(ValueError):
        Runner(FakeModule(), 'ssh')


class Failed(Exception):
    pass


@pytest.mark.parametrize('runner_timeout, call_timeout', [(0, None), (30, 0), (30, -1), (-5, None)])
def test_a_timeout_of_zero_or_less_fails_before_anything_runs(runner_timeout, call_timeout):
    # coreutils `timeout 0s` means no limit at all: a hung nvidia-smi would block the module forever
    module = FakeModule()

    def fail_json(**kw):
        raise Failed(kw['msg'])
    module.fail_json = fail_json
    runner = Runner(module, 'local', timeout=runner_timeout)
    with pytest.raises(Failed, match=r'^command timeouts must be more than 0 seconds \(got -?[0-9]+ for nvidia-smi -L\)$'):
        runner.run(['nvidia-smi', '-L'], timeout=call_timeout)
    assert module.calls == []


class RecordingModule:
    """Records get_bin_path lookups (name, required) and the run_command calls."""

    def __init__(self, rc=0, out='', err=''):
        self.lookups, self.calls, self.answer = [], [], (rc, out, err)

    def get_bin_path(self, name, required=False):
        self.lookups.append((name, required))
        return '/bin/' + name

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return self.answer


@pytest.mark.parametrize('target, extra, lookups, prefix, where', [
    ('local', {}, [('timeout', True)], [], 'this host'),
    ('pct', dict(vmid=105), [('pct', True), ('timeout', True)], ['/bin/pct', 'exec', '105', '--'], 'CT 105'),
    ('lxc', dict(container_name='sglang-a'), [('lxc-attach', True), ('timeout', True)],
     ['/bin/lxc-attach', '-n', 'sglang-a', '--'], 'container sglang-a'),
])
def test_binaries_are_required_and_where_is_named(target, extra, lookups, prefix, where):
    module = RecordingModule()
    runner = Runner(module, target, **extra)
    assert module.lookups == lookups
    assert runner.prefix == prefix and runner.where == where and runner.target == target
    assert runner.module is module


def test_defaults_local_and_thirty_seconds():
    module = RecordingModule(0, 'o', 'e')
    runner = Runner(module)
    assert runner.local and runner.target == 'local' and runner.timeout == 30.0
    res = runner.run(('nvidia-smi', '-L'))  # any sequence: handed on as a list
    assert module.calls == [(['/bin/timeout', '--kill-after=1', '30s', 'nvidia-smi', '-L'], dict(environ_update={'LC_ALL': 'C'}))]
    assert isinstance(res, Result)
    assert res.argv == ['/bin/timeout', '--kill-after=1', '30s', 'nvidia-smi', '-L']
    assert (res.rc, res.out, res.err) == (0, 'o', 'e')
    assert res.cmd == '/bin/timeout --kill-after=1 30s nvidia-smi -L'


def test_argv_timeout_override_and_format():
    runner = Runner(RecordingModule(), 'pct', vmid=7, timeout=2.5)
    assert runner.argv(['true']) == ['/bin/timeout', '--kill-after=1', '2.5s', '/bin/pct', 'exec', '7', '--', 'true']
    assert runner.argv(['true'], timeout=120) == ['/bin/timeout', '--kill-after=1', '120s', '/bin/pct', 'exec', '7', '--', 'true']
    assert runner.argv(['true'], 0.25)[2] == '0.25s'


def test_run_passes_per_call_timeout():
    module = RecordingModule(3, '', 'boom')
    res = Runner(module, timeout=9).run(['x'], timeout=1)
    assert module.calls[0][0] == ['/bin/timeout', '--kill-after=1', '1s', 'x']
    assert res.rc == 3 and res.err == 'boom' and not res.timed_out


def test_from_params_lxc_and_command_timeout():
    module = RecordingModule()
    runner = Runner.from_params(module, dict(target='lxc', container_name='ct-b', command_timeout=4.0))
    assert runner.target == 'lxc' and runner.where == 'container ct-b' and runner.timeout == 4.0
    assert not runner.local
    assert runner.argv(['ls']) == ['/bin/timeout', '--kill-after=1', '4s', '/bin/lxc-attach', '-n', 'ct-b', '--', 'ls']


def test_from_params_without_optional_keys():
    runner = Runner.from_params(RecordingModule(), dict(target='pct', vmid=12))
    assert runner.prefix == ['/bin/pct', 'exec', '12', '--'] and runner.timeout == 30.0


def test_unknown_target_message():
    module = RecordingModule()
    with pytest.raises(ValueError, match=r"^unknown target 'ssh'$"):
        Runner(module, 'ssh')
    assert module.lookups == []


@pytest.mark.parametrize('rc, timed_out', [(0, False), (1, False), (123, False), (124, True), (125, False), (137, True), (-9, False)])
def test_timed_out_is_timeouts_exit_status(rc, timed_out):
    assert Result(['a', 'b'], rc, '', '').timed_out is timed_out


def test_result_cmd_joins_with_spaces():
    res = Result(['timeout', '1s', 'nvidia-smi', '--format=csv'], 0, 'out', 'err')
    assert res.cmd == 'timeout 1s nvidia-smi --format=csv'
    assert (res.argv, res.rc, res.out, res.err) == (['timeout', '1s', 'nvidia-smi', '--format=csv'], 0, 'out', 'err')
