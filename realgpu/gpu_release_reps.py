"""Repeated real-GPU runs of gpuserve.sglang.gpu_release beside an independent 1 ms NVML observer.

Run by realgpu/gpu_release_gpu.sh (REPS=N) on a GPU host, as root, with torch and nvidia-ml-py importable:

  python3 realgpu/gpu_release_reps.py --out DIR [--reps 10] [--holders 1,2] [--backends nvml@0.01,nvidia-smi]
                                    [--hold-gib 100] [--trace] [--story] [--tree DIR] [--health JSON]

--backends lists the gate's backends to compare, each with its poll interval after `@` (default 0.05 s).
--health turns the gate's health stage on with that option (its cost inside release + gate).
--tree runs the collection of another checkout (e.g. an older commit, to show a change on the same machine).

Each run starts one holder per GPU (realgpu/gpu_holder.py, titled `sglang::scheduler_TP<i>`, HOLD_GIB GiB each,
own session) beside a protected `nvidia_gpu_exporter` (an NVML handle, polled every 0.5 s as exporters do), then
runs realgpu/gpu_release_gpu.yml through ansible-playbook. Meanwhile a thread of this process reads every measured
GPU's memory (NVML, memory info v2) every millisecond and notes when each first reads 0: that is the physical
release, independent of the module. The module reports `signal_epoch` (wall clock just before its first
signal), so both sit on one time line:

  physical_s  = last GPU's first zero read (observer) - signal_epoch
  kill_to_pass_s = the module's own figure: first signal -> the gate passed
  over_s      = kill_to_pass_s - physical_s   (what the module adds on top of the driver's release)

--trace puts logging wrappers for ps, fuser, ls, kill and nvidia-smi first on the module's PATH: each call's
start, end, rc and argv go to the run's trace, so a stall can be pinned to one call (they add ~2 ms per call,
so traced runs are for diagnosis, not for the recorded figures). --story adds, per holder count, the story's way:
kill, sleep 3, one nvidia-smi. Writes DIR/runs.json and prints the distribution table.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPPED = ('ps', 'fuser', 'ls', 'kill', 'nvidia-smi')
WRAPPER = r'''#!/bin/bash
# gpu_release_reps.py --trace: log start, end, rc and argv of one call, then behave as the real command.
name=${0##*/}
PATH=${PATH//"$GPUSERVE_TRACE_BIN:"/}
t0=$EPOCHREALTIME
"$name" "$@"
rc=$?
printf '%s %s %s %s %s\n' "$t0" "$EPOCHREALTIME" "$rc" "$name" "$*" >>"$GPUSERVE_TRACE_LOG"
exit $rc
'''


def log(msg):
    print('[%s] %s' % (time.strftime('%H:%M:%S'), msg), flush=True)


class Observer(threading.Thread):
    """Reads memory v2 of GPUs 0..n-1 every `interval` s; notes each GPU's first 0 read after it held memory."""

    def __init__(self, nvml, n, interval=0.001, limit_s=60.0):
        super().__init__(daemon=True)
        self.nvml, self.interval, self.limit_s = nvml, interval, limit_s
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        self.zero_at = [None] * n
        self.reads = 0
        self.max_read_s = 0.0
        self.ready = threading.Event()

    def used(self, handle):
        return self.nvml.nvmlDeviceGetMemoryInfo(handle, version=self.nvml.nvmlMemory_v2).used

    def run(self):
        deadline = time.time() + self.limit_s
        self.ready.set()
        while None in self.zero_at and time.time() < deadline:
            for i, handle in enumerate(self.handles):
                if self.zero_at[i] is None:
                    t0 = time.time()
                    used = self.used(handle)
                    t1 = time.time()
                    self.reads += 1
                    self.max_read_s = max(self.max_read_s, t1 - t0)
                    if used == 0:
                        self.zero_at[i] = t1  # the read that saw zero ended at t1: the release happened by then
            time.sleep(self.interval)


class Bench:
    def __init__(self, args):
        import pynvml
        self.args, self.nvml = args, pynvml
        pynvml.nvmlInit()
        self.python = sys.executable
        self.holder_path = ':'.join(p for p in sys.path[1:] if p)
        self.procs = []
        self.reapers = []
        self.trace_bin = os.path.join(args.out, 'trace-bin')
        if args.trace:
            os.makedirs(self.trace_bin, exist_ok=True)
            for name in WRAPPED:
                path = os.path.join(self.trace_bin, name)
                with open(path, 'w') as f:
                    f.write(WRAPPER)
                os.chmod(path, 0o755)

    def used_mib(self, i):
        h = self.nvml.nvmlDeviceGetHandleByIndex(i)
        return self.nvml.nvmlDeviceGetMemoryInfo(h, version=self.nvml.nvmlMemory_v2).used // 2 ** 20

    def start_holder(self, title, mode, ready, gpu=None):
        env = dict(os.environ, PYTHONPATH=self.holder_path)
        if gpu is not None:
            env['CUDA_VISIBLE_DEVICES'] = str(gpu)
        if os.path.exists(ready):
            os.unlink(ready)
        proc = subprocess.Popen(['setsid', 'bash', '-c', 'exec -a "$0" "$@"', title, self.python,
                                 os.path.join(ROOT, 'realgpu', 'gpu_holder.py'), mode, ready],
                                env=env, stdout=subprocess.DEVNULL, stderr=open(ready + '.log', 'w'))
        # Reap at once, as SGLang's launcher does for its children: a zombie left for the module is not the case
        # under test.
        reaper = threading.Thread(target=proc.wait, daemon=True)
        reaper.start()
        self.procs.append(proc)
        deadline = time.time() + 120
        while not (os.path.exists(ready) and os.path.getsize(ready)):
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit('holder %s did not start: %s' % (title, open(ready + '.log').read()[-2000:]))
            time.sleep(0.05)
        return proc

    def wait_idle(self, n, limit_s=60):
        deadline = time.time() + limit_s
        while any(self.used_mib(i) for i in range(n)):
            if time.time() > deadline:
                raise SystemExit('GPUs 0..%d still hold memory after %ds: %s' % (
                    n - 1, limit_s, [self.used_mib(i) for i in range(n)]))
            time.sleep(0.05)

    def holders(self, n, tag):
        procs = [self.start_holder('sglang::scheduler_TP%d' % i, str(self.args.hold_gib),
                                   os.path.join(self.args.out, '%s-%d.ready' % (tag, i)), gpu=i) for i in range(n)]
        want = self.args.hold_gib * 1024 * 9 // 10
        deadline = time.time() + 120
        while min(self.used_mib(i) for i in range(n)) < want:
            if time.time() > deadline:
                raise SystemExit('holders did not reach %d MiB' % want)
            time.sleep(0.05)
        return procs

    def play(self, name, backend, trace_log):
        backend, _at, interval = backend.partition('@')
        tree = self.args.tree or ROOT
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(tree, 'ansible.cfg'), LC_ALL='C.UTF-8',
                   ANSIBLE_NOCOLOR='1')
        if trace_log:
            env.update(PATH=self.trace_bin + ':' + env['PATH'], GPUSERVE_TRACE_BIN=self.trace_bin,
                       GPUSERVE_TRACE_LOG=trace_log)
        cmd = [self.python, '-m', 'ansible.cli.playbook', '-i', 'localhost,', '-c', 'local',
               '-e', 'ansible_python_interpreter=' + self.python, '-e', 'bench_out=' + self.args.out,
               '-e', 'bench_name=' + name, '-e', 'bench_check=false', '-e', 'bench_nvml=false',
               '-e', 'bench_backend=' + backend, '-e', 'bench_poll_interval=' + (interval or '0.05'),
               # This process reads NVML (the observer), so it holds /dev/nvidia*: the module must spare it.
               '-e', json.dumps(dict(bench_exclude_pids=[os.getpid()], **(
                   {'bench_health': json.loads(self.args.health)} if self.args.health else {}))),
               os.path.join(ROOT, 'realgpu', 'gpu_release_gpu.yml')]
        with open(os.path.join(self.args.out, name + '.ansible.log'), 'w') as f:
            rc = subprocess.call(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=tree)
        try:
            with open(os.path.join(self.args.out, name + '.json')) as f:
                return rc, json.load(f)['release']
        except OSError:  # the play failed before writing its results
            with open(os.path.join(self.args.out, name + '.ansible.log')) as f:
                return rc or 1, dict(msg=f.read()[-3000:])

    def one(self, n, backend, rep):
        name = 'run-n%d-%s-%02d' % (n, backend.replace('@', '-'), rep)
        procs = self.holders(n, name)
        observer = Observer(self.nvml, n)
        observer.start()
        observer.ready.wait()
        trace_log = os.path.join(self.args.out, name + '.trace') if self.args.trace else None
        rc, res = self.play(name, backend, trace_log)
        observer.join(timeout=65)
        alive = [p.pid for p in procs if p.poll() is None]
        for p in procs:
            if p.poll() is None:
                p.kill()
        gate = res.get('gate') or {}
        row = dict(name=name, holders=n, backend=backend, rep=rep, rc=rc, survivors=alive, msg=res.get('msg'),
                   killed=[(k['pid'], k['signal']) for k in res.get('killed', [])],
                   kill_to_pass_s=res.get('kill_to_pass_s'), timings=res.get('timings'),
                   gate_polls=gate.get('polls'), gate_clear_at_s=gate.get('clear_at_s'),
                   signal_epoch=res.get('signal_epoch'), observer_reads=observer.reads,
                   observer_max_read_s=round(observer.max_read_s, 4))
        traced = calls(trace_log) if trace_log and os.path.exists(trace_log) else []
        # A collection older than signal_epoch: the traced `kill` call's start stands in (a few ms late).
        signal_at = res.get('signal_epoch') or next((c['start'] for c in traced if c['cmd'].startswith('kill')), None)
        row['signal_from'] = 'module' if res.get('signal_epoch') else 'trace' if signal_at else None
        if signal_at and None not in observer.zero_at:
            row['physical_per_gpu_s'] = [round(z - signal_at, 4) for z in observer.zero_at]
            row['physical_s'] = max(row['physical_per_gpu_s'])
            if row['kill_to_pass_s'] is not None:
                row['over_s'] = round(row['kill_to_pass_s'] - row['physical_s'], 4)
        if traced:
            row['calls'] = [dict(c, start=round(c['start'] - (signal_at or 0), 4)) for c in traced]
        self.wait_idle(n)
        log('%s: kill_to_pass %s s, physical %s s (per GPU %s), over %s s, timings %s, polls %s%s' % (
            name, row['kill_to_pass_s'], row.get('physical_s'), row.get('physical_per_gpu_s'), row.get('over_s'),
            row['timings'], row['gate_polls'], '' if rc == 0 and not alive else ' FAILED rc=%s survivors=%s' % (
                rc, alive)))
        return row

    def story(self, n):
        """The story's way: kill, sleep 3, one nvidia-smi."""
        procs = self.holders(n, 'story-n%d' % n)
        t0 = time.time()
        for p in procs:
            os.kill(p.pid, signal.SIGTERM)
        time.sleep(3)
        reading = subprocess.run(['nvidia-smi', '--query-gpu=index,memory.used', '--format=csv,noheader,nounits'],
                                 capture_output=True, text=True, timeout=30).stdout
        row = dict(name='story-n%d' % n, holders=n, backend='story', elapsed_s=round(time.time() - t0, 4),
                   reading=reading.strip())
        self.wait_idle(n)
        log('story n=%d: %s s, reading %r' % (n, row['elapsed_s'], row['reading']))
        return row

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()


def calls(path):
    """The traced calls: start (epoch seconds), took (s), rc, cmd."""
    rows = []
    with open(path) as f:
        for line in f:
            t0, t1, rc, name, argv = (line.rstrip('\n').split(' ', 4) + [''])[:5]
            rows.append(dict(start=float(t0), took=round(float(t1) - float(t0), 4), rc=int(rc),
                             cmd=(name + ' ' + argv)[:120]))
    return rows


def dist(values):
    values = [v for v in values if v is not None]
    if not values:
        return 'n/a'
    return '%.3f / %.3f / %.3f' % (min(values), statistics.median(values), max(values))


def table(rows):
    out = ['%-8s %-11s %4s  %-23s %-23s %-23s %s' % (
        'holders', 'gate', 'runs', 'kill_to_pass_s', 'physical_s (observer)', 'over_s', 'runs over 0.1 s'),
        '%-8s %-11s %4s  %-23s %-23s %-23s' % ('', 'backend', '', 'min / median / max', 'min / median / max',
                                                'min / median / max')]
    keys = sorted(set((r['holders'], r['backend']) for r in rows if r['backend'] != 'story'))
    for n, backend in keys:
        sel = [r for r in rows if (r['holders'], r['backend']) == (n, backend)]
        over = [r.get('over_s') for r in sel]
        out.append('%-8d %-11s %4d  %-23s %-23s %-23s %d' % (
            n, backend, len(sel), dist([r['kill_to_pass_s'] for r in sel]), dist([r.get('physical_s') for r in sel]),
            dist(over), sum(1 for o in over if o is None or o > 0.1)))
    for r in rows:
        if r['backend'] == 'story':
            out.append('%-8d %-11s %4d  %-23s (kill, sleep 3, one nvidia-smi: %s)' % (
                r['holders'], 'story', 1, '%.3f' % r['elapsed_s'], r['reading'].replace('\n', '; ')))
    return '\n'.join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True)
    ap.add_argument('--reps', type=int, default=10)
    ap.add_argument('--holders', default='1,2')
    ap.add_argument('--backends', default='nvml@0.01')
    ap.add_argument('--hold-gib', type=int, default=100)
    ap.add_argument('--tree', help='run the collection of this checkout instead of this one')
    ap.add_argument('--trace', action='store_true')
    ap.add_argument('--story', action='store_true')
    ap.add_argument('--health', help="the gate's health option as JSON (e.g. '{}': every check at its default)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # Under `timeout`, SIGTERM still writes runs.json and kills the holders (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not shutil.which('fuser'):
        raise SystemExit('fuser (psmisc) missing')
    bench = Bench(args)
    rows = []
    try:
        exporter = bench.start_holder('nvidia_gpu_exporter', 'nvml', os.path.join(args.out, 'exporter.ready'))
        counts = [int(c) for c in args.holders.split(',')]
        backends = args.backends.split(',')
        bench.wait_idle(max(counts))
        for rep in range(1, args.reps + 1):
            # Alternate the order so that no setting always runs first after another.
            order = [(n, b) for n in counts for b in backends]
            for n, backend in (order if rep % 2 else order[::-1]):
                rows.append(bench.one(n, backend, rep))
        if args.story:
            rows.extend(bench.story(n) for n in counts)
        if exporter.poll() is not None:
            raise SystemExit('FAIL: the protected exporter died')
    finally:
        bench.close()
        with open(os.path.join(args.out, 'runs.json'), 'w') as f:
            json.dump(rows, f, indent=1)
    print(table(rows))
    bad = [r['name'] for r in rows if r['backend'] != 'story' and (r['rc'] or r['survivors'])]
    if bad:
        raise SystemExit('FAIL: %s' % bad)


if __name__ == '__main__':
    main()
