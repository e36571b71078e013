#!/usr/bin/env bash
# Real-GPU check of gpuserve.sglang.gpu_release and its zero-memory gate.
#
# On one GPU host (root): starts a PyTorch process holding HOLD_GIB GiB titled `sglang::scheduler_TP0` and a
# protected one titled `nvidia_gpu_exporter` (an NVML handle only, no memory), then through ansible-playbook
# (localhost, connection local) runs gpu_release in check mode, for real, and once more (must be unchanged);
# then "the story's way" on a fresh holder: kill, sleep 3, one nvidia-smi. Prints both side by side and shows
# the exporter survived. Everything goes under $OUT. Takes about 1-2 minutes.
#
#   realgpu/gpu_release_gpu.sh             the real run (needs an NVIDIA GPU, torch and nvidia-ml-py)
#   realgpu/gpu_release_gpu.sh --dry-run   no GPU: syntax checks, then the same playbook against a CPU process
#                                        holding a file, a SIMULATED nvidia-smi and a bench-only server pattern
# Env: PYTHON            python3 with torch + nvidia-ml-py; also the modules' interpreter (default python3)
#      ANSIBLE_PLAYBOOK  the ansible-playbook command (default: on PATH, else "$PYTHON -m ansible.cli.playbook");
#                        ansible-core may come from wheels on PYTHONPATH (e.g. /tmp/site)
#      HOLD_GIB (100), OUT (/tmp/out)
#      NGPUS (1): one holder per GPU 0..NGPUS-1 (titled sglang::scheduler_TP<i>); the gate checks all of them and
#                 reports per-GPU release times (clear_at_s)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/out}
HOLD_GIB=${HOLD_GIB:-100}
NGPUS=${NGPUS:-1}
PYBIN=$(command -v "${PYTHON:-python3}")
DRY=false
[ "${1:-}" = --dry-run ] && DRY=true
mkdir -p "$OUT"
exec > >(tee "$OUT/bench.log") 2>&1

if [ -n "${ANSIBLE_PLAYBOOK:-}" ]; then
    read -r -a PLAYBOOK <<<"$ANSIBLE_PLAYBOOK"
elif command -v ansible-playbook >/dev/null; then
    PLAYBOOK=(ansible-playbook)
else
    PLAYBOOK=("$PYBIN" -m ansible.cli.playbook)
fi
export ANSIBLE_CONFIG="$ROOT/ansible.cfg" LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1
# `exec -a TITLE python` hides the venv from Python (argv[0] no longer finds it): hand it the same sys.path.
HOLDER_PATH=$("$PYBIN" -c 'import sys; print(":".join(p for p in sys.path[1:] if p))')
PIDS=()

cleanup() { for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

say() { printf '[%s] %s\n' "$(date +%T.%N | cut -c1-12)" "$*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# start_holder TITLE READY ARGS...: a holder whose command line starts with TITLE, in its own session.
start_holder() {
    local title=$1 ready=$2; shift 2
    rm -f "$ready"
    PYTHONPATH="$HOLDER_PATH" setsid bash -c 'exec -a "$0" "$@"' "$title" "$PYBIN" "$ROOT/realgpu/gpu_holder.py" \
        "$@" "$ready" >"$ready.log" 2>&1 &
    HOLDER=$!
    PIDS+=("$HOLDER")
    local t=0
    until [ -s "$ready" ]; do
        alive "$HOLDER" || { cat "$ready.log"; say "holder '$title' died"; exit 1; }
        sleep 0.2; t=$((t + 1))
        [ $t -lt 600 ] || { say "holder '$title' not ready after 120 s"; exit 1; }
    done
    say "holder '$title' pid $HOLDER: $(cat "$ready")"
}

# The least memory.used over GPUs 0..NGPUS-1.
smi_used() {
    "$NVIDIA_SMI" --query-gpu=index,memory.used --format=csv,noheader,nounits |
        awk -F', ' -v n="$NGPUS" '$1 < n { if (min == "" || $2 < min) min = $2 } END { print min + 0 }'
}

wait_used() {  # until every measured GPU shows at least $1 MiB
    local t=0
    until [ "$(smi_used)" -ge "$1" ]; do
        sleep 0.2; t=$((t + 1)); [ $t -lt 300 ] || { say "memory.used stayed under $1 MiB"; exit 1; }
    done
}

play() {  # play NAME CHECK [extra -e ...]
    local name=$1 check=$2; shift 2
    say "ansible-playbook: $name (check_mode=$check)"
    local t0; t0=$(now)
    "${PLAYBOOK[@]}" -i localhost, -c local -e ansible_python_interpreter="$PYBIN" -e bench_out="$OUT" \
        -e bench_name="$name" -e bench_check="$check" "$@" realgpu/gpu_release_gpu.yml >"$OUT/$name.ansible.log" 2>&1 ||
        { cat "$OUT/$name.ansible.log"; say "playbook $name failed"; exit 1; }
    say "  playbook wall time $(since "$t0") s"
}

say "bash -n, py_compile, --syntax-check"
bash -n "$0"
"$PYBIN" -m py_compile realgpu/gpu_holder.py realgpu/gpu_release_report.py
"${PLAYBOOK[@]}" -i localhost, --syntax-check realgpu/gpu_release_gpu.yml >/dev/null
command -v fuser >/dev/null || { say "fuser (psmisc) missing"; exit 1; }

if $DRY; then
    # SIMULATED: no GPU here. nvidia-smi stand-in reports 1000 MiB while the "server" lives, 0 after.
    sim=$OUT/dryrun; rm -rf "$sim"; mkdir -p "$sim/dev"; touch "$sim/dev/nvidia0" "$sim/dev/nvidiactl"
    cat >"$sim/nvidia-smi" <<SIM
#!/bin/sh
# GPUSERVE-BENCH-SIMULATED nvidia-smi for realgpu/gpu_release_gpu.sh --dry-run
case "\$*" in *query-compute-apps*) exit 0;; esac
used=0; kill -0 "\$(cat $sim/server.pid)" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/\$(cat $sim/server.pid)/status" && used=1000
echo "0, GPU-00000000-0000-0000-0000-000000000000, \$used, 143771"
SIM
    chmod +x "$sim/nvidia-smi"
    NVIDIA_SMI=$sim/nvidia-smi
    start_holder nvidia_gpu_exporter "$sim/exporter.ready" file "$sim/dev/nvidiactl"; exporter=$HOLDER
    start_holder gpuserve-bench-dryrun::worker "$sim/server.ready" file "$sim/dev/nvidia0"; echo "$HOLDER" >"$sim/server.pid"
    server=$HOLDER
    extra=(-e '{"bench_server_patterns": ["^gpuserve-bench-dryrun::"]}' -e "{\"bench_device_globs\": [\"$sim/dev/nvidia*\"]}"
           -e bench_nvidia_smi="$NVIDIA_SMI" -e bench_nvml=false)
    play check true "${extra[@]}"
    alive "$server" || { say "check mode killed the server"; exit 1; }
    play release false "${extra[@]}"
    play again false "${extra[@]}"
    "$PYBIN" realgpu/gpu_release_report.py "$OUT"
    alive "$server" && { say "FAIL: server survived"; exit 1; }
    alive "$exporter" || { say "FAIL: protected exporter was killed"; exit 1; }
    say "dry run OK (simulated GPU): server killed, exporter alive"
    exit 0
fi

NVIDIA_SMI=$(command -v nvidia-smi)
say "machine: $("$NVIDIA_SMI" --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0), $(date -u +%FT%TZ)"
"$PYBIN" -c 'import torch, pynvml; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
[ "$(smi_used)" -eq 0 ] || { say "GPU 0 is not idle: $(smi_used) MiB used; refusing to measure"; exit 1; }

start_holder nvidia_gpu_exporter "$OUT/exporter.ready" nvml; exporter=$HOLDER
start_servers() {  # one holder per GPU, as SGLang's TP workers
    SERVERS=()
    for ((i = 0; i < NGPUS; i++)); do
        CUDA_VISIBLE_DEVICES=$i start_holder "sglang::scheduler_TP$i" "$OUT/$1$i.ready" "$HOLD_GIB"
        SERVERS+=("$HOLDER")
    done
    wait_used $((HOLD_GIB * 1024 * 9 / 10)); say "$NGPUS GPU(s) hold at least $(smi_used) MiB each"
}
start_servers server

play check true
for s in "${SERVERS[@]}"; do alive "$s" || { say "FAIL: check mode killed holder $s"; exit 1; }; done
play release false
for s in "${SERVERS[@]}"; do alive "$s" && { say "FAIL: holder $s survived gpu_release"; exit 1; }; done
exporter_ok=false; alive "$exporter" && exporter_ok=true
play again false

say "the story's way: kill, sleep 3, one nvidia-smi"
start_servers story
fuser_v=$(fuser -v /dev/nvidia* 2>&1 || true)
t0=$(now); kill -TERM "${SERVERS[@]}"; sleep 3
reading=$("$NVIDIA_SMI" --query-gpu=index,memory.used --format=csv,noheader,nounits); story_s=$(since "$t0")
fuser_lists_exporter=false; grep -qw "$exporter" <<<"$fuser_v" && fuser_lists_exporter=true
"$PYBIN" - "$OUT/story.json" "$story_s" "$reading" "$exporter_ok" "$fuser_lists_exporter" <<'PY'
import json, sys
path, elapsed, reading, exporter_ok, fuser_exp = sys.argv[1:]
json.dump(dict(elapsed_s=float(elapsed), reading=reading, exporter_alive_after_release=exporter_ok == 'true',
               fuser_lists_exporter=fuser_exp == 'true'), open(path, 'w'))
PY
printf '%s\n' "$fuser_v" >"$OUT/fuser_v.txt"
alive "$exporter" || { say "FAIL: exporter died"; exit 1; }
"$PYBIN" realgpu/gpu_release_report.py "$OUT" | tee "$OUT/summary.txt"
