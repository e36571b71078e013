#!/usr/bin/env bash
# The batched real-GPU run recorded in docs/benchmarks.md: one call on a lent H200 machine (no network there).
# Wheels for ansible-core (and a psmisc .deb for fuser when the image lacks it) travel in .whl/.
#   realgpu/run_h200.sh            on N GPUs (N = what nvidia-smi lists): gpu_release with 1 holder, the
#                                benchmark's GPU-state module idle/under load/after, gpu_release with N holders,
#                                then the NCCL hook check + verify-step cost model on N ranks
# Prepare .whl/ here first (ignored by git; name it in the device call's carry):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     ansible-core==2.21.5 jinja2==3.1.6 MarkupSafe PyYAML==6.0.4 cryptography==50.0.2 cffi pycparser packaging resolvelib
#   (cd .whl && apt-get download psmisc)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site || exit 1
command -v fuser >/dev/null || { for d in .whl/psmisc_*.deb; do dpkg -x "$d" /; done; }
N=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
{ date -u +%FT%TZ; uname -r; nvidia-smi; python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.nccl.version())'; } \
    > "$OUT/logs/machine.txt" 2>&1
rc=0
OUT=$OUT/logs/release1 NGPUS=1 realgpu/gpu_release_gpu.sh > "$OUT/logs/release1.txt" 2>&1 || rc=1
OUT=$OUT/logs/gpu_state realgpu/gpu_state_gpu.sh > "$OUT/logs/gpu_state.txt" 2>&1 || rc=1
if [ "$N" -gt 1 ]; then
    OUT=$OUT/logs/releaseN NGPUS=$N realgpu/gpu_release_gpu.sh > "$OUT/logs/releaseN.txt" 2>&1 || rc=1
    OUT=$OUT/logs/nccl realgpu/nccl_check.sh --world-size "$N" --timing > "$OUT/logs/nccl.txt" 2>&1 || rc=1
fi
tar -C "$OUT" -czf "$OUT/results.tgz" logs
for f in machine release1 gpu_state releaseN nccl; do [ -f "$OUT/logs/$f.txt" ] && cp "$OUT/logs/$f.txt" "$OUT/$f.txt"; done
rm -rf "$OUT/logs"
tail -n 40 "$OUT"/release1.txt "$OUT"/gpu_state.txt "$OUT"/releaseN.txt "$OUT"/nccl.txt 2>/dev/null
exit $rc
