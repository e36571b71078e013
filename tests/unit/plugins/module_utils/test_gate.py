"""The poll loop (fake clock), holder naming from /proc/PID/cgroup, and fail-closed reads through the runner."""
import os
import sys

import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate as gate
from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import MIB

from ansible_collections.gpuserve.sglang.tests.unit.plugins.module_utils.test_nvidia_smi import FIX, UUID, FakeNvml, capture, four_fields


class Clock:
    """time.monotonic and time.sleep on a fake timeline; each command also costs `cost` seconds."""

    def __init__(self, cost=0.02):
        self.now, self.cost, self.slept = 100.0, cost, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


class Smi:
    """A host with GPUs whose memory.used follows a function of fake time; answers the gate's two queries."""

    def __init__(self, clock, used=lambda t: 0, answers=None, apps=''):
        self.clock, self.used, self.answers, self.apps, self.calls = clock, used, answers, apps, []

    def get_bin_path(self, name, required=False):
        return '/usr/bin/' + name

    def run_command(self, argv, **kwargs):
        self.calls.append(argv)
        self.clock.now += self.clock.cost
        if any(a.startswith('--query-compute-apps') for a in argv):
            return 0, self.apps, ''
        if self.answers:
            return self.answers.pop(0)
        return 0, four_fields(self.used(self.clock.now - 100.0)), ''


def params(**kw):
    p = dict((k, v.get('default')) for k, v in GATE_ARGS.items())
    p.update(target='local', vmid=None, container_name=None)
    p.update(kw)
    return p


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
