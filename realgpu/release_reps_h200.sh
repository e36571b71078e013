#!/usr/bin/env bash
# The device call of gpu_release's repetitions (docs/benchmarks.md, "gpu_release: 10 repetitions beside a 1 ms NVML observer"):
#   realgpu/release_reps_h200.sh [OLD_TREE]
# 1. this collection, gate backend nvml (poll 0.01 s): 10 repetitions each for 1 and 2 holders, and the story's way;
# 2. OLD_TREE's collection (e.g. `mkdir -p .devcarry/old && git archive 6aeb480 | tar -x -C .devcarry/old`),
#    gate nvidia-smi, with every command traced: 3 repetitions each (skipped without OLD_TREE);
# 3. this collection, gate nvidia-smi (poll 0.05 s, the module's default): 4 repetitions each.
# Needs .whl/ as realgpu/run_h200.sh describes (ansible-core wheels, psmisc). Results land flat in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/out}
OLD_TREE=${1:-}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site || exit 1
command -v fuser >/dev/null || { for d in .whl/psmisc_*.deb; do dpkg -x "$d" /; done; }
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ date -u +%FT%TZ; uname -r; nproc; nvidia-smi; nvidia-smi -q | grep -i -m2 persistence; command -v ps fuser; } \
    > "$OUT/machine.txt" 2>&1
step() {  # step NAME TIMEOUT ARGS...
    local name=$1 t=$2; shift 2
    echo "=== $name $(date -u +%T)"
    timeout "$t" python3 realgpu/gpu_release_reps.py --out "/tmp/$name" "$@" 2>&1 | tee "$OUT/$name.txt"
    cp "/tmp/$name/runs.json" "$OUT/$name-runs.json" 2>/dev/null
}
step new 300 --reps 10 --holders 1,2 --backends nvml@0.01 --story
[ -z "$OLD_TREE" ] || step old 120 --tree "$(cd "$OLD_TREE" && pwd)" --reps 3 --holders 1,2 --backends nvidia-smi --trace
step smi 120 --reps 4 --holders 1,2 --backends nvidia-smi
echo "=== done $(date -u +%T)"
