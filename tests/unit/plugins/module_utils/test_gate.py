"""The poll loop (fake clock), holder naming from /proc/PID/cgroup, and fail-closed reads through the runner; and,
exactly, poll's sleeps, deadline and result, the messages, and what run_gate hands back.

The gate by device minor (option minors): a container's /dev/nvidiaN are found in nvidia-smi's list by UUID
through the driver's information files, on a host where minor and index differ, so the gate for one container
never waits on another container's GPUs.

The gate's health stage (_gate.run_gate with the option health): before the memory poll, refusing a GPU that
cannot serve with the GPU and the check named, warning on what only slows, reading nothing when it is off."""
import os
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate as gate
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import MIB, SmiError, SmiReader
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner
from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS

from ansible_collections.gpuserve.sglang.tests.support.gate import Clock, Smi, params
from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import FIX, UUID, FakeNvml, capture, four_fields
from ansible_collections.gpuserve.sglang.tests.support.gpu_map import exactly, info_text
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import UUID as HEALTH_UUID
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import XID13_OTHER_GPU, XID79, with_field
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import capture as health_capture


def run(module, clock, check=False, proc_root='/nonexistent', **kw):
    return gate.run_gate(module, params(**kw), check, proc_root, clock, clock.sleep)


def test_passes_on_first_read_when_idle():
    clock = Clock()
    module = Smi(clock)
    res = run(module, clock)
    assert res['passed'] and res['polls'] == 1 and clock.slept == []
    assert res['gpus'] == [dict(index=0, uuid=UUID, used_mib=0, total_mib=143771)]
    assert res['raw'] == four_fields(0)
    assert module.calls == [['/usr/bin/timeout', '--kill-after=1', '10s', 'nvidia-smi',
                             '--query-gpu=index,uuid,memory.used,memory.total', '--format=csv,noheader,nounits']]


def test_returns_within_one_interval_of_zero():
    # Memory of a 100 GiB holder reads 0 about 170 ms after SIGKILL (measured on an H200).
    clock = Clock(cost=0.02)
    module = Smi(clock, used=lambda t: 103019 if t < 0.17 else 0)
    res = run(module, clock, poll_interval=0.05)
    assert res['passed']
    zero_at = 0.17
    assert res['elapsed_s'] - zero_at <= 0.05 + 0.02 + 1e-9
    assert res['polls'] == len(module.calls) == 4  # reads end at 0.02, 0.09, 0.16 (busy), 0.23 (free)
    assert all(s == 0.05 for s in clock.slept)
    assert res['clear_at_s'] == {0: res['elapsed_s']}


def test_clear_at_records_each_gpus_first_zero_read():
    clock = Clock(cost=0.02)
    reads = iter([
        '0, GPU-a, 500, 143771\n1, GPU-b, 0, 143771\n',
        '0, GPU-a, 500, 143771\n1, GPU-b, 700, 143771\n',  # GPU 1 busy again: its first clear read stands
        '0, GPU-a, 0, 143771\n1, GPU-b, 0, 143771\n',
    ])

    class Two(Smi):
        def run_command(self, argv, **kwargs):
            self.calls.append(argv)
            self.clock.now += self.clock.cost
            return 0, next(reads), ''

    res = run(Two(clock), clock, poll_interval=0.05)
    assert res['passed'] and res['polls'] == 3
    assert res['clear_at_s'] == {1: 0.02, 0: res['elapsed_s']}  # first read ends at 0.02


def test_timeout_names_holders_in_containers(tmp_path):
    for pid, text in [(4242, '0::/lxc/105/ns/init.scope\n'),
                      (4243, '12:memory:/lxc.payload.sglang-a\n0::/lxc.payload.sglang-a/init.scope\n'),
                      (4244, open(os.path.join(FIX, 'holder_cgroup.txt')).read()),
                      (4245, '0::/lxc.monitor/105\n')]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / 'cgroup').write_text(text)
    holders = [(4242, 81920), (4243, 1), (4244, 2), (4245, 3), (4246, 4)]
    apps = ''.join('%s, %d, %d\n' % (UUID, pid, mib) for pid, mib in holders)
    apps += 'GPU-other-gpu, 9, 5\n'
    clock = Clock()
    module = Smi(clock, used=lambda t: 81930, apps=apps)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, proc_root=str(tmp_path), timeout=1.0, poll_interval=0.1)
    msg = exc.value.msg
    assert msg.startswith('gate timed out after')
    assert ('GPU 0 still holds 81930 MiB (limit 0): pid 4242 in CT 105, pid 4243 in CT sglang-a, '
            'pid 4244 on the host, pid 4245 in the LXC monitor of CT 105, pid 4246 (container unknown)') in msg
    result = exc.value.result
    assert not exc.value.read_error and result['passed'] is False
    assert 1.0 <= result['elapsed_s'] < 1.0 + 0.1 + 0.03
    # reads end at 0.02 + 0.12 k; the 9th (0.98 s) sleeps only to the deadline, the 10th ends at 1.02 s
    assert result['polls'] == 10 and clock.slept[-1] == pytest.approx(0.02)
    assert [h['pid'] for h in result['holders']] == [4242, 4243, 4244, 4245, 4246]
    assert result['holders'][0] == dict(gpu=0, pid=4242, used_mib=81920, container='CT 105', state=None)


def test_timeout_without_listed_holder_says_so():
    clock = Clock()
    with pytest.raises(gate.GateFailed, match='still holds 5 MiB \\(limit 0\\): no compute process listed'):
        run(Smi(clock, used=lambda t: 5), clock, timeout=0.1)


def test_max_used_and_check_mode_reads_once():
    clock = Clock()
    module = Smi(clock, used=lambda t: 5)
    assert run(module, clock, check=True, max_used_mib=5)['polls'] == 1
    module = Smi(clock, used=lambda t: 6)
    with pytest.raises(gate.GateFailed, match='read once \\(check mode\\) after 1 poll') as exc:
        run(module, clock, check=True, max_used_mib=5, name_holders=False)
    assert len(module.calls) == 1 and exc.value.result['polls'] == 1 and 'holders' in exc.value.result


def bad(rc, out, err=''):
    return [(rc, out, err)]


@pytest.mark.parametrize('answer, needle', [
    (bad(*capture('bad_index')[:2]), 'sees no GPU'),
    (bad(*capture('bad_field')[:2]), 'does not know a queried field'),
    (bad(18, 'Failed to initialize NVML: Driver/library version mismatch\n'), 'reboot the host'),
    (bad(124, ''), 'did not answer'),
    (bad(0, four_fields('[N/A]')), '[N/A]'),
    (bad(0, four_fields('[Not Supported]')), '[Not Supported]'),
    (bad(0, '0, %s, 0\n' % UUID), 'expected 4 fields'),
    (bad(0, four_fields(0) * 2), 'listed twice'),
    (bad(0, ''), 'no GPU at all'),
])
def test_read_errors_fail_at_once_with_raw(answer, needle):
    clock = Clock()
    module = Smi(clock, answers=list(answer))
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, timeout=30)
    assert needle in exc.value.msg and exc.value.read_error
    assert exc.value.result['raw'] == answer[0][1] and exc.value.result['rc'] == answer[0][0]
    assert len(module.calls) == 1 and clock.slept == []


def test_missing_index_and_count():
    clock = Clock()
    with pytest.raises(gate.GateFailed, match=r'index\(es\) \[3\] not listed'):
        run(Smi(clock), clock, gpus=[0, 3])
    with pytest.raises(gate.GateFailed, match='lists 1 GPU.*8 expected'):
        run(Smi(clock), clock, expected_count=8)
    assert run(Smi(clock), clock, gpus=[0], expected_count=1)['passed']


def test_read_error_mid_poll_fails_closed():
    clock = Clock()
    module = Smi(clock, answers=[(0, four_fields(500), ''), (0, four_fields('[N/A]'), '')])
    with pytest.raises(gate.GateFailed, match=r'\[N/A\]'):
        run(module, clock)
    assert len(module.calls) == 2


def test_gate_in_container():
    clock = Clock()
    module = Smi(clock)
    run(module, clock, target='pct', vmid=101, nvidia_smi='/usr/bin/nvidia-smi')
    assert module.calls[0][3:8] == ['/usr/bin/pct', 'exec', '101', '--', '/usr/bin/nvidia-smi']


class OwnRunner:
    """A runner of the caller's own (the container's ExecStartPre gate): no module, no ansible."""

    local, target = False, 'local'

    def __init__(self, clock, answer):
        self.clock, self.answer, self.calls = clock, answer, []

    def run(self, argv, timeout):
        self.calls.append((argv, timeout))
        self.clock.now += 0.02
        return self.answer(argv)


def test_a_runner_given_is_used_instead_of_the_modules():
    from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result
    clock = Clock()
    runner = OwnRunner(clock, lambda argv: Result(argv, 0, four_fields(0), ''))
    res = gate.run_gate(None, params(nvidia_smi='/usr/bin/nvidia-smi'), False, '/nonexistent', clock, clock.sleep,
                        runner=runner)
    assert res['passed'] and res['polls'] == 1
    assert runner.calls == [(['/usr/bin/nvidia-smi', '--query-gpu=index,uuid,memory.used,memory.total',
                              '--format=csv,noheader,nounits'], 10.0)]


def test_a_runner_given_that_is_not_local_names_holders_without_a_container(tmp_path):
    from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Result
    clock = Clock()
    apps = '%s, 4242, 81920\n' % UUID
    runner = OwnRunner(clock, lambda argv: Result(argv, 0, apps if 'compute-apps' in argv[1] else four_fields(81929), ''))
    with pytest.raises(gate.GateFailed) as err:
        gate.run_gate(None, params(timeout=0.1), False, str(tmp_path), clock, clock.sleep, runner=runner)
    assert err.value.result['holders'] == [dict(gpu=0, pid=4242, used_mib=81920, container=None, state=None)]


def test_nvml_backend(monkeypatch):
    clock = Clock()
    used = [7 * MIB]
    nvml = FakeNvml(used)
    monkeypatch.setitem(sys.modules, 'pynvml', nvml)
    module = Smi(clock)

    def free(seconds):
        Clock.sleep(clock, seconds)
        used[0] = 0
    clock.sleep = free
    res = run(module, clock, backend='nvml')
    assert res['passed'] and res['polls'] == 2 and res['backend'] == 'nvml'
    assert module.calls == [] and nvml.calls == ['init', 'shutdown']


def test_nvml_backend_refusals(monkeypatch):
    clock = Clock()
    monkeypatch.setitem(sys.modules, 'pynvml', None)  # import fails
    with pytest.raises(gate.GateFailed, match='needs nvidia-ml-py'):
        run(Smi(clock), clock, backend='nvml')
    monkeypatch.setitem(sys.modules, 'pynvml', FakeNvml([0]))
    with pytest.raises(gate.GateFailed, match='reads this host only'):
        run(Smi(clock), clock, backend='nvml', target='pct', vmid=101)
    monkeypatch.setitem(sys.modules, 'pynvml', FakeNvml([0], fail='init'))
    with pytest.raises(gate.GateFailed, match='version mismatch'):
        run(Smi(clock), clock, backend='nvml')


@pytest.mark.parametrize('text, where', [
    ('0::/lxc/105/ns/system.slice/sglang.service\n', 'CT 105'),
    ('0::/lxc/105\n', 'CT 105'),
    ('0::/lxc.payload.101/init.scope\n', 'CT 101'),
    ('0::/lxc.payload/101/init.scope\n', 'CT 101'),
    ('0::/lxc.monitor.101\n', 'the LXC monitor of CT 101'),
    ('0::/system.slice/nvidia-persistenced.service\n', 'the host'),
    ('0::/user.slice/lxcfs.service\n', 'the host'),
])
def test_container_of(tmp_path, text, where):
    (tmp_path / '7').mkdir()
    (tmp_path / '7' / 'cgroup').write_text(text)
    assert gate.container_of(7, str(tmp_path)) == where
    assert gate.container_of(8, str(tmp_path)) is None


OTHER = 'GPU-00000001-aaaa-bbbb-cccc-dddddddddddd'
# the defaults read this process's own /proc/PID/cgroup (Linux)
LINUX_PROC = pytest.mark.skipif(not os.path.exists('/proc/self/cgroup'), reason='needs /proc/PID/cgroup')


def test_gate_failed_defaults():
    err = gate.GateFailed('m', dict(passed=False))
    assert str(err) == 'm' and err.msg == 'm' and err.result == dict(passed=False) and err.read_error is False
    assert gate.GateFailed('m', {}, read_error=True).read_error is True


def reads(*used_lists, clock=None, cost=0.0):
    """A read() for poll: each call returns the next list of used MiB (GPU i = index i); the last one repeats."""
    seq = list(used_lists)

    def read():
        if clock is not None:
            clock.now += cost
        used = seq.pop(0) if len(seq) > 1 else seq[0]
        gpus = [dict(index=i, uuid='GPU-%d' % i, used_mib=u, total_mib=100) for i, u in enumerate(used)]
        return gpus, 'raw %s' % (used,)
    return read


def test_poll_result_exact_on_first_read():
    clock = Clock()
    res = gate.poll(reads([0, 3]), 3, 30.0, 0.05, clock, clock.sleep)
    assert res == dict(gpus=[dict(index=0, uuid='GPU-0', used_mib=0, total_mib=100),
                             dict(index=1, uuid='GPU-1', used_mib=3, total_mib=100)],
                       polls=1, elapsed_s=0.0, passed=True, raw='raw [0, 3]', over=[], clear_at_s={0: 0.0, 1: 0.0})
    assert clock.slept == []


def test_poll_stops_exactly_at_the_deadline():
    # reads take no time: reads at 0, 0.4, 0.8, then a short sleep to 1.0 and the last read at exactly the timeout
    clock = Clock()
    calls = []

    def read():
        calls.append(clock.now)
        assert len(calls) <= 5, 'polled past the deadline'
        return reads([7])()

    res = gate.poll(read, 5, 1.0, 0.4, clock, clock.sleep)
    assert clock.slept == [0.4, 0.4, pytest.approx(0.2)]
    assert res['polls'] == 4 and res['passed'] is False and res['elapsed_s'] == pytest.approx(1.0)
    assert res['over'] == [dict(index=0, uuid='GPU-0', used_mib=7, total_mib=100)] and res['clear_at_s'] == {}


def test_poll_rounds_to_four_places_and_measures_from_start():
    clock = Clock()
    res = gate.poll(reads([9], [1], [0], clock=clock, cost=0.123456), 0, 10.0, 0.5, clock, clock.sleep)
    # reads end at 0.123456, 0.746912, 1.370368 s after the start
    assert res['polls'] == 3 and res['passed'] is True
    assert res['elapsed_s'] == 1.3704 and res['clear_at_s'] == {0: 1.3704}
    assert clock.slept == [0.5, 0.5]


def test_poll_limit_is_inclusive_for_clear_at():
    clock = Clock()
    res = gate.poll(reads([5, 6], [5, 5]), 5, 10.0, 1.0, clock, clock.sleep)
    assert res['polls'] == 2 and res['passed'] and res['clear_at_s'] == {0: 0.0, 1: 1.0}


def test_poll_max_polls_and_unbounded():
    clock = Clock()
    res = gate.poll(reads([1]), 0, 10.0, 1.0, clock, clock.sleep, max_polls=3)
    assert res['polls'] == 3 and not res['passed'] and clock.slept == [1.0, 1.0]
    clock = Clock()
    res = gate.poll(reads([1], [1], [1], [1], [0]), 0, 100.0, 1.0, clock, clock.sleep)
    assert res['polls'] == 5 and res['passed'] and res['elapsed_s'] == 4.0


def test_poll_defaults_to_real_time():
    res = gate.poll(reads([1], [0]), 0, 5.0, 0.001)
    assert res['passed'] and res['polls'] == 2
    assert 0.001 <= res['elapsed_s'] < 5.0


def test_container_of_matches_only_the_path_field(tmp_path):
    # the path is everything after the second colon, colons and spaces included
    for pid, text in [(1, '0::/lxc/105/ns/a:b\n'), (2, '0::/lxc/106/ns/my unit\n'),
                      (3, '3:cpu,cpuacct:/user.slice\n1:name=systemd:/lxc/107/ns/init.scope\n'),
                      (4, '\n0::/lxc.payload.web/x\n')]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / 'cgroup').write_text(text)
    assert gate.container_of(1, str(tmp_path)) == 'CT 105'
    assert gate.container_of(2, str(tmp_path)) == 'CT 106'
    assert gate.container_of(3, str(tmp_path)) == 'CT 107'
    assert gate.container_of(4, str(tmp_path)) == 'CT web'


@LINUX_PROC
def test_container_of_reads_proc_by_default():
    where = gate.container_of(os.getpid(), '/proc')
    assert where is not None and gate.container_of(os.getpid()) == where


@pytest.mark.parametrize('holder, text', [
    (dict(pid=5, container=None), 'pid 5 (container unknown)'),
    (dict(pid=6, container='the host'), 'pid 6 on the host'),
    (dict(pid=7, container='CT 105'), 'pid 7 in CT 105'),
])
def test_describe(holder, text):
    assert gate.describe(holder) == text


class Apps:
    def __init__(self, apps):
        self.listed = apps

    def apps(self):
        return self.listed


def test_name_holders_local_and_remote(tmp_path):
    (tmp_path / '11').mkdir()
    (tmp_path / '11' / 'cgroup').write_text('0::/lxc/105/ns/init.scope\n')
    over = [dict(index=2, uuid=UUID, used_mib=9, total_mib=10), dict(index=5, uuid=OTHER, used_mib=9, total_mib=10)]
    reader = Apps([dict(uuid=UUID, pid=11, used_mib=7), dict(uuid='GPU-free', pid=12, used_mib=1),
                   dict(uuid=OTHER, pid=13, used_mib=None)])
    assert gate.name_holders(reader, over, True, str(tmp_path)) == [
        dict(gpu=2, pid=11, used_mib=7, container='CT 105', state=None),
        dict(gpu=5, pid=13, used_mib=None, container=None, state=None)]
    assert gate.name_holders(reader, over, False, str(tmp_path)) == [
        dict(gpu=2, pid=11, used_mib=7, container=None, state=None),
        dict(gpu=5, pid=13, used_mib=None, container=None, state=None)]


@LINUX_PROC
def test_name_holders_reads_proc_by_default():
    over = [dict(index=0, uuid=UUID, used_mib=9, total_mib=10)]
    holders = gate.name_holders(Apps([dict(uuid=UUID, pid=os.getpid(), used_mib=1)]), over, True)
    where = gate.container_of(os.getpid(), '/proc')
    assert where is not None and holders[0]['container'] == where


def test_failure_message_two_gpus():
    over = [dict(index=0, used_mib=10), dict(index=3, used_mib=20)]
    holders = [dict(gpu=3, pid=1, container='the host'), dict(gpu=3, pid=2, container=None)]
    assert gate.failure_message(over, 4, holders) == (
        'GPU 0 still holds 10 MiB (limit 4): no compute process listed; '
        'GPU 3 still holds 20 MiB (limit 4): pid 1 on the host, pid 2 (container unknown)')


def test_make_reader_nvidia_smi_uses_params():
    module = Smi(Clock())
    reader = gate.make_reader(params(nvidia_smi='/opt/smi', nvidia_smi_timeout=3.0), Runner(module))
    assert isinstance(reader, SmiReader)
    reader.read()
    assert module.calls[0][:4] == ['/usr/bin/timeout', '--kill-after=1', '3s', '/opt/smi']


def test_make_reader_nvml_refusal_exact(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pynvml', FakeNvml([0]))
    with pytest.raises(SmiError) as exc:
        gate.make_reader(params(backend='nvml'), Runner(Smi(Clock()), 'lxc', container_name='ct-a'))
    assert exc.value.msg == 'backend=nvml reads this host only: use backend=nvidia-smi with target=lxc'
    monkeypatch.setitem(sys.modules, 'pynvml', None)
    with pytest.raises(SmiError) as exc:
        gate.make_reader(params(backend='nvml'), Runner(Smi(Clock())))
    assert exc.value.msg == ('backend=nvml needs nvidia-ml-py importable by the module interpreter; install it or use '
                             'backend=nvidia-smi')


def test_run_gate_defaults_real_clock_and_proc():
    module = Smi(Clock())
    res = gate.run_gate(module, params())
    assert res['passed'] is True and res['polls'] == 1 and 0 <= res['elapsed_s'] < 5
    assert set(res) == {'backend', 'max_used_mib', 'polls', 'passed', 'gpus', 'elapsed_s', 'raw', 'clear_at_s'}
    assert res['backend'] == 'nvidia-smi' and res['max_used_mib'] == 0


@LINUX_PROC
def test_run_gate_default_is_not_check_mode_and_names_holders_from_proc():
    module = Smi(Clock(), used=lambda t: 5, apps='%s, %d, 5\n' % (UUID, os.getpid()))
    with pytest.raises(gate.GateFailed) as exc:
        gate.run_gate(module, params(timeout=0.02, poll_interval=0.01))
    assert exc.value.msg.startswith('gate timed out after ')
    where = gate.container_of(os.getpid(), '/proc')
    assert exc.value.result['holders'] == [dict(gpu=0, pid=os.getpid(), used_mib=5, container=where,
                                                state=gate.state_of(os.getpid()))]
    assert ('GPU 0 still holds 5 MiB (limit 0): ' + gate.describe(exc.value.result['holders'][0])) in exc.value.msg


def test_run_gate_failure_result_and_exact_message():
    clock = Clock(cost=0.25)
    module = Smi(clock, used=lambda t: 12, apps='%s, 4242, 12\n' % UUID)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, target='pct', vmid=105, max_used_mib=2, timeout=0.6, poll_interval=0.2)
    # reads end at 0.25, 0.7 (after 0.2 sleep): past 0.6
    assert exc.value.msg == 'gate timed out after 2 poll(s) in 0.70 s: GPU 0 still holds 12 MiB (limit 2): pid 4242 (container unknown)'
    assert exc.value.read_error is False
    result = exc.value.result
    assert result == dict(backend='nvidia-smi', max_used_mib=2, polls=2, passed=False, elapsed_s=0.7, raw=four_fields(12),
                          gpus=[dict(index=0, uuid=UUID, used_mib=12, total_mib=143771)], clear_at_s={},
                          holders=[dict(gpu=0, pid=4242, used_mib=12, container=None, state=None)])
    assert module.calls[-1][3:] == ['/usr/bin/pct', 'exec', '105', '--', 'nvidia-smi',
                                    '--query-compute-apps=gpu_uuid,pid,used_memory', '--format=csv,noheader,nounits']


def test_run_gate_check_mode_exact_message():
    clock = Clock(cost=0.5)
    module = Smi(clock, used=lambda t: 3)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, check=True, timeout=30.0)
    assert exc.value.msg == ('gate read once (check mode) after 1 poll(s) in 0.50 s: GPU 0 still holds 3 MiB (limit 0): '
                             'no compute process listed. ' + gate.ORPHAN_ADVICE)
    assert clock.slept == []


def test_run_gate_name_holders_off_reads_no_apps():
    clock = Clock()
    module = Smi(clock, used=lambda t: 3, apps='%s, 1, 3\n' % UUID)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, timeout=0.01, name_holders=False)
    assert exc.value.result['holders'] == []
    assert 'no compute process listed' in exc.value.msg
    assert not any('--query-compute-apps' in a for argv in module.calls for a in argv)


class AppsFail(Smi):
    def run_command(self, argv, **kwargs):
        if any(a.startswith('--query-compute-apps') for a in argv):
            self.calls.append(argv)
            return 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", ''
        return super().run_command(argv, **kwargs)


def test_run_gate_holders_unknown_note():
    clock = Clock()
    module = AppsFail(clock, used=lambda t: 3)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, timeout=0.01)
    assert exc.value.read_error is False and exc.value.result['holders'] == []
    assert exc.value.msg.endswith(
        ': GPU 0 still holds 3 MiB (limit 0): no compute process listed (holders unknown: nvidia-smi --query-compute-apps '
        'failed (rc 9): nvidia-smi cannot reach the driver: check that the nvidia kernel module is loaded (lsmod, dmesg for '
        'Xid errors) and, in a container, that /dev/nvidia* are passed through; output: NVIDIA-SMI has failed because it '
        "couldn't communicate with the NVIDIA driver.)")


def test_run_gate_read_error_result_exact():
    clock = Clock()
    module = Smi(clock, answers=[(0, four_fields('[N/A]'), 'warn')])
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, max_used_mib=7)
    assert exc.value.read_error is True
    assert exc.value.msg.startswith("unparseable nvidia-smi line '0, %s, [N/A], 143771': memory.used is [N/A]" % UUID)
    assert exc.value.result == dict(
        backend='nvidia-smi', max_used_mib=7, polls=0, passed=False, raw=four_fields('[N/A]'), rc=0, stderr='warn',
        cmd='/usr/bin/timeout --kill-after=1 10s nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits')


def test_run_gate_nvml_names_holders_through_nvidia_smi(monkeypatch, tmp_path):
    (tmp_path / '4242').mkdir()
    (tmp_path / '4242' / 'cgroup').write_text('0::/lxc/105/ns/init.scope\n')
    nvml = FakeNvml([9 * MIB])
    monkeypatch.setitem(sys.modules, 'pynvml', nvml)
    nvml_uuid = 'GPU-00000000-0000-0000-0000-000000000000'
    clock = Clock()
    module = Smi(clock, apps='%s, 4242, 9\n' % nvml_uuid)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, proc_root=str(tmp_path), backend='nvml', nvidia_smi='/opt/smi', nvidia_smi_timeout=2.0, timeout=0.0)
    assert exc.value.result['holders'] == [dict(gpu=0, pid=4242, used_mib=9, container='CT 105', state=None)]
    assert 'GPU 0 still holds 9 MiB (limit 0): pid 4242 in CT 105' in exc.value.msg
    assert module.calls == [['/usr/bin/timeout', '--kill-after=1', '2s', '/opt/smi',
                             '--query-compute-apps=gpu_uuid,pid,used_memory', '--format=csv,noheader,nounits']]
    assert nvml.calls == ['init', 'shutdown']


def test_run_gate_closes_the_reader_on_a_read_error(monkeypatch):
    nvml = FakeNvml([])
    monkeypatch.setitem(sys.modules, 'pynvml', nvml)
    clock = Clock()
    with pytest.raises(gate.GateFailed, match='listed no GPU at all') as exc:
        run(Smi(clock), clock, backend='nvml')
    assert exc.value.read_error and exc.value.result['backend'] == 'nvml'
    assert nvml.calls == ['init', 'shutdown']


def test_run_gate_selection_error_keeps_the_raw_read():
    clock = Clock()
    module = Smi(clock, answers=[(0, four_fields(0), '')])
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, gpus=[0, 2])
    assert exc.value.read_error is True
    assert exc.value.msg.startswith('GPU index(es) [2] not listed by nvidia-smi (it lists [0])')
    assert exc.value.result['raw'] == four_fields(0) and exc.value.result['polls'] == 0


# ------------------------------------------------------------------ stuck memory: state D, memory with no process

def write_stat(root, pid, comm, state):
    (root / str(pid)).mkdir()
    (root / str(pid) / 'stat').write_text('%d (%s) %s 1 %d %d 0 -1 4194560 0 0 0 0\n' % (pid, comm, state, pid, pid))


def test_state_of_reads_the_letter_after_the_last_parenthesis(tmp_path):
    write_stat(tmp_path, 21, 'sglang::scheduler_TP0', 'D')
    write_stat(tmp_path, 22, 'odd) S (name', 'R')
    (tmp_path / '23').mkdir()
    (tmp_path / '23' / 'stat').write_text('23 (empty)')
    assert gate.state_of(21, str(tmp_path)) == 'D'
    assert gate.state_of(22, str(tmp_path)) == 'R'
    assert gate.state_of(23, str(tmp_path)) is None
    assert gate.state_of(24, str(tmp_path)) is None  # gone


@LINUX_PROC
def test_state_of_reads_proc_by_default():
    assert gate.state_of(os.getpid()) in ('R', 'S')


def test_describe_names_state_d_only():
    assert gate.describe(dict(pid=5, container='CT 105', state='D')) == 'pid 5 in CT 105 in state D'
    assert gate.describe(dict(pid=5, container=None, state='D')) == 'pid 5 (container unknown) in state D'
    assert gate.describe(dict(pid=5, container='CT 105', state='S')) == 'pid 5 in CT 105'
    assert gate.describe(dict(pid=5, container='CT 105')) == 'pid 5 in CT 105'


def test_name_holders_reads_the_state_only_where_proc_is_this_hosts(tmp_path):
    write_stat(tmp_path, 11, 'sglang::scheduler_TP0', 'D')
    over = [dict(index=2, uuid=UUID, used_mib=9, total_mib=10)]
    reader = Apps([dict(uuid=UUID, pid=11, used_mib=7)])
    assert gate.name_holders(reader, over, True, str(tmp_path))[0]['state'] == 'D'
    assert gate.name_holders(reader, over, False, str(tmp_path))[0]['state'] is None


@pytest.mark.parametrize('holders, expected', [
    ([dict(gpu=0, pid=1, state='S'), dict(gpu=3, pid=2, state=None)], ''),
    ([dict(gpu=0, pid=1, state='D'), dict(gpu=3, pid=2, state='S')], '. ' + gate.STUCK_ADVICE),
    ([dict(gpu=0, pid=1, state='S')], '. ' + gate.ORPHAN_ADVICE),
    ([dict(gpu=3, pid=2, state='D')], '. ' + gate.STUCK_ADVICE + '. ' + gate.ORPHAN_ADVICE),
    ([], '. ' + gate.ORPHAN_ADVICE),
])
def test_advice_for_state_d_and_for_memory_no_process_holds(holders, expected):
    assert gate.advice([dict(index=0, used_mib=10), dict(index=3, used_mib=20)], holders) == expected


def test_advice_texts_say_what_to_do():
    assert 'tens of seconds' in gate.STUCK_ADVICE and 'raise the gate timeout' in gate.STUCK_ADVICE
    assert 'dmesg' in gate.STUCK_ADVICE and 'nvidia-smi -r' in gate.STUCK_ADVICE
    assert 'after its process exited' in gate.ORPHAN_ADVICE and 'raise the gate timeout' in gate.ORPHAN_ADVICE


def test_run_gate_names_a_holder_in_state_d_and_says_what_to_do(tmp_path):
    write_stat(tmp_path, 4242, 'sglang::scheduler_TP0', 'D')
    clock = Clock()
    module = Smi(clock, used=lambda t: 12, apps='%s, 4242, 12\n' % UUID)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, proc_root=str(tmp_path), timeout=0.01)
    assert exc.value.result['holders'] == [dict(gpu=0, pid=4242, used_mib=12, container=None, state='D')]
    assert exc.value.msg.endswith('GPU 0 still holds 12 MiB (limit 0): pid 4242 (container unknown) in state D. '
                                  + gate.STUCK_ADVICE)


def test_run_gate_gives_no_advice_when_holders_were_not_read():
    clock = Clock()
    module = AppsFail(clock, used=lambda t: 3)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, timeout=0.01)
    assert gate.ORPHAN_ADVICE not in exc.value.msg
    module = Smi(clock, used=lambda t: 3)
    with pytest.raises(gate.GateFailed) as exc:
        run(module, clock, timeout=0.01, name_holders=False)
    assert gate.ORPHAN_ADVICE not in exc.value.msg and exc.value.msg.endswith('no compute process listed')


# The gate by device minor (option minors): a container's /dev/nvidiaN are found in nvidia-smi's list by UUID

# Four GPUs in PCI order (nvidia-smi's index = position on the bus); the driver gave them minors 2, 3, 0, 1.
MINOR_HOST = [  # (index, uuid, bus id, minor)
    (0, 'GPU-00000000-0000-4000-8000-00000000000a', '0000:18:00.0', 2),
    (1, 'GPU-00000000-0000-4000-8000-00000000000b', '0000:2a:00.0', 3),
    (2, 'GPU-00000000-0000-4000-8000-00000000000c', '0000:3a:00.0', 0),
    (3, 'GPU-00000000-0000-4000-8000-00000000000d', '0000:5d:00.0', 1),
]


@pytest.fixture
def info_root(tmp_path):
    root = tmp_path / 'gpus'
    for _index, uuid, bus, minor in MINOR_HOST:
        (root / bus).mkdir(parents=True)
        (root / bus / 'information').write_text(info_text(minor, uuid, bus))
    return str(root)


class MinorHost:
    """nvidia-smi on that host: memory.used per index; answers the gate's two queries."""

    def __init__(self, clock, used, listed=None):
        self.clock, self.used, self.listed, self.calls = clock, used, MINOR_HOST if listed is None else listed, []

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def gpu_lines(self):
        return ''.join('%d, %s, %d, 143771\n' % (index, uuid, self.used.get(index, 0))
                       for index, uuid, _b, _m in self.listed)

    def run_command(self, argv, **kwargs):
        self.calls.append(argv)
        self.clock.now += self.clock.cost
        if any(a.startswith('--query-compute-apps') for a in argv):
            return 0, ''.join('%s, %d, %d\n' % (uuid, 4000 + index, self.used[index])
                              for index, uuid, _b, _m in self.listed if self.used.get(index)), ''
        return 0, self.gpu_lines(), ''


def run_minors(module, clock, **kw):
    return gate.run_gate(module, params(**kw), False, '/nonexistent', clock, clock.sleep)


def test_the_gate_watches_the_gpus_behind_the_minors_not_the_same_indexes(info_root):
    # /dev/nvidia0 and /dev/nvidia1 are GPUs 2 and 3; GPUs 0 and 1 (another container's) are busy
    clock = Clock()
    module = MinorHost(clock, used={0: 80000, 1: 80000})
    res = run_minors(module, clock, minors=[0, 1], gpu_info_root=info_root, timeout=1.0)
    assert res['passed'] and res['polls'] == 1
    assert [(g['index'], g['minor'], g['used_mib']) for g in res['gpus']] == [(2, 0, 0), (3, 1, 0)]


def test_the_gate_waits_for_its_own_gpus_and_names_them_by_index(info_root):
    # minor 2 is GPU 0: held, so the gate for minors 2 and 3 fails, naming GPU 0 and its holder
    clock = Clock()
    module = MinorHost(clock, used={0: 80000})
    with pytest.raises(gate.GateFailed, match=r'GPU 0 still holds 80000 MiB \(limit 0\): pid 4000') as exc:
        run_minors(module, clock, minors=[3, 2], gpu_info_root=info_root, timeout=0.2, poll_interval=0.05)
    result = exc.value.result
    assert not exc.value.read_error and result['polls'] > 1
    assert [(g['index'], g['minor']) for g in result['gpus']] == [(0, 2), (1, 3)]


def test_minors_count_every_gpu_for_expected_count(info_root):
    clock = Clock()
    module = MinorHost(clock, used={})
    assert run_minors(module, clock, minors=[0], gpu_info_root=info_root, expected_count=4)['passed']
    with pytest.raises(gate.GateFailed, match=r'^nvidia-smi lists 4 GPU\(s\), 8 expected: ') as exc:
        run_minors(module, clock, minors=[0], gpu_info_root=info_root, expected_count=8)
    assert exc.value.read_error and exc.value.result['raw'] == module.gpu_lines()


@pytest.mark.parametrize('kw, says', [
    (dict(minors=[0], gpus=[2]), 'give the GPUs to check as minors or as gpus (indexes), not both'),
    (dict(minors=[0], target='pct', vmid=101),
     'minors are read from {root} on this host: use target=local (the PVE host) with minors, not target=pct'),
    (dict(minors=[0, 7, 9]), 'cannot map device minors to GPUs: no GPU has device minor 7, 9 (known: 0, 1, 2, 3)'),
])
def test_a_selection_that_cannot_be_made_fails_before_any_read(info_root, kw, says):
    clock = Clock()
    module = MinorHost(clock, used={})
    with pytest.raises(gate.GateFailed, match=exactly(says.format(root=info_root))) as exc:
        run_minors(module, clock, gpu_info_root=info_root, **kw)
    assert exc.value.read_error and module.calls == []


def test_no_driver_information_fails_closed(tmp_path):
    clock = Clock()
    module = MinorHost(clock, used={})
    absent = str(tmp_path / 'absent')
    with pytest.raises(gate.GateFailed, match=exactly('cannot map device minors to GPUs: cannot list %s (No such file '
                                                      'or directory): is the nvidia kernel module loaded?' % absent)):
        run_minors(module, clock, minors=[0], gpu_info_root=absent)
    assert module.calls == []


def test_a_gpu_the_driver_lists_and_nvidia_smi_does_not_fails_closed(info_root):
    # GPU 3 (minor 1) fell out of nvidia-smi's list: it must not read as free
    clock = Clock()
    module = MinorHost(clock, used={}, listed=MINOR_HOST[:3])
    with pytest.raises(gate.GateFailed, match=exactly(
            'nvidia-smi does not list the GPU(s) behind device minor(s) [1] (the driver does): check `nvidia-smi -L` '
            'and %s' % info_root)) as exc:
        run_minors(module, clock, minors=[0, 1], gpu_info_root=info_root)
    assert exc.value.read_error and exc.value.result['raw'] == module.gpu_lines()


def test_without_minors_the_information_is_not_read(tmp_path):
    clock = Clock()
    module = MinorHost(clock, used={0: 5})
    res = run_minors(module, clock, gpus=[2, 3], gpu_info_root=str(tmp_path / 'absent'))
    assert res['passed'] and [g['index'] for g in res['gpus']] == [2, 3]
    assert 'minor' not in res['gpus'][0]


# The gate's health stage (_gate.run_gate with the option health): before the memory poll, refusing a GPU that

HEALTHY = health_capture('health_csv_noheader')
MEMORY = '0, %s, 0, 143771\n' % HEALTH_UUID


class HealthHost:
    """A PVE host with the captured H200: answers the health query, dmesg and the memory query."""

    def __init__(self, health=HEALTHY, dmesg=(0, health_capture('dmesg_xid'), ''), memory=MEMORY):
        self.health, self.dmesg, self.memory, self.calls, self.warnings = health, dmesg, memory, [], []

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def warn(self, text):
        self.warnings.append(text)

    def run_command(self, argv, **kwargs):
        argv = argv[3:]  # timeout --kill-after=1 Ns
        self.calls.append(argv[0] if argv[0] != 'nvidia-smi' else argv[1].split('=')[0] + (
            '=health' if 'pcie' in argv[1] else ''))
        if argv[0].endswith('dmesg'):
            return self.dmesg
        if 'pcie.link.gen.current' in argv[1]:
            return 0, self.health, ''
        return 0, self.memory, ''


def run_health(host, proc_root='/nonexistent', check=False, **kw):
    params = dict((k, v.get('default')) for k, v in GATE_ARGS.items())
    params.update(target='local', vmid=None, container_name=None, gpu_info_root='/nonexistent', timeout=0)
    params.update(kw)
    return gate.run_gate(host, params, check, proc_root, lambda: 0.0, lambda s: None)


def test_off_unless_asked_the_gate_reads_memory_only():
    host = HealthHost()
    res = run_health(host)
    assert res['passed'] and 'health' not in res and host.calls == ['--query-gpu']


def test_a_healthy_gpu_passes_health_then_memory_in_that_order():
    host = HealthHost()
    res = run_health(host, health={})
    assert res['passed'] and res['health']['passed'] and res['health']['findings'] == []
    assert host.calls == ['--query-gpu=health', 'dmesg', '--query-gpu']
    assert res['health']['kernel_log'] == 'read' and res['health']['gpus'][0]['uuid'] == HEALTH_UUID
    assert res['health']['checks'] == dict((c, a) for c, a in gate.health.DEFAULT_ACTIONS.items())


@pytest.mark.parametrize('host, check', [
    (HealthHost(dmesg=(0, XID79, '')), 'xid'),
    (HealthHost(health=with_field('remapped_rows.pending', 'Yes')), 'row_remap'),
    (HealthHost(health=with_field('remapped_rows.failure', 'Yes')), 'row_remap'),
    (HealthHost(health=with_field('ecc.errors.uncorrected.volatile.total', '2')), 'ecc'),
    (HealthHost(dmesg=(1, '', 'dmesg: read kernel buffer failed: Operation not permitted')), 'xid'),
])
def test_each_refusal_class_fails_before_any_memory_poll(host, check):
    with pytest.raises(gate.GateFailed) as err:
        run_health(host, health={})
    assert err.value.health_refused and not err.value.read_error
    assert '--query-gpu' not in host.calls  # the memory poll never ran
    assert err.value.msg.startswith('GPU health: not starting on a GPU that cannot serve')
    assert 'GPU 0 (bus 0000:00:06.0): %s' % check in err.value.msg
    assert err.value.result['health']['refused'] and not err.value.result['passed']


def test_a_missing_gpu_is_refused_by_the_health_stage():
    with pytest.raises(gate.GateFailed) as err:
        run_health(HealthHost(), health={}, expected_count=8)
    assert 'host: missing: nvidia-smi lists 1 GPU(s), 8 expected' in err.value.msg
    with pytest.raises(gate.GateFailed, match='GPU index 3 is not listed'):
        run_health(HealthHost(), health={}, gpus=[0, 3])


def test_what_only_slows_warns_through_the_module_and_passes():
    host = HealthHost(health=with_field('pcie.link.width.current', '8'), dmesg=(0, XID13_OTHER_GPU, ''))
    res = run_health(host, health={})
    assert res['passed'] and len(res['health']['warnings']) == 1
    assert host.warnings == ['GPU health: ' + res['health']['warnings'][0]]
    assert 'pcie_link: Gen 5 x8 (max Gen 5 x16)' in host.warnings[0]


def test_a_check_set_to_refuse_or_ignore_follows_the_option():
    with pytest.raises(gate.GateFailed, match='pcie_link'):
        run_health(HealthHost(health=with_field('pcie.link.gen.current', '4')), health={'pcie_link': 'refuse'})
    host = HealthHost(dmesg=(0, XID79, ''))
    assert run_health(host, health={'xid': 'ignore', 'xid_other': 'ignore'})['passed']
    assert 'dmesg' not in host.calls  # nothing asks the kernel log


def test_memory_false_reads_health_only():
    host = HealthHost()
    res = run_health(host, health={}, memory=False)
    assert res['passed'] and host.calls == ['--query-gpu=health', 'dmesg']


def test_xid_since_places_the_kernel_log_stamps_with_the_boot_time(tmp_path):
    (tmp_path / 'stat').write_text('cpu  1 2 3\nbtime 1764740000\nprocesses 9\n')
    host = HealthHost(dmesg=(0, XID79, ''))  # Xid 79 at 8123.0 s after boot
    res = run_health(host, proc_root=str(tmp_path), health={}, xid_since=1764740000 + 8200)
    assert res['passed'] and res['health']['xid_since_boot_s'] == 8200
    with pytest.raises(gate.GateFailed, match='since 8000.0 s after boot'):
        run_health(HealthHost(dmesg=(0, XID79, '')), proc_root=str(tmp_path), health={}, xid_since=1764740000 + 8000)
    with pytest.raises(gate.GateFailed, match='since boot'):  # no boot time read: since boot
        run_health(HealthHost(dmesg=(0, XID79, '')), health={}, xid_since=1764740000 + 8200)


def test_the_minor_comes_from_the_driver_list_on_the_host(tmp_path):
    info = tmp_path / '0000:00:06.0'
    info.mkdir()
    (info / 'information').write_text('GPU UUID: \t %s\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 3\n' % HEALTH_UUID)
    with pytest.raises(gate.GateFailed, match=r'GPU 0 \(bus 0000:00:06.0, /dev/nvidia3\): ecc'):
        run_health(HealthHost(health=with_field('ecc.errors.uncorrected.volatile.total', '1')), health={},
                   gpu_info_root=str(tmp_path), minors=[3])


def test_a_bad_health_option_fails_as_a_read_error():
    with pytest.raises(gate.GateFailed, match='no check') as err:
        run_health(HealthHost(), health={'xids': 'refuse'})
    assert err.value.read_error


def test_boot_time_reads_this_hosts_proc_stat_by_default():
    with open('/proc/stat') as f:
        btime = next(float(line.split()[1]) for line in f if line.startswith('btime '))
    assert gate.boot_time() == btime


def test_gpus_missing_behind_minors_are_named_in_minor_order():
    params = dict(expected_count=None, gpus=[])
    assert gate.health_missing([], params, {'GPU-a': 5, 'GPU-b': 2}) == [
        'the GPU behind /dev/nvidia2 (GPU-b) is not listed', 'the GPU behind /dev/nvidia5 (GPU-a) is not listed']


def test_the_stage_places_xid_since_on_this_hosts_boot_and_returns_the_raw_reading():
    """health_stage on its own, with its default proc_root (this host's /proc) and a local runner."""
    from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner
    host = HealthHost(dmesg=(0, XID79, ''))
    params = dict((k, v.get('default')) for k, v in GATE_ARGS.items())
    params.update(target='local', vmid=None, container_name=None, gpu_info_root='/nonexistent',
                  xid_since=gate.boot_time() + 100)
    res = gate.health_stage(params, Runner.from_params(host, params), None, gate.health.actions_of({}))
    assert res['xid_since_boot_s'] == 100 and res['raw'] == HEALTHY
    assert not res['passed'] and 'xid' in res['refused'][0]  # Xid 79 at 8123 s is after 100 s


def test_a_gpu_behind_a_selected_minor_that_nvidia_smi_does_not_list_is_missing(tmp_path):
    info = tmp_path / '0000:00:07.0'
    info.mkdir()
    unlisted = 'GPU-00000000-0000-0000-0000-000000000004'
    (info / 'information').write_text('GPU UUID: \t %s\nBus Location: \t 0000:00:07.0\nDevice Minor: \t 4\n' % unlisted)
    with pytest.raises(gate.GateFailed) as err:
        run_health(HealthHost(), health={}, gpu_info_root=str(tmp_path), minors=[4])
    assert err.value.health_refused and 'the GPU behind /dev/nvidia4 (%s) is not listed' % unlisted in err.value.msg
