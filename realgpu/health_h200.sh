#!/usr/bin/env bash
# The device call of the gate's health stage (docs/benchmarks.md, "the gate's health stage on an H200"):
#   realgpu/health_h200.sh
# 1. realgpu/gpu_health_cost.py: 20 reads of the health stage alone, per backend (nvidia-smi, nvml), beside 20
#    memory reads; its health option (every default; the Xid checks warn when this host's kernel log is unreadable)
# 2. realgpu/gpu_release_reps.py: gpu_release + gate (nvml, 0.01 s) beside the 1 ms NVML observer, REPS (10) runs
#    with one holder without the health stage and REPS with it, alternating, so both see the same machine.
# Needs .whl/ as realgpu/run_h200.sh describes (ansible-core wheels, psmisc). Results land flat in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/out}
REPS=${REPS:-10}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site || exit 1
command -v fuser >/dev/null || { for d in .whl/psmisc_*.deb; do dpkg -x "$d" /; done; }
export PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; uname -r; nproc; nvidia-smi; nvidia-smi -q | grep -i -m2 persistence; dmesg | tail -n 3; } \
    > "$OUT/machine.txt" 2>&1
echo "=== health stage cost $(date -u +%T)"
python3 realgpu/gpu_health_cost.py --reads 20 --out "$OUT/health-cost.json" 2>&1 | tee "$OUT/health-cost.txt"
HEALTH=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["health_option"]))' \
         "$OUT/health-cost.json") || HEALTH='{}'
rc=0
for rep in $(seq 1 "$REPS"); do
    for arm in plain health; do
        extra=(); [ "$arm" = plain ] || extra=(--health "$HEALTH")
        timeout 120 python3 realgpu/gpu_release_reps.py --out "/tmp/reps-$arm-$rep" --reps 1 --holders 1 \
            --backends nvml@0.01 "${extra[@]}" > "$OUT/reps-$arm-$rep.txt" 2>&1 || rc=1
        cp "/tmp/reps-$arm-$rep/runs.json" "$OUT/reps-$arm-$rep-runs.json" 2>/dev/null
    done
done
python3 - "$OUT" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
for arm in ('plain', 'health'):
    rows = [r for f in sorted(glob.glob('%s/reps-%s-*-runs.json' % (out, arm))) for r in json.load(open(f))
            if isinstance(r, dict) and r.get('kill_to_pass_s') is not None]
    if not rows:
        print(arm, 'no runs'); continue
    k = [r['kill_to_pass_s'] for r in rows]; o = [r['over_s'] for r in rows if r.get('over_s') is not None]
    print('%-6s runs %d: kill_to_pass median %.3f s max %.3f s; over physical median %.3f s max %.3f s' % (
        arm, len(rows), statistics.median(k), max(k), statistics.median(o or [0]), max(o or [0])))
PY
exit $rc
