"""The exec runner: argv lists only, the timeout wrapper, and the three targets."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner


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
