"""What the gate's health stage costs on a real GPU host: READS timed reads of the stage alone.

Run by realgpu/health_h200.sh on a GPU host (no Ansible needed: the collection's own _gate and _gpu_health, from
this checkout), as root:

  python3 realgpu/gpu_health_cost.py --out FILE.json [--reads 20]

For each backend (nvidia-smi; nvml when nvidia-ml-py imports) it times READS calls of _gate.health_stage (every
check at its default action: the reader, the kernel log, the judgement) and, for comparison, READS memory reads of
the gate's own reader. Prints median and max in ms and writes them, the first stage result (the findings on this
GPU) and the health option the release repetitions should use: every default, except that the Xid checks warn when
this host's kernel log cannot be read (a VM without dmesg access): unknown refuses by design.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'collections'))
from ansible_collections.gpuserve.sglang.plugins.module_utils import _gate, _gpu_health  # noqa: E402


class Result:
    """The shape of _runner.Result the gate reads."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err
        self.timed_out = rc in (124, 137)
        self.cmd = ' '.join(argv)


class LocalRunner:
    """Runs on this host, as the modules' Runner does with target local (coreutils timeout, LC_ALL=C)."""

    local = True
    target = 'local'

    def run(self, argv, timeout=None):
        full = ['timeout', '--kill-after=1', '%gs' % (timeout or 10)] + list(argv)
        out = subprocess.run(full, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             env=dict(os.environ, LC_ALL='C'), check=False)
        return Result(full, out.returncode, out.stdout, out.stderr)


def timed(fn, reads):
    times = []
    for _ in range(reads):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return dict(median_ms=round(statistics.median(times), 2), max_ms=round(max(times), 2),
                min_ms=round(min(times), 2), reads=reads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True)
    ap.add_argument('--reads', type=int, default=20)
    args = ap.parse_args()
    runner = LocalRunner()
    backends = ['nvidia-smi']
    try:
        import pynvml  # noqa: F401
        backends.append('nvml')
    except ImportError:
        pass
    report = dict(backends={})
    actions = _gpu_health.actions_of({})
    for backend in backends:
        params = dict((k, spec.get('default')) for k, spec in _gate.GATE_ARGS.items())
        params.update(backend=backend, health={})
        first = _gate.health_stage(params, runner, None, actions)
        first.pop('raw', None)
        reader = _gate.make_reader(params, runner)
        memory = timed(reader.read, args.reads)
        if hasattr(reader, 'close'):
            reader.close()
        stage = timed(lambda: _gate.health_stage(params, runner, None, actions), args.reads)
        report['backends'][backend] = dict(health_stage=stage, memory_read=memory, first_result=first)
        print('%-10s health stage: median %.2f ms, max %.2f ms (%d reads); memory read: median %.2f ms, max %.2f ms;'
              ' passed %s, kernel log %s, findings %s' % (
                  backend, stage['median_ms'], stage['max_ms'], args.reads, memory['median_ms'], memory['max_ms'],
                  first['passed'], first['kernel_log'], [(f['check'], f['action']) for f in first['findings']]))
    readable = report['backends']['nvidia-smi']['first_result']['kernel_log'] == 'read'
    report['health_option'] = {} if readable else dict(xid='warn', xid_other='warn')
    print('health option for the release repetitions: %s' % json.dumps(report['health_option']))
    with open(args.out, 'w') as f:
        json.dump(report, f, indent=2, sort_keys=True)


if __name__ == '__main__':
    main()
