"""The gate by device minor (option minors): a container's /dev/nvidiaN are found in nvidia-smi's list by UUID
through the driver's information files, on a host where minor and index differ, so the gate for one container
never waits on another container's GPUs."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate as gate

from ansible_collections.gpuserve.sglang.tests.support.gate import Clock, params
from ansible_collections.gpuserve.sglang.tests.support.gpu_map import exactly, info_text

# Four GPUs in PCI order (nvidia-smi's index = position on the bus); the driver gave them minors 2, 3, 0, 1.
HOST = [  # (index, uuid, bus id, minor)
    (0, 'GPU-00000000-0000-4000-8000-00000000000a', '0000:18:00.0', 2),
    (1, 'GPU-00000000-0000-4000-8000-00000000000b', '0000:2a:00.0', 3),
    (2, 'GPU-00000000-0000-4000-8000-00000000000c', '0000:3a:00.0', 0),
    (3, 'GPU-00000000-0000-4000-8000-00000000000d', '0000:5d:00.0', 1),
]


@pytest.fixture
def info_root(tmp_path):
    root = tmp_path / 'gpus'
    for _index, uuid, bus, minor in HOST:
        (root / bus).mkdir(parents=True)
        (root / bus / 'information').write_text(info_text(minor, uuid, bus))
    return str(root)


class Host:
    """nvidia-smi on that host: memory.used per index; answers the gate's two queries."""

    def __init__(self, clock, used, listed=None):
        self.clock, self.used, self.listed, self.calls = clock, used, HOST if listed is None else listed, []

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


def run(module, clock, **kw):
    return gate.run_gate(module, params(**kw), False, '/nonexistent', clock, clock.sleep)


def test_the_gate_watches_the_gpus_behind_the_minors_not_the_same_indexes(info_root):
    # /dev/nvidia0 and /dev/nvidia1 are GPUs 2 and 3; GPUs 0 and 1 (another container's) are busy
    clock = Clock()
    module = Host(clock, used={0: 80000, 1: 80000})
    res = run(module, clock, minors=[0, 1], gpu_info_root=info_root, timeout=1.0)
    assert res['passed'] and res['polls'] == 1
    assert [(g['index'], g['minor'], g['used_mib']) for g in res['gpus']] == [(2, 0, 0), (3, 1, 0)]


def test_the_gate_waits_for_its_own_gpus_and_names_them_by_index(info_root):
    # minor 2 is GPU 0: held, so the gate for minors 2 and 3 fails, naming GPU 0 and its holder
    clock = Clock()
    module = Host(clock, used={0: 80000})
    with pytest.raises(gate.GateFailed, match=r'GPU 0 still holds 80000 MiB \(limit 0\): pid 4000') as exc:
        run(module, clock, minors=[3, 2], gpu_info_root=info_root, timeout=0.2, poll_interval=0.05)
    result = exc.value.result
    assert not exc.value.read_error and result['polls'] > 1
    assert [(g['index'], g['minor']) for g in result['gpus']] == [(0, 2), (1, 3)]


def test_minors_count_every_gpu_for_expected_count(info_root):
    clock = Clock()
    module = Host(clock, used={})
    assert run(module, clock, minors=[0], gpu_info_root=info_root, expected_count=4)['passed']
    with pytest.raises(gate.GateFailed, match=r'^nvidia-smi lists 4 GPU\(s\), 8 expected: ') as exc:
        run(module, clock, minors=[0], gpu_info_root=info_root, expected_count=8)
    assert exc.value.read_error and exc.value.result['raw'] == module.gpu_lines()


@pytest.mark.parametrize('kw, says', [
    (dict(minors=[0], gpus=[2]), 'give the GPUs to check as minors or as gpus (indexes), not both'),
    (dict(minors=[0], target='pct', vmid=101),
     'minors are read from {root} on this host: use target=local (the PVE host) with minors, not target=pct'),
    (dict(minors=[0, 7, 9]), 'cannot map device minors to GPUs: no GPU has device minor 7, 9 (known: 0, 1, 2, 3)'),
])
def test_a_selection_that_cannot_be_made_fails_before_any_read(info_root, kw, says):
    clock = Clock()
    module = Host(clock, used={})
    with pytest.raises(gate.GateFailed, match=exactly(says.format(root=info_root))) as exc:
        run(module, clock, gpu_info_root=info_root, **kw)
    assert exc.value.read_error and module.calls == []


def test_no_driver_information_fails_closed(tmp_path):
    clock = Clock()
    module = Host(clock, used={})
    absent = str(tmp_path / 'absent')
    with pytest.raises(gate.GateFailed, match=exactly('cannot map device minors to GPUs: cannot list %s (No such file '
                                                      'or directory): is the nvidia kernel module loaded?' % absent)):
        run(module, clock, minors=[0], gpu_info_root=absent)
    assert module.calls == []


def test_a_gpu_the_driver_lists_and_nvidia_smi_does_not_fails_closed(info_root):
    # GPU 3 (minor 1) fell out of nvidia-smi's list: it must not read as free
    clock = Clock()
    module = Host(clock, used={}, listed=HOST[:3])
    with pytest.raises(gate.GateFailed, match=exactly(
            'nvidia-smi does not list the GPU(s) behind device minor(s) [1] (the driver does): check `nvidia-smi -L` '
            'and %s' % info_root)) as exc:
        run(module, clock, minors=[0, 1], gpu_info_root=info_root)
    assert exc.value.read_error and exc.value.result['raw'] == module.gpu_lines()


def test_without_minors_the_information_is_not_read(tmp_path):
    clock = Clock()
    module = Host(clock, used={0: 5})
    res = run(module, clock, gpus=[2, 3], gpu_info_root=str(tmp_path / 'absent'))
    assert res['passed'] and [g['index'] for g in res['gpus']] == [2, 3]
    assert 'minor' not in res['gpus'][0]
