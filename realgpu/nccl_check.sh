#!/usr/bin/env bash
# Real-NCCL check of the nccl_tuning hook on a multi-GPU machine (an 8-GPU run reuses it).
#
#   realgpu/nccl_check.sh [--world-size N] [--timing] [--iters N]
#
# 1. renders the hook from roles/nccl_tuning's own templates and defaults (realgpu/render_nccl_hook.py), plus
#    NCCL_DEBUG=INFO so NCCL logs where each value came from;
# 2. makes a venv with --system-site-packages (the machine's torch + NCCL) and puts the hook in its site-packages;
# 3. runs the role's own proof (roles/nccl_tuning/files/nccl_env_proof.py) under env -i;
# 4. runs realgpu/nccl_allreduce_spawn.py under `env -i PATH=/usr/bin:/bin` (nothing exported by this shell):
#    N ranks via torch.multiprocessing spawn, one NCCL all-reduce, per-rank env; then checks NCCL's own
#    "<VAR> set by environment to <value>" line for every NCCL_* variable on every rank;
# 5. with --timing: 61 small all-reduces per "forward", eager vs CUDA graph, tuned (hook, no NCCL_DEBUG) vs
#    baseline (no hook; only the three variables multi-GPU machines always need, the project's lab notes).
# Logs and a summary go to ${OUT:-/tmp/out}. Needs python3 with torch; jinja2 + PyYAML for the render (ansible-core's
# dependencies: PYTHONPATH=/tmp/site is added when that directory exists). Exit 0 only when every check passed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
PY=${PYTHON:-python3}
WS=0
TIMING=0
ITERS=200
while [ $# -gt 0 ]; do
  case $1 in
    --world-size) WS=$2; shift 2 ;;
    --timing) TIMING=1; shift ;;
    --iters) ITERS=$2; shift 2 ;;
    *) echo "usage: $0 [--world-size N] [--timing] [--iters N]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/nccl_check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SUMMARY=$OUT/nccl_check_summary.txt
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
FAIL=0

# The three variables the project's lab notes say multi-GPU machines keep set, also for the baseline.
BASE_ENV=(NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1)

render() {  # render <outdir> [render_nccl_hook.py options]
  local dir=$1; shift
  PYTHONPATH=$([ -d /tmp/site ] && echo /tmp/site:)${PYTHONPATH:-} "$PY" "$ROOT/realgpu/render_nccl_hook.py" "$dir" "$@" >/dev/null
}

make_venv() {  # make_venv <dir> [hook dir]: venv seeing the system torch; the hook installed when given
  "$PY" -m venv --system-site-packages --without-pip "$1"
  local purelib
  purelib=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  # When $PY is itself a venv (the GPU machines' python3 is /opt/torch/.venv), --system-site-packages reaches
  # the base interpreter, not that venv: add its site-packages (where torch lives) by a path-only .pth.
  "$PY" -c 'import site, sys; print("\n".join(p for p in site.getsitepackages() if p))' > "$purelib/_outer_site.pth"
  if [ -n "${2:-}" ]; then
    cp "$2/gpuserve_nccl_env.py" "$2/gpuserve_nccl_env.pth" "$purelib/"
  fi
}

say "machine: $(hostname) $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | tr -s ' ')"

# 1-2: the shipped hook + NCCL_DEBUG=INFO
render "$WORK/hook_debug" --set NCCL_DEBUG=INFO
make_venv "$WORK/venv_debug" "$WORK/hook_debug"
cp "$WORK/hook_debug/gpuserve_nccl_env.py" "$OUT/rendered_gpuserve_nccl_env.py"
EXPECT=$(cat "$WORK/hook_debug/expected.json")
say "hook variables: $EXPECT"

# 3: the role's proof, as the role runs it in the container
if env -i "$WORK/venv_debug/bin/python" "$ROOT/roles/nccl_tuning/files/nccl_env_proof.py" --expect "$EXPECT" \
    > "$OUT/proof.json" 2> "$OUT/proof.err"; then
  say "PASS role proof: spawn child of env -i venv python sees every variable ($OUT/proof.json)"
else
  say "FAIL role proof: $(cat "$OUT/proof.err")"; FAIL=1
fi

# 4: real NCCL all-reduce, ranks started with spawn, nothing exported by this shell
WS_ARG=()
[ "$WS" -gt 0 ] && WS_ARG=(--world-size "$WS")
set +e
env -i PATH=/usr/bin:/bin "$WORK/venv_debug/bin/python" "$ROOT/realgpu/nccl_allreduce_spawn.py" "${WS_ARG[@]}" \
  --mode check --expect "$EXPECT" > "$OUT/allreduce_check.log" 2>&1
RC=$?
set -e
[ $RC = 0 ] && say "PASS all-reduce (rc 0)" || { say "FAIL all-reduce rc=$RC (tail of $OUT/allreduce_check.log):"; tail -20 "$OUT/allreduce_check.log" | tee -a "$SUMMARY"; FAIL=1; }
NRANKS=$(sed -n 's/^gpus [0-9]* world_size \([0-9]*\) .*/\1/p' "$OUT/allreduce_check.log")
NRANKS=${NRANKS:-0}
grep -E '^rank [0-9]+ (pid|allreduce|MISSING)' "$OUT/allreduce_check.log" | tee -a "$SUMMARY" || true
grep 'set by environment to' "$OUT/allreduce_check.log" | sort -u > "$OUT/nccl_set_by_environment.txt" || true
# every NCCL_* variable of the hook (NCCL_DEBUG* only switch logging on and are not echoed) on every rank
for kv in $("$PY" -c 'import json,sys; [print("%s=%s" % kv) for kv in json.loads(sys.argv[1]).items()]' "$EXPECT"); do
  name=${kv%%=*}; value=${kv#*=}
  case $name in NCCL_DEBUG*|NCCL_*) ;; *) continue ;; esac
  case $name in NCCL_DEBUG*) continue ;; esac
  for ((r = 0; r < NRANKS; r++)); do
    if grep -qE "\[$r\] NCCL INFO $name set by environment to $value\.?\$" "$OUT/nccl_set_by_environment.txt"; then
      say "PASS rank $r: NCCL log says $name set by environment to $value"
    else
      say "FAIL rank $r: no NCCL line '$name set by environment to $value'"; FAIL=1
    fi
  done
done

# 5: verify-step cost model, tuned vs baseline
if [ $TIMING = 1 ]; then
  render "$WORK/hook_tuned"
  make_venv "$WORK/venv_tuned" "$WORK/hook_tuned"
  make_venv "$WORK/venv_base"
  : > "$OUT/timing.jsonl"
  for variant in tuned baseline; do
    if [ $variant = tuned ]; then run=(env -i PATH=/usr/bin:/bin "$WORK/venv_tuned/bin/python")
    else run=(env -i PATH=/usr/bin:/bin "${BASE_ENV[@]}" "$WORK/venv_base/bin/python"); fi
    if "${run[@]}" "$ROOT/realgpu/nccl_allreduce_spawn.py" "${WS_ARG[@]}" --mode timing --label $variant \
        --iters "$ITERS" > "$OUT/timing_$variant.log" 2>&1; then
      grep '^{' "$OUT/timing_$variant.log" >> "$OUT/timing.jsonl"
    else
      say "FAIL timing $variant (see $OUT/timing_$variant.log)"; FAIL=1
    fi
  done
  "$PY" - "$OUT/timing.jsonl" <<'EOF' | tee -a "$SUMMARY"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print("| variant | ranks | all-reduces/forward | elements | eager ms/forward | CUDA graph ms/forward | NCCL |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    graph = "%.3f" % r["graph_ms_per_forward"] if "graph_ms_per_forward" in r else "error: " + r.get("graph_error", "?")
    print("| %s | %d | %d | %d %s | %.3f | %s | %s |" % (r["label"], r["world_size"], r["n_allreduce"], r["numel"],
          r["dtype"], r["eager_ms_per_forward"], graph, r["nccl_version"]))
EOF
fi

[ $FAIL = 0 ] && say "RESULT: PASS" || say "RESULT: FAIL"
exit $FAIL
