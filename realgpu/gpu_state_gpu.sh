#!/usr/bin/env bash
# Real-GPU check of gpuserve.sglang.sglang_bench_gpu_state, the GPU provenance the benchmark records before and
# after every measured run: the module on the real nvidia-smi, idle, under a bf16 matmul load
# on every GPU (clocks, power and temperature move; throttle reasons show if the load reaches a cap), and after.
# Everything goes under $OUT; prints one summary line per state. About LOAD_S + 30 seconds.
#
# Env: PYTHON (python3 with torch; also the modules' interpreter), LOAD_S (45), OUT (/tmp/out)
#      ansible-core may come from wheels on PYTHONPATH (realgpu/run_h200.sh puts them in /tmp/site)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/out}
LOAD_S=${LOAD_S:-45}
PYBIN=$(command -v "${PYTHON:-python3}")
mkdir -p "$OUT"
export ANSIBLE_CONFIG="$ROOT/ansible.cfg" LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1
N=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)

state() {  # NAME: run the module through ansible-playbook, print the summary line
    "$PYBIN" -m ansible.cli.playbook -i localhost, -c local -e ansible_python_interpreter="$PYBIN" \
        -e bench_out="$OUT" -e bench_name="$1" -e bench_expected="$N" realgpu/gpu_state_gpu.yml \
        > "$OUT/gpu_state_$1.ansible.log" 2>&1 || { cat "$OUT/gpu_state_$1.ansible.log"; exit 1; }
    "$PYBIN" - "$OUT/gpu_state_$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for g in r["gpus"]:
    print("%-5s gpu%d sm %4d MHz mem %4d MHz %3d C %6.1f W %s reasons %s %s" % (
        sys.argv[2], g["index"], g["clocks_sm_mhz"], g["clocks_mem_mhz"], g["temperature_c"], g["power_w"],
        g["pstate"], g["clocks_event_reasons_hex"], ",".join(g["clocks_event_reason_names"]) or "-"))
PY
}

state idle
"$PYBIN" - "$LOAD_S" > "$OUT/load.log" 2>&1 <<'PY' &
import sys, time, torch
end = time.time() + float(sys.argv[1])
devs = list(range(torch.cuda.device_count()))
ab = [(torch.randn(8192, 8192, device=d, dtype=torch.bfloat16), torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)) for d in devs]
n = 0
while time.time() < end:
    for (a, b) in ab:
        for _ in range(20):
            a @ b
    for d in devs:
        torch.cuda.synchronize(d)
    n += 20
print("matmuls per GPU:", n, "TFLOP/s per GPU ~", round(n * 2 * 8192 ** 3 / float(sys.argv[1]) / 1e12, 1))
PY
LOAD=$!
sleep $((LOAD_S * 2 / 3))
state busy
wait "$LOAD"
cat "$OUT/load.log"
sleep 5
state after
