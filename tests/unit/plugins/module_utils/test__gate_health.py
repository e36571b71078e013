"""The gate's health stage (_gate.run_gate with the option health): before the memory poll, refusing a GPU that
cannot serve with the GPU and the check named, warning on what only slows, reading nothing when it is off."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate as gate
from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS

from ansible_collections.gpuserve.sglang.tests.support.gpu_health import (
    UUID, XID13_OTHER_GPU, XID79, capture, with_field)

HEALTHY = capture('health_csv_noheader')
MEMORY = '0, %s, 0, 143771\n' % UUID


class Host:
    """A PVE host with the captured H200: answers the health query, dmesg and the memory query."""

    def __init__(self, health=HEALTHY, dmesg=(0, capture('dmesg_xid'), ''), memory=MEMORY):
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


def run(host, proc_root='/nonexistent', check=False, **kw):
    params = dict((k, v.get('default')) for k, v in GATE_ARGS.items())
    params.update(target='local', vmid=None, container_name=None, gpu_info_root='/nonexistent', timeout=0)
    params.update(kw)
    return gate.run_gate(host, params, check, proc_root, lambda: 0.0, lambda s: None)


def test_off_unless_asked_the_gate_reads_memory_only():
    host = Host()
    res = run(host)
    assert res['passed'] and 'health' not in res and host.calls == ['--query-gpu']


def test_a_healthy_gpu_passes_health_then_memory_in_that_order():
    host = Host()
    res = run(host, health={})
    assert res['passed'] and res['health']['passed'] and res['health']['findings'] == []
    assert host.calls == ['--query-gpu=health', 'dmesg', '--query-gpu']
    assert res['health']['kernel_log'] == 'read' and res['health']['gpus'][0]['uuid'] == UUID
    assert res['health']['checks'] == dict((c, a) for c, a in gate.health.DEFAULT_ACTIONS.items())


@pytest.mark.parametrize('host, check', [
    (Host(dmesg=(0, XID79, '')), 'xid'),
    (Host(health=with_field('remapped_rows.pending', 'Yes')), 'row_remap'),
    (Host(health=with_field('remapped_rows.failure', 'Yes')), 'row_remap'),
    (Host(health=with_field('ecc.errors.uncorrected.volatile.total', '2')), 'ecc'),
    (Host(dmesg=(1, '', 'dmesg: read kernel buffer failed: Operation not permitted')), 'xid'),
])
def test_each_refusal_class_fails_before_any_memory_poll(host, check):
    with pytest.raises(gate.GateFailed) as err:
        run(host, health={})
    assert err.value.health_refused and not err.value.read_error
    assert '--query-gpu' not in host.calls  # the memory poll never ran
    assert err.value.msg.startswith('GPU health: not starting on a GPU that cannot serve')
    assert 'GPU 0 (bus 0000:00:06.0): %s' % check in err.value.msg
    assert err.value.result['health']['refused'] and not err.value.result['passed']


def test_a_missing_gpu_is_refused_by_the_health_stage():
    with pytest.raises(gate.GateFailed) as err:
        run(Host(), health={}, expected_count=8)
    assert 'host: missing: nvidia-smi lists 1 GPU(s), 8 expected' in err.value.msg
    with pytest.raises(gate.GateFailed, match='GPU index 3 is not listed'):
        run(Host(), health={}, gpus=[0, 3])


def test_what_only_slows_warns_through_the_module_and_passes():
    host = Host(health=with_field('pcie.link.width.current', '8'), dmesg=(0, XID13_OTHER_GPU, ''))
    res = run(host, health={})
    assert res['passed'] and len(res['health']['warnings']) == 1
    assert host.warnings == ['GPU health: ' + res['health']['warnings'][0]]
    assert 'pcie_link: Gen 5 x8 (max Gen 5 x16)' in host.warnings[0]


def test_a_check_set_to_refuse_or_ignore_follows_the_option():
    with pytest.raises(gate.GateFailed, match='pcie_link'):
        run(Host(health=with_field('pcie.link.gen.current', '4')), health={'pcie_link': 'refuse'})
    host = Host(dmesg=(0, XID79, ''))
    assert run(host, health={'xid': 'ignore', 'xid_other': 'ignore'})['passed']
    assert 'dmesg' not in host.calls  # nothing asks the kernel log


def test_memory_false_reads_health_only():
    host = Host()
    res = run(host, health={}, memory=False)
    assert res['passed'] and host.calls == ['--query-gpu=health', 'dmesg']


def test_xid_since_places_the_kernel_log_stamps_with_the_boot_time(tmp_path):
    (tmp_path / 'stat').write_text('cpu  1 2 3\nbtime 1764740000\nprocesses 9\n')
    host = Host(dmesg=(0, XID79, ''))  # Xid 79 at 8123.0 s after boot
    res = run(host, proc_root=str(tmp_path), health={}, xid_since=1764740000 + 8200)
    assert res['passed'] and res['health']['xid_since_boot_s'] == 8200
    with pytest.raises(gate.GateFailed, match='since 8000.0 s after boot'):
        run(Host(dmesg=(0, XID79, '')), proc_root=str(tmp_path), health={}, xid_since=1764740000 + 8000)
    with pytest.raises(gate.GateFailed, match='since boot'):  # no boot time read: since boot
        run(Host(dmesg=(0, XID79, '')), health={}, xid_since=1764740000 + 8200)


def test_the_minor_comes_from_the_driver_list_on_the_host(tmp_path):
    info = tmp_path / '0000:00:06.0'
    info.mkdir()
    (info / 'information').write_text('GPU UUID: \t %s\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 3\n' % UUID)
    with pytest.raises(gate.GateFailed, match=r'GPU 0 \(bus 0000:00:06.0, /dev/nvidia3\): ecc'):
        run(Host(health=with_field('ecc.errors.uncorrected.volatile.total', '1')), health={},
            gpu_info_root=str(tmp_path), minors=[3])


def test_a_bad_health_option_fails_as_a_read_error():
    with pytest.raises(gate.GateFailed, match='no check') as err:
        run(Host(), health={'xids': 'refuse'})
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
    host = Host(dmesg=(0, XID79, ''))
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
        run(Host(), health={}, gpu_info_root=str(tmp_path), minors=[4])
    assert err.value.health_refused and 'the GPU behind /dev/nvidia4 (%s) is not listed' % unlisted in err.value.msg
