#!/usr/bin/env python3
"""Where CI's time goes: wall and CPU seconds per phase of scripts/test and per lab test, one JSON line each in the
profile file (GPUSERVE_PROFILE), and the most expensive items at the end (docs/testing.md, "The CI profile").

Each item records:
- wall_s: its wall-clock seconds;
- cpu_s: the CPU seconds it caused, as far as they can be attributed: its own process tree (getrusage of the
  children it waited for, and its own for a pytest item) plus the lab cgroups (containers, lane daemons) that
  belong to it (all of them for a phase run alone; a lane's own for a lab test);
- host_busy_s: the whole machine's busy CPU seconds over the item (/proc/stat), which includes whatever ran beside
  it, and host_idle_s;
- cgroups: the CPU seconds of every lab cgroup that moved (an LXC container's payload cgroup `lxc.payload.VMID`,
  the lab's daemons `gpuserve-lab.*`), read from cgroup v1 cpuacct.usage or cgroup v2 cpu.stat.

Usage:
  scripts/cpuprof.py run [--own] NAME -- CMD...
                                          run CMD, append one phase line to $GPUSERVE_PROFILE (exit status of CMD);
                                          --own: count no lab cgroup into its cpu_s (a check beside the lanes)
  scripts/cpuprof.py top [-n N] FILE      the N most expensive items by cpu_s, then the phases' sum
Stdlib only: it runs under the host's python3 before any venv exists.
"""
import json
import os
import resource
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
CGROUP_ROOTS = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/unified", "/sys/fs/cgroup")
LAB_PREFIXES = ("lxc.payload.", "gpuserve-lab.")


def host_cpu():
    """(busy, idle) CPU seconds of the whole machine since boot, from /proc/stat's first line."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK, (idle + iowait) / CLK_TCK


def _cgroup_usage(path):
    """CPU seconds of one cgroup directory (v1 cpuacct.usage in ns, or v2 cpu.stat usage_usec); None if neither."""
    try:
        with open(os.path.join(path, "cpuacct.usage"), encoding="ascii") as handle:
            return int(handle.read()) / 1e9
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(path, "cpu.stat"), encoding="ascii") as handle:
            for line in handle:
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return None


def lab_cgroups():
    """{name: CPU seconds} of the lab's cgroups (containers and lab daemons), from the first hierarchy that has any.
    LXC nests a container's processes under lxc.payload.VMID; its monitor (lxc.monitor.VMID) is left out."""
    for root in CGROUP_ROOTS:
        try:
            names = sorted(n for n in os.listdir(root) if n.startswith(LAB_PREFIXES))
        except OSError:
            continue
        usage = {}
        for name in names:
            seconds = _cgroup_usage(os.path.join(root, name))
            if seconds is not None:
                usage[name] = seconds
        if usage:
            return usage
    return {}


class CgroupMeter:
    """The lab cgroups' CPU seconds accumulated while it runs, sampled every `interval` s in a thread: a container
    restarted or destroyed meanwhile (LXC makes a new lxc.payload.VMID from 0, or removes it) keeps what it used
    up to the last sample before, instead of losing it or going negative."""

    def __init__(self, interval=0.5, read=None):
        import threading
        self.read = read or lab_cgroups
        self.interval = interval
        self.last = self.read()
        self.total = {}
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self):
        now = self.read()
        with self.lock:
            for name, seconds in now.items():
                before = self.last.get(name, 0.0)
                # less than before: a new cgroup of the same name (the container restarted), counted from 0
                self.total[name] = self.total.get(name, 0.0) + (seconds - before if seconds >= before else seconds)
            self.last = now

    def _loop(self):
        while not self.done.wait(self.interval):
            self.sample()

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        """The accumulated {name: seconds}, after one last sample."""
        self.done.set()
        self.thread.join()
        self.sample()
        return dict(self.total)


def own_cpu(include_self):
    """CPU seconds of this process's waited-for children, and of itself when include_self."""
    total = 0.0
    who = [resource.RUSAGE_CHILDREN] + ([resource.RUSAGE_SELF] if include_self else [])
    for w in who:
        usage = resource.getrusage(w)
        total += usage.ru_utime + usage.ru_stime
    return total


def snapshot(include_self=False, cgroups=None):
    """The figures now; cgroups: the accumulated CPU seconds of a CgroupMeter (else the cgroups read now)."""
    busy, idle = host_cpu()
    return {"t": time.monotonic(), "busy": busy, "idle": idle, "own": own_cpu(include_self),
            "cgroups": lab_cgroups() if cgroups is None else cgroups}


def measure(before, after, cgroup_filter=None):
    """The item between two snapshots. cgroup_filter(name) -> bool: the cgroups counted into cpu_s (all if None).
    A cgroup that appeared during the item counts from 0."""
    moved = {}
    for name, seconds in after["cgroups"].items():
        delta = seconds - before["cgroups"].get(name, 0.0)
        if delta > 0.0005:
            moved[name] = round(delta, 3)
    counted = sum(v for k, v in moved.items() if cgroup_filter is None or cgroup_filter(k))
    return {"wall_s": round(after["t"] - before["t"], 3),
            "cpu_s": round(after["own"] - before["own"] + counted, 3),
            "host_busy_s": round(after["busy"] - before["busy"], 3),
            "host_idle_s": round(after["idle"] - before["idle"], 3),
            "cgroups": moved}


def lane_filter():
    """In a lane (scripts/lab-lanes sets GPUSERVE_LANE_CGROUPS: its containers' and nodes' cgroup names, whole), the
    cgroups counted into an item's cpu_s: the lane's own; None (all of them) outside the lanes."""
    names = {p for p in os.environ.get("GPUSERVE_LANE_CGROUPS", "").split(",") if p}
    return names.__contains__ if names else None


def append(path, row):
    if not path:
        return
    row = dict(row, at=time.strftime("%H:%M:%S", time.gmtime()))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, sort_keys=True) + "\n")


def cmd_run(argv):
    own = argv[:1] == ["--own"]
    if own:
        argv = argv[1:]
    if "--" not in argv or argv.index("--") != 1:
        sys.exit("usage: scripts/cpuprof.py run [--own] NAME -- CMD...")
    name, cmd = argv[0], argv[2:]
    meter = CgroupMeter().start()
    before = snapshot(cgroups={})
    rc = subprocess.call(cmd)
    after = snapshot(cgroups=meter.stop())
    # --own: CMD's own process tree only (a check run beside the lab: the containers' CPU is the lanes')
    row = dict(measure(before, after, (lambda _name: False) if own else lane_filter()), kind="phase", name=name,
               rc=rc)
    if os.environ.get("GPUSERVE_LANE"):
        row["lane"] = os.environ["GPUSERVE_LANE"]
    append(os.environ.get("GPUSERVE_PROFILE"), row)
    return rc


def load(path):
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def top_table(rows, n):
    """Text: the n most expensive items by cpu_s (phases and tests), then each kind's sums."""
    ranked = sorted(rows, key=lambda r: (-r.get("cpu_s", 0), r["name"]))[:n]
    lines = ["%-6s %8s %8s %8s  %s" % ("kind", "cpu_s", "wall_s", "busy_s", "item")]
    for r in ranked:
        label = r["name"] + (" [%s]" % r["lane"] if r.get("lane") else "")
        lines.append("%-6s %8.1f %8.1f %8.1f  %s" % (r["kind"], r["cpu_s"], r["wall_s"], r["host_busy_s"], label))
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        lines.append("all %d %s items: cpu_s %.1f, wall_s %.1f" % (
            len(mine), kind, sum(r["cpu_s"] for r in mine), sum(r["wall_s"] for r in mine)))
    return "\n".join(lines)


def cmd_top(argv):
    n = 20
    if argv[:1] == ["-n"]:
        n, argv = int(argv[1]), argv[2:]
    if len(argv) != 1:
        sys.exit("usage: scripts/cpuprof.py top [-n N] FILE")
    print(top_table(load(argv[0]), n))
    return 0


def main(argv):
    if argv[:1] == ["run"]:
        return cmd_run(argv[1:])
    if argv[:1] == ["top"]:
        return cmd_top(argv[1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
