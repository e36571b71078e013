"""The figures of the real-GPU stop runs (realgpu/real_sglang_h200.sh stops, rollback), as Markdown for
docs/benchmarks.md: each restart's stop against the physical release, its downtime broken down, where its start went,
and what happened to the requests in flight.

  python3 realgpu/stops_report.py DIR

DIR (the unpacked stops.tgz) holds var-lib-gpuserve/history/*.json (the role's manifest of every verified start:
`stop` with the helper's signals and `signal_epoch`, `release.gate_passed_epoch`, `times`, `startup`), observer.jsonl
(realgpu/nvml_observer.py: GPU 0's memory between used and unused, read every 1 ms) and requests-*.jsonl
(realgpu/inflight_client.py). All epochs are this one machine's clock.
  SIGKILL -> physical  = the observer's first read of 0 bytes after the SIGKILL (the driver's release)
  SIGKILL -> gate      = gpu_release's gate passed (the lifecycle may start the server)
  over                 = the two's difference: what the lifecycle adds to the physical limit (goal: under 0.2 s)
"""
import glob
import json
import os
import sys

from lifecycle_report import load_jsonl  # beside this file: python3 puts its folder first on sys.path

PHASES = ("imports", "scheduler_start", "init", "weight_load", "kv_cache", "cuda_graph", "server_start", "warm_up")


def sigkill_epoch(stop):
    """The wall clock of the stop's SIGKILL (its first signal's epoch moved by the at_s between them)."""
    signals = stop.get("signals") or []
    if not signals or stop.get("signal_epoch") is None:
        return None
    kill = [s for s in signals if s.get("signal") == "SIGKILL"]
    return stop["signal_epoch"] + (kill[0]["at_s"] - signals[0]["at_s"]) if kill else None


def physical(observers, after):
    """The first read of 0 bytes after `after`, from an observer that was already watching then: each file covers
    only its own run (it logs changes, so a file started later would name its own first read)."""
    zeros = [next((row["t"] for row in rows if not row.get("busy") and row["t"] >= after - 0.001), None)
             for rows in observers if rows and rows[0]["t"] <= after]
    zeros = [t for t in zeros if t is not None]
    return min(zeros) if zeros else None


def fmt(value, digits=3):
    return "" if value is None else ("%.*f" % (digits, value))


def restarts(directory):
    manifests = []
    for path in sorted(glob.glob(os.path.join(directory, "var-lib-gpuserve", "history", "*.json"))):
        with open(path) as handle:
            manifests.append(json.load(handle))
    observers = [sorted(load_jsonl(path), key=lambda row: row["t"])
                 for path in glob.glob(os.path.join(directory, "observer*.jsonl"))]
    rows = []
    for m in manifests:
        stop, times, release = m.get("stop") or {}, m.get("times") or {}, m.get("release") or {}
        kill = sigkill_epoch(stop)
        phys = physical(observers, kill) if kill is not None else None
        gate = release.get("gate_passed_epoch")
        row = {"begin": times.get("begin"), "phase": m.get("phase"), "how": stop.get("how"),
               "in_flight": (stop.get("load") or {}).get("in_flight"), "cut": (stop.get("drain") or {}).get("cut"),
               "helper_stop_s": stop.get("stop_s"),
               "physical_s": None if phys is None else phys - kill,
               "gate_s": None if gate is None or kill is None else gate - kill}
        if row["physical_s"] is not None and row["gate_s"] is not None:
            row["over_s"] = row["gate_s"] - row["physical_s"]
        row.update({k: times.get(k) for k in ("stop_s", "release_and_gate_s", "start_to_ready_s", "downtime_s")})
        row["startup"] = {p["phase"]: p["s"] for p in (m.get("startup") or {}).get("phases", [])}
        row["cuda_graphs"] = (m.get("startup") or {}).get("cuda_graphs") or {}
        rows.append(row)
    return rows


def requests(directory):
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "requests-*.jsonl"))):
        rows = load_jsonl(path)
        done = [r for r in rows if r.get("status") == 200]
        cut = [r for r in rows if r.get("status") != 200]
        out.append({"file": os.path.basename(path), "sent": len(rows), "completed": len(done),
                    "tokens": sorted({r.get("tokens") for r in done}), "failed": len(cut),
                    "errors": sorted({(r.get("error") or "")[:60] for r in cut})})
    return out


def main(directory):
    rows = restarts(directory)
    print("| start (manifest) | phase | stop | in flight | cut | helper stop s | SIGKILL -> physical s | "
          "SIGKILL -> gate s | over s | downtime s | stop s | release+gate+start s | start -> ready s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["begin"], r["phase"], r["how"], r["in_flight"], "" if r["cut"] is None else r["cut"],
            fmt(r["helper_stop_s"]), fmt(r["physical_s"]), fmt(r["gate_s"]), fmt(r.get("over_s")),
            fmt(r["downtime_s"], 2), fmt(r["stop_s"], 2), fmt(r["release_and_gate_s"], 2),
            fmt(r["start_to_ready_s"], 2)))
    print()
    print("| start (manifest) | " + " | ".join(PHASES) + " | CUDA graphs (each capture) |")
    print("|---|" + "---|" * (len(PHASES) + 1))
    for r in rows:
        print("| %s | %s | %s |" % (r["begin"], " | ".join(fmt(r["startup"].get(p), 2) for p in PHASES),
                                   ", ".join("%s %.2f" % kv for kv in sorted(r["cuda_graphs"].items()))))
    reqs = requests(directory)
    if reqs:
        print()
        print("| requests file | sent | completed (tokens) | failed (errors) |")
        print("|---|---|---|---|")
        for q in reqs:
            print("| %s | %d | %d %s | %d %s |" % (q["file"], q["sent"], q["completed"], q["tokens"], q["failed"],
                                                   "; ".join(q["errors"])))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
