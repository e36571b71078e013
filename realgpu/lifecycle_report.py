"""The figures of one real-GPU lifecycle/benchmark run (realgpu/real_sglang_h200.sh lifecycle, bench), from what came
back (the unpacked lifecycle.tgz / bench.tgz), as Markdown tables for docs/benchmarks.md:

  python3 realgpu/lifecycle_report.py DIR [DIR...]

Each DIR may hold: times.tsv (each play's rc and wall seconds), lifecycle/*.log (the plays' logs, with ansible.posix's
profile_tasks lines), lifecycle/var-lib-gpuserve*/history/*.json (the role's manifest of every verified start),
lifecycle/shim-state*/stop.jsonl (the systemctl test shim's record of every stop: signal epoch, exits, empty
cgroup) and lifecycle/observer*.jsonl (realgpu/nvml_observer.py: GPU 0's memory between used and unused, 1 ms).
The physical release of a stop = the observer's first read of 0 bytes after the stop's signal.
"""
import glob
import json
import os
import re
import sys
import time

TASK = re.compile(r"^TASK \[(?P<name>.*)\] \*+$")
STAMP = re.compile(r"^\S+ \d+ \S+ \d{4}\s+\d\d:\d\d:\d\d [+-]\d{4} \((?P<prev>\d+):(?P<m>\d\d):(?P<s>\d\d\.\d+)\)")


def load_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def task_times(log):
    """[(task name, seconds)] from profile_tasks' per-task lines: the stamp under a task banner carries the previous
    task's duration."""
    out, prev, current = [], None, None
    with open(log, errors="replace") as f:
        for line in f:
            m = TASK.match(line.rstrip("\n"))
            if m:
                current = m.group("name")
                continue
            s = STAMP.match(line)
            if s and current is not None:
                if prev is not None:
                    out.append((prev, int(s.group("prev")) * 3600 + int(s.group("m")) * 60 + float(s.group("s"))))
                prev, current = current, None
    return out


def main(dirs):
    stops, observer, manifests, times = [], [], {}, []
    for d in dirs:
        for p in glob.glob(os.path.join(d, "**", "times.tsv"), recursive=True):
            for line in open(p):
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 3 and (parts[0], parts[1], parts[2]) not in times:
                    times.append((parts[0], parts[1], parts[2]))
        for p in glob.glob(os.path.join(d, "**", "stop.jsonl"), recursive=True):
            for row in load_jsonl(p):
                if row.get("signal_epoch") and row["signal_epoch"] not in [r["signal_epoch"] for r in stops]:
                    stops.append(row)
        for p in glob.glob(os.path.join(d, "**", "observer*.jsonl"), recursive=True):
            observer += load_jsonl(p)
        for p in glob.glob(os.path.join(d, "**", "history", "*.json"), recursive=True):
            manifests[os.path.basename(p)] = json.load(open(p))
    observer.sort(key=lambda r: r["t"])
    stops.sort(key=lambda r: r["signal_epoch"])

    print("### Plays (wall seconds, rc)\n\n| step | rc | s |\n|---|---|---|")
    for name, rc, s in times:
        print("| %s | %s | %s |" % (name, rc, s))

    print("\n### Verified starts (the role's manifests, history/)\n")
    print("| manifest | phase | reasons | validate+stop s | release+gate s | start→ready s | total s | "
          "kill_to_pass s | gate | env proof |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in sorted(manifests):
        m = manifests[name]
        t, g, proof = m.get("times", {}), m.get("gate", {}), m.get("env_proof") or {}
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, m.get("phase"), "; ".join(m.get("reasons") or []), t.get("validate_and_stop_s"),
            t.get("release_and_gate_s"), t.get("start_to_ready_s"), t.get("total_s"),
            (m.get("release") or {}).get("kill_to_pass_s"),
            "%s poll(s), %s s" % (g.get("polls"), g.get("elapsed_s", g.get("waited_s"))),
            "ok %s, %s processes" % (proof.get("ok"), proof.get("processes"))))

    print("\n### Stops (systemctl test shim) against the NVML observer\n")
    print("| signal (UTC) | why | processes | last exit s | cgroup empty s | inactive s | physical release s | "
          "peak GB |")
    print("|---|---|---|---|---|---|---|---|")
    for st in stops:
        sig = st["signal_epoch"]
        zero = next((r for r in observer if r["t"] >= sig and not r["busy"]), None)
        exits = st.get("exit_after_s") or {}
        print("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
            time.strftime("%H:%M:%S", time.gmtime(sig)), st.get("why"),
            len(st.get("pids") or []), max(exits.values()) if exits else None, st.get("empty_after_s"),
            st.get("inactive_after_s"), round(zero["t"] - sig, 3) if zero else None,
            round(zero["peak_before"] / 1e9, 2) if zero else None))

    for d in dirs:
        for log in sorted(glob.glob(os.path.join(d, "**", "lifecycle", "*.log"), recursive=True)):
            rows = task_times(log)
            if not rows:
                continue
            print("\n### Tasks over 1 s: %s (profile_tasks)\n\n| task | s |\n|---|---|" % os.path.basename(log))
            for name, s in rows:
                if s >= 1.0:
                    print("| %s | %.2f |" % (name.replace("|", "\\|"), s))


if __name__ == "__main__":
    main(sys.argv[1:])
