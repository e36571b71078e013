"""The gate's fakes: a fake timeline for its poll and a host whose GPU memory follows that timeline; shared by the
tests of _gate and of what runs the gate (_release, the minors' selection)."""
from ansible_collections.gpuserve.sglang.plugins.module_utils._gate import GATE_ARGS

from ansible_collections.gpuserve.sglang.tests.support.nvidia_smi import four_fields


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
