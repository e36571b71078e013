"""gpu_release with the gate's health stage: a GPU that cannot serve fails the release, in check mode too (where a
memory reading still in use is only reported), and the gate's memory poll never runs after a health refusal."""
import pytest

from ansible_collections.gpuserve.sglang.plugins.module_utils._release import ReleaseError

from ansible_collections.gpuserve.sglang.tests.support.gate import Clock
from ansible_collections.gpuserve.sglang.tests.support.gpu_health import XID79, capture
from ansible_collections.gpuserve.sglang.tests.support.release import World, release, server_world


class HealthWorld(World):
    """server_world's processes, the captured H200's health line and a kernel log."""

    dmesg = capture('dmesg_xid')

    def cmd_nvidia_smi(self, argv):
        if 'pcie.link.gen.current' in argv[1]:
            return 0, capture('health_csv_noheader'), ''
        return super().cmd_nvidia_smi(argv)

    def cmd_dmesg(self, argv):
        return 0, self.dmesg, ''

    def warn(self, text):
        pass


def world(clock, dmesg=None, **kw):
    base = server_world(clock, **kw)
    made = HealthWorld(list(base.procs.values()), clock, **kw)
    if dmesg is not None:
        made.dmesg = dmesg
    return made


def test_a_healthy_gpu_releases_and_gates_with_the_health_result():
    clock = Clock()
    res = release(world(clock), clock, gate=dict(health={}))
    assert res['gate']['passed'] and res['gate']['health']['passed']
    assert res['gate']['health']['gpus'][0]['bus_id'] == '0000:00:06.0'


@pytest.mark.parametrize('check_mode', [False, True])
def test_an_xid_fails_the_release_even_in_check_mode(check_mode):
    clock = Clock()
    w = world(clock, dmesg=XID79, check_mode=check_mode)
    with pytest.raises(ReleaseError) as err:
        release(w, clock, gate=dict(health={}))
    assert err.value.msg.startswith('gate: GPU health: not starting')
    assert 'GPU 0 (bus 0000:00:06.0): xid' in err.value.msg
    assert err.value.result['gate']['health']['passed'] is False
    memory_reads = [c for c in w.calls if c[0] == 'nvidia-smi' and 'memory.used' in c[1]]
    assert memory_reads == []
