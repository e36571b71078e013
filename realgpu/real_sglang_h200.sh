#!/usr/bin/env bash
# The collection against a REAL SGLang 0.5.23 server (EAGLE-3, tp 1) on one lent GPU machine (H100 or H200), with a
# real model pair: SmolLM2-135M-Instruct (from a PyPI wheel) and an EAGLE-3 draft trained there on its own outputs.
# realgpu/real_sglang_prepare.sh builds the payload (split in parts) and prints the device calls:
#   stash .devcarry/pN     copy one payload part into /tmp/stash (the machine keeps /tmp while warm, 30 s)
#   env                    the machine's facts ($OUT/machine.txt)
#   background PHASES...   run PHASES from a copy of this checkout in a session of their own (a call's other
#                          processes end with it), log in $RUN/background.log; later calls `poll`
#   poll SECONDS           wait for the background phases (at most SECONDS), then pack what they wrote into $OUT
# Phases:
#   unpack     join the parts, check SHA256SUMS, unpack the site (SGLang route C, ansible-core) into /tmp/site
#   install    the "venv" wrapper, shims, provenance tree, the import check
#   pair       the target from the GGUF (realgpu/smollm2_checkpoint.py), then the draft (realgpu/eagle3_draft.py:
#              gen and train side by side on the GPU, about 5 minutes, in the background of the next phases), into
#              /opt/gpuserve-realgpu/models; pairwait waits for them
#   refusals   settings refused before anything stops, against the real install: EAGLE with an EAGLE-3 draft,
#              a host the machine cannot bind
#   bench      playbooks/benchmark.yml (realgpu/h200/bench_vars.yml), beside the 1 ms NVML observer and a
#              /metrics capture
#   stops      REPS (10) restarts through playbooks/restart_server.yml with the lifecycle's stop (gpuserve-sglang
#              stop, in one gpu_release call with the release and the start), beside the 1 ms NVML observer; the
#              last two with requests in flight (realgpu/inflight_client.py): drained (bound 60 s), then cut (1 s).
#              Each restart's manifest: SIGKILL -> gate vs the physical release, the downtime broken down, where
#              start -> ready went (`startup`). About 50 s a restart on an H200 (start -> ready 42-44 s): 10 take
#              about 8.5 min; deploys first (about 2-3 min, the first start's JIT builds) if no server runs
#   rollback   a post-stop failure SGLang really hits, then the rollback: ROLLBACK_ARGS (default mem_fraction_static
#              0.001: every check before the stop passes, SGLang refuses it after loading the weights, "Loaded
#              weights leave no GPU memory for the KV cache"). About 2 min (the failed start, the rollback's start)
#   stops and rollback write stops.tgz with realgpu/stops_report.py's tables (report.md)
#   health, server, lifecycle, reps: the earlier runs' phases (docs/benchmarks.md)
#
# SIMULATED / shims, all labelled GPUSERVE-REALGPU-SHIM: realgpu/shim/pct (no Proxmox: runs the command in place),
# realgpu/shim/systemctl + journalctl (only when PID 1 is not systemd), the venv (a wrapper running the machine's
# Python with the wheels on PYTHONPATH). Everything else is real.
set -uo pipefail
WT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STASH=/tmp/stash
OUT=${OUT:-/tmp/out}
R=/opt/gpuserve-realgpu
RUN=/tmp/gpuserve-realgpu
SITE=/tmp/site
mkdir -p "$STASH" "$OUT" "$RUN"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 LC_ALL=C.UTF-8
PY=$(command -v python3)
T0=$(date +%s.%N)
# The device call ends at 600 s: every step runs under what is left of LIMIT_S (from this script's start), so
# the results are packed before the call is cut.
LIMIT_S=${LIMIT_S:-570}
left() { awk -v a="$T0" -v b="$(date +%s.%N)" -v l="$LIMIT_S" 'BEGIN{v=int(l-(b-a)); print (v > 0 ? v : 1)}'; }
say() { printf '[%s +%6.1fs] %s\n' "$(date -u +%T)" "$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*"; }
timed() {  # timed NAME CMD...: run, keep rc and wall seconds in $RUN/times.tsv
    local name=$1 t rc; shift
    t=$(date +%s.%N); "$@"; rc=$?
    printf '%s\t%s\t%.3f\n' "$name" "$rc" "$(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" >>"$RUN/times.tsv"
    say "$name: rc $rc"
    return $rc
}
pack() {  # pack NAME DIR...: one tarball back in $OUT
    tar -czf "$OUT/$1.tgz" --ignore-failed-read "${@:2}" 2>/dev/null; ls -l "$OUT/$1.tgz"
}

use_site() {
    export PYTHONPATH=$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages
    export SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 SGLANG_IS_FLASHINFER_AVAILABLE=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    export PATH=$R/shim/bin:$PATH ANSIBLE_CONFIG=$WT/ansible.cfg ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
    # each task's time in every play's log: ansible.posix's profile_tasks callback (GPL-3.0, carried as a file
    # beside the wheels by real_sglang_prepare.sh; the machine's ansible-core has no timing callback of its own)
    if [ -f "$STASH/profile_tasks.py" ]; then
        mkdir -p "$STASH/callback" && cp -f "$STASH/profile_tasks.py" "$STASH/callback/"
        export ANSIBLE_CALLBACK_PLUGINS=$STASH/callback ANSIBLE_CALLBACKS_ENABLED=profile_tasks \
            PROFILE_TASKS_TASK_OUTPUT_LIMIT=all PROFILE_TASKS_SORT_ORDER=none
    fi
}

phase_stash() {  # copy one carried folder's payload into /tmp/stash
    local src=$1
    cp -f "$src"/* "$STASH"/ 2>/dev/null
    rm -f "$STASH/wt.tgz"
    say "stash: $(ls "$STASH" | wc -l) files, $(du -sm "$STASH" | cut -f1) MB"
}

phase_env() {
    local d=$RUN/env; mkdir -p "$d"
    {
        date -u +%FT%TZ; uname -a; nproc; free -g; df -h / /tmp
        echo "PID 1: $(cat /proc/1/comm) ($(tr '\0' ' ' </proc/1/cmdline))"
        ls -d /run/systemd/system 2>&1; command -v systemctl journalctl git fuser ps gcc unzip nvidia-smi 2>&1
        echo "PATH=$PATH"; echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; ldconfig -p | grep -E 'libcuda.so|libnvidia-ml'
        env | grep -E '^(CUDA|NVIDIA|NCCL|TORCH|HF_|TRANSFORMERS|PYTHON|HOME|USER|LANG)' 
        ls -l /usr/bin/python3 2>&1; echo "python3: $PY $($PY --version 2>&1)"
        echo "cgroup: $(stat -fc %T /sys/fs/cgroup) $(ls /sys/fs/cgroup | tr '\n' ' ')"; cat /proc/self/cgroup
        mount | grep -i cgroup
        ls /proc/driver/nvidia/gpus/ && cat /proc/driver/nvidia/gpus/*/information; cat /proc/driver/nvidia/version
        ls -l /dev/nvidia*
        nvidia-smi
        $PY -m pip show torch triton transformers tokenizers nvidia-nccl-cu13 nvidia-cudnn-cu13 nvidia-cublas \
            cuda-bindings cuda-python cuda-core pyarrow fsspec huggingface-hub pandas numpy nvidia-ml-py jinja2 \
            pyyaml packaging aiohttp requests 2>&1 | grep -E '^(Name|Version)'
        g++ --version 2>&1 | head -1; ps -eo pid,ppid,comm,args | head -40
    } >"$d/machine.txt" 2>&1
    cp "$d/machine.txt" "$OUT/machine.txt"
    say "env: PID 1 $(cat /proc/1/comm); systemd $([ -d /run/systemd/system ] && echo yes || echo no); git $(command -v git || echo none)"
}

phase_health() {
    timed health "$PY" "$WT/realgpu/gpu_health_capture.py" "$RUN/health" >"$RUN/health.log" 2>&1
    tail -n 3 "$RUN/health.log"
    pack health -C "$RUN" health health.log
}

phase_unpack() {  # join the payload parts, check them, unpack the site
    local d=$RUN/install; mkdir -p "$d" "$STASH/payload"
    (cd "$STASH" && cat payload.part-* | tar -xf - -C payload && rm -f payload.part-* &&
        cd payload && sha256sum -c --quiet SHA256SUMS) >"$d/sha256.txt" 2>&1 ||
        { cat "$d/sha256.txt"; say "unpack: the payload did not arrive whole"; return 1; }
    mkdir -p "$SITE" && timed unpack_site tar -xJf "$STASH/payload/site.tar.xz" -C "$SITE" || return 1
    tar -xJf "$STASH/payload/pair.tar.xz" -C "$STASH/payload" || return 1
    cp -f "$STASH"/payload/psmisc_*.deb "$STASH"/payload/profile_tasks.py "$STASH/" 2>/dev/null
    say "unpack: site $(du -sm "$SITE" | cut -f1) MB"
}

phase_install() {
    local d=$RUN/install; mkdir -p "$d"
    # sgl-flash-mla is not carried; sglang imports it for an isinstance check only (realgpu/shim/flash_mla)
    rm -rf "$SITE/flash_mla"; cp -r "$WT/realgpu/shim/flash_mla" "$SITE/flash_mla"
    timed compileall "$PY" -m compileall -q -j 16 "$SITE/sglang" "$SITE/sgl_kernel" "$SITE/transformers" >/dev/null 2>&1
    command -v fuser >/dev/null || { for f in "$STASH"/psmisc_*.deb; do dpkg -x "$f" /; done; }
    [ -x /usr/bin/python3 ] || { ln -s "$PY" /usr/bin/python3; echo "linked /usr/bin/python3 -> $PY" >>"$d/notes.txt"; }
    # GPUSERVE-REALGPU-SHIM: the "venv" the roles call <venv>/bin/python: the machine's Python plus the wheels
    mkdir -p "$R/venv/bin" "$R/shim/bin" "$R/models"
    cat >"$R/venv/bin/python" <<EOF
#!/bin/sh
# GPUSERVE-REALGPU-SHIM (realgpu/real_sglang_h200.sh): not a venv. The machine's Python ($PY, torch 2.11) with
# the carried wheels (SGLang 0.5.23, route C) first on sys.path, and the two settings route C needs.
PYTHONPATH=$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}
# The Rust radix TreeCore panics on torch 2.11 ("UnknownKind(28)", seen 2026-12-03): SGLang's Python TreeCore.
export SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=python
export PYTHONPATH SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 SGLANG_IS_FLASHINFER_AVAILABLE=false HF_HUB_OFFLINE=1
exec $PY "\$@"
EOF
    chmod 755 "$R/venv/bin/python"; ln -sf python "$R/venv/bin/python3"
    # a venv with sglang has its pip dependency `ninja` in bin/, which the unit puts first on PATH: SGLang's JIT
    # kernels run it (the machine's own is in its torch venv)
    ln -sf "$(dirname "$PY")/ninja" "$R/venv/bin/ninja"
    cp "$WT/realgpu/shim/pct" "$R/shim/bin/pct"
    if [ "$(cat /proc/1/comm)" != systemd ]; then
        cp "$WT/realgpu/shim/systemctl" "$WT/realgpu/shim/journalctl" "$R/shim/bin/"
        echo "systemd: not PID 1 ($(cat /proc/1/comm)): systemctl/journalctl shims installed" >>"$d/notes.txt"
        if [ ! -f /sys/fs/cgroup/cgroup.procs ] && [ ! -f /sys/fs/cgroup/unified/cgroup.procs ]; then
            mkdir -p /sys/fs/cgroup/unified 2>/dev/null
            mount -t cgroup2 none /sys/fs/cgroup 2>>"$d/notes.txt" || mount -t cgroup2 none /sys/fs/cgroup/unified 2>>"$d/notes.txt"
            echo "cgroup2 mounted: $(mount | grep cgroup2)" >>"$d/notes.txt"
        fi
    fi
    chmod 755 "$R/shim/bin"/*
    # A service starts with systemd's environment, not this shell's: the driver's libraries and nvidia-smi must be
    # where a host has them (the ld.so cache, /usr/bin or /usr/local/bin). Machine setup, recorded, not a shim.
    mkdir -p /etc/systemd/system
    local smi; smi=$(command -v nvidia-smi)
    case ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" in
        *":$(dirname "$smi"):"*) ;;
        *) ln -sf "$smi" /usr/local/bin/nvidia-smi; echo "nvidia-smi $smi linked into /usr/local/bin" >>"$d/notes.txt" ;;
    esac
    if ! ldconfig -p | grep -q 'libcuda.so.1 '; then
        local dirs; dirs=$(for f in $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do [ -e "$f/libcuda.so.1" ] && echo "$f"; done)
        [ -n "$dirs" ] && { echo "$dirs" >/etc/ld.so.conf.d/gpuserve-realgpu.conf; ldconfig; }
        echo "libcuda.so.1 not in the ld.so cache; added: ${dirs:-nothing found on LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}}" >>"$d/notes.txt"
    fi
    [ -n "${SKIP_IMPORT_CHECK:-}" ] || timed imports "$R/venv/bin/python" -c '
import time; t = time.time()
import torch, sgl_kernel, sglang, cutlass, transformers, datasets
from sglang.srt.server_args import prepare_server_args
import sglang.benchmark.serving
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), "sglang", sglang.__version__,
      "sgl_kernel", sgl_kernel.__version__, "transformers", transformers.__version__, "datasets", datasets.__version__,
      "cutlass", getattr(cutlass, "__version__", "?"), "import %.1f s" % (time.time() - t))' >"$d/imports.txt" 2>&1 ||
        { tail -n 30 "$d/imports.txt"; return 1; }
    tail -n 2 "$d/imports.txt" 2>/dev/null
    # the provenance tree the role's state/source readers and the benchmark read (commit + dirty)
    if command -v git >/dev/null; then
        rm -rf "$R/src"; mkdir -p "$R/src"
        cp "$SITE"/sglang-0.5.23.dist-info/METADATA "$SITE"/sglang-0.5.23.dist-info/RECORD "$R/src/"
        cp "$STASH/payload/SHA256SUMS" "$R/src/PAYLOAD.sha256"
        printf '%s\n' "Provenance of the wheels installed by realgpu/real_sglang_h200.sh (route C): NOT SGLang's source." \
            >"$R/src/README"
        git -C "$R/src" init -q && git -C "$R/src" add -A &&
            git -C "$R/src" -c user.name=gpuserve-realgpu -c user.email=realgpu@invalid commit -qm "sglang 0.5.23 wheels, route C"
        git -C "$R/src" log --oneline >>"$d/notes.txt"
    else
        echo "no git on the machine: the role's tree readers will report an error" >>"$d/notes.txt"
    fi
    cat "$d/notes.txt" 2>/dev/null
}

phase_pair() {  # the real target from the GGUF, then its EAGLE-3 draft: gen and train start on the GPU and run on
    # while the next phases use the CPU; pairwait waits for them
    local d=$RUN/pair m=$R/models; mkdir -p "$d" "$m"
    use_site
    rm -rf "$m/target" "$m/draft" && cp -r "$STASH/payload/target" "$m/target"
    timed target "$PY" "$WT/realgpu/smollm2_checkpoint.py" "$STASH/payload/SmolLM2-135M-Instruct.Q4_1.gguf" \
        "$m/target" --no-small-files >"$d/target.txt" 2>&1 || { tail -n 20 "$d/target.txt"; return 1; }
    local pr=$STASH/payload/prompts data=$RUN/pairdata
    rm -rf "$data"
    "$PY" "$WT/realgpu/eagle3_draft.py" gen --target "$m/target" --prompts "$pr/train.jsonl" \
        --eval-prompts "$pr/mtbench.jsonl" "$pr/heldout.json" --data "$data" --budget-s "${GEN_S:-200}" \
        --max-samples "${GEN_SAMPLES:-0}" \
        >"$d/gen.log" 2>&1 &
    echo $! >"$d/gen.pid"
    timed train "$PY" "$WT/realgpu/eagle3_draft.py" train --target "$m/target" --data "$data" --out "$m/draft" \
        --budget-s "${TRAIN_S:-290}" --max-steps "${TRAIN_STEPS:-0}" >"$d/train.log" 2>&1 &
    echo $! >"$d/train.pid"
    say "pair: gen pid $(cat "$d/gen.pid"), train pid $(cat "$d/train.pid")"
}

phase_pairwait() {
    local d=$RUN/pair m=$R/models rc=0
    while kill -0 "$(cat "$d/train.pid")" 2>/dev/null || kill -0 "$(cat "$d/gen.pid")" 2>/dev/null; do sleep 2; done
    grep -q '"msg": "train done"' "$d/train.log" || rc=1
    cp "$m/draft/training.json" "$d/" 2>/dev/null
    sha256sum "$m"/target/model.safetensors "$m"/draft/model.safetensors >"$d/sha256.txt" 2>&1
    "$PY" "$WT/realgpu/eagle3_draft.py" names "$m/draft" >"$d/names.json" 2>&1 || rc=1
    grep -hE '"msg": "(eval|train done|gen done)"' "$d/gen.log" "$d/train.log" | cut -c1-300 | tail -n 6
    return $rc
}

phase_refusals() {  # settings refused before anything stops, against the real install (no server needed)
    local d=$RUN/lifecycle; mkdir -p "$d"
    use_site; device_minor
    timed argv "$PY" -m ansible.cli.playbook "${INV[@]}" -e h200_argv_out="$d/argv.json" "$WT/realgpu/h200/argv.yml" \
        >"$d/argv.ansible.log" 2>&1 || { tail -n 30 "$d/argv.ansible.log"; return 1; }
    # a draft the algorithm cannot use: SGLang would serve it at accept length 1.00 with no error
    play refuse_eagle_draft "$WT/realgpu/h200/deploy.yml" -e '{"h200_server_args_extra": {"speculative_algorithm": "EAGLE"}}'
    # a host the machine does not have: real SGLang hangs at torch.distributed's init there; the listen check
    # refuses it before the stop
    play refuse_host "$WT/realgpu/h200/deploy.yml" -e '{"h200_server_args_extra": {"host": "192.0.2.1"}}'
    return 0  # each refusal's rc is in times.tsv: a refusal is rc 2
}

device_minor() {  # INV: the inventory, with the GPU's device minor as the driver reports it
    MINOR=$(sed -n 's/^Device Minor:[[:space:]]*//p' /proc/driver/nvidia/gpus/*/information 2>/dev/null | head -1)
    INV=(-i "$WT/realgpu/h200/inventory.yml" -e "{\"gpuserve_gpus\": [${MINOR:-0}]}")
}

phase_server() {
    local d=$RUN/server; mkdir -p "$d"
    use_site; device_minor
    timed argv "$PY" -m ansible.cli.playbook "${INV[@]}" -e h200_argv_out="$d/argv.json" "$WT/realgpu/h200/argv.yml" \
        >"$d/argv.ansible.log" 2>&1 || { tail -n 30 "$d/argv.ansible.log"; return 1; }
    say "argv: $(cat "$d/argv.json")"
    timed fidelity timeout "$(( $(left) - 15 ))" "$PY" "$WT/realgpu/sglang_fidelity.py" --out "$d" --python "$R/venv/bin/python" \
        --args-json "$(cat "$d/argv.json")" --env-file /etc/gpuserve/nccl.env --release-reps "${REPS:-2}" \
        --budget-s "$(( $(left) - 40 ))" --ready-timeout "${READY_TIMEOUT_S:-240}" 2>&1 | tee "$d/fidelity.txt"
    grep -E 'fired up|Uvicorn running|error|Error|Traceback' "$d/server0.log" | head -20
    pack server -C "$RUN" server install env times.tsv
}

observer() {  # start the NVML observer (protected by gpu_release as a monitoring exporter)
    # `exec -a` hides the venv from Python (argv[0] no longer finds it): hand it the same sys.path
    local path; path=$("$PY" -c 'import sys; print(":".join(p for p in sys.path[1:] if p))')
    (PYTHONPATH=$path exec -a nvidia_gpu_exporter-gpuserve-observer "$PY" "$WT/realgpu/nvml_observer.py" "$1") &
    OBS=$!
}

play() {  # play NAME PLAYBOOK [ARGS...]: one ansible-playbook run, its log, rc and wall time
    local name=$1 book=$2; shift 2
    if [ "$(left)" -lt 60 ]; then say "$name: skipped, $(left) s left"; echo -e "$name\tskipped\t0" >>"$RUN/times.tsv"; return 1; fi
    timed "$name" timeout "$(( $(left) - 20 ))" "$PY" -m ansible.cli.playbook "${INV[@]}" "$@" "$book" \
        >"$RUN/lifecycle/$name.log" 2>&1
    local rc=$?
    pack "${PACK_NAME:-lifecycle}" -C "$RUN" lifecycle times.tsv >/dev/null
    grep -E 'GPUSERVE_VERIFY|GPUSERVE_AUDIT|^PLAY RECAP' -A2 "$RUN/lifecycle/$name.log" | grep -v '^--' | cut -c1-400 | tail -n 4
    [ $rc -eq 0 ] || grep -E 'fatal:|FAILED!|"msg":' "$RUN/lifecycle/$name.log" | cut -c1-600 | tail -n 4
    return $rc
}

main_pid() { systemctl show sglang.service --property=MainPID --value; }

phase_lifecycle() {
    local d=$RUN/lifecycle; mkdir -p "$d"
    use_site; device_minor
    observer "$d/observer.jsonl"
    play deploy "$WT/realgpu/h200/deploy.yml"
    local pid1; pid1=$(main_pid); say "deployed: MainPID $pid1"
    # ONLY_DEPLOY=1: the deploy alone (when the device time left allows no more)
    [ -n "${ONLY_DEPLOY:-}" ] && { lifecycle_collect "$d"; return 0; }
    play restart "$WT/playbooks/restart_server.yml"
    local pid2; pid2=$(main_pid); say "restarted: MainPID $pid2"
    # SKIP_REFUSALS=1 / SKIP_ROLLBACK=1: leave out cases already recorded (results/2026-12-03-h200-real-sglang-lifecycle)
    [ -n "${SKIP_REFUSALS:-}" ] || lifecycle_refusals "$pid2"
    # ROLLBACK_ARGS='{"key": value}': server args SGLang accepts that fail only after the stop, for the rollback case.
    # None is known for the real server since the listen check refuses host 192.0.2.1 before the stop
    # (lifecycle_refusals); the case is left out unless it is named.
    [ -n "${SKIP_ROLLBACK:-}" ] || [ -z "${ROLLBACK_ARGS:-}" ] || {
        play rollback "$WT/realgpu/h200/deploy.yml" -e "{\"h200_server_args_extra\": $ROLLBACK_ARGS}"
        say "after the rollback: MainPID $(main_pid)"; }
    play audit "$WT/playbooks/audit.yml"
    lifecycle_collect "$d"
}

lifecycle_refusals() {  # an argument SGLang refuses, and an abbreviation SGLang would accept: refused before anything stops
    play refuse_unknown "$WT/realgpu/h200/deploy.yml" -e '{"h200_server_args_extra": {"no_such_flag": true}}'
    play refuse_abbrev "$WT/realgpu/h200/deploy.yml" -e '{"h200_server_args_extra": {"speculative_num_step": 3}}'
    # a host the machine does not have: real SGLang hangs at torch.distributed's init there (second run), the
    # listen check refuses it before the stop
    play refuse_host "$WT/realgpu/h200/deploy.yml" -e '{"h200_server_args_extra": {"host": "192.0.2.1"}}'
    say "after the refusals: MainPID $(main_pid) (was $1)"
}

lifecycle_collect() {
    local d=$1
    kill "$OBS" 2>/dev/null
    cp -r /var/lib/gpuserve "$d/var-lib-gpuserve" 2>/dev/null
    cp /etc/gpuserve/* /etc/systemd/system/sglang.service "$d/" 2>/dev/null
    cp -r /run/gpuserve-shim "$d/shim-state" 2>/dev/null
    journalctl --unit sglang.service --no-pager --output short-iso >"$d/journal.txt" 2>&1
    ps -eo pid,ppid,pgid,sid,stat,comm,args >"$d/ps.txt"
    cat /proc/"$(main_pid)"/cgroup >"$d/main_cgroup.txt" 2>&1
    pack lifecycle -C "$RUN" lifecycle times.tsv
}

metrics_capture() {  # the server's /metrics every 15 s while $1 lives (real pages: fixtures, and what a canary reads)
    local dir=$2; mkdir -p "$dir"
    while kill -0 "$1" 2>/dev/null; do
        "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:30000/metrics", timeout=5).read().decode())' \
            >"$dir/metrics-$(date +%s).txt" 2>/dev/null || rm -f "$dir/metrics-$(date +%s).txt"
        sleep 15
    done
}

phase_bench() {
    local d=$RUN/lifecycle; mkdir -p "$d"
    use_site; device_minor
    observer "$d/observer-bench.jsonl"
    # shellcheck disable=SC2086
    PACK_NAME=bench play bench "$WT/playbooks/benchmark.yml" -e "@$WT/realgpu/h200/bench_vars.yml" ${BENCH_ARGS:-} &
    local bench=$!
    metrics_capture "$bench" "$RUN/bench/metrics" &
    wait "$bench"
    kill "$OBS" 2>/dev/null
    cp -r /var/lib/gpuserve "$d/var-lib-gpuserve-after-bench" 2>/dev/null
    cp -r /run/gpuserve-shim "$d/shim-state-after-bench" 2>/dev/null
    mkdir -p "$RUN/bench"; cp -r /tmp/gpuserve-realgpu/benchmark "$RUN/bench/" 2>/dev/null
    cp "$d/bench.log" "$RUN/bench/"; cp -r /var/lib/gpuserve/benchmark/*.jsonl "$RUN/bench/" 2>/dev/null
    pack bench -C "$RUN" bench lifecycle/observer-bench.jsonl lifecycle/var-lib-gpuserve-after-bench \
        lifecycle/shim-state-after-bench times.tsv
}

phase_reps() {  # gpu_release + gate against a live real server, REPS times, beside the NVML observer (item 2)
    local d=$RUN/reps; mkdir -p "$d"
    use_site; device_minor
    # the unit's server goes first (the reps start theirs directly, as sglang_fidelity.py's capture did)
    systemctl stop sglang.service >"$d/unit_stop.txt" 2>&1
    timed reps_argv "$PY" -m ansible.cli.playbook "${INV[@]}" -e h200_argv_out="$d/argv.json" "$WT/realgpu/h200/argv.yml" \
        >"$d/argv.ansible.log" 2>&1 || { tail -n 30 "$d/argv.ansible.log"; return 1; }
    timed reps timeout "$(( $(left) - 10 ))" "$PY" "$WT/realgpu/sglang_fidelity.py" --out "$d" --python "$R/venv/bin/python" \
        --args-json "$(cat "$d/argv.json")" --env-file /etc/gpuserve/nccl.env --skip-capture --release-reps "${REPS:-10}" \
        --budget-s "$(( $(left) - 25 ))" --ready-timeout 240 2>&1 | tee "$d/reps.txt" | grep -E 'release-|skipped'
    gzip -f "$d"/release-*.server.log 2>/dev/null
    pack reps -C "$RUN" reps times.tsv
}

stops_collect() {  # the manifests, the shim's stop records, the journal and the report, packed as stops.tgz
    local d=$1
    kill "${OBS:-}" 2>/dev/null
    rm -rf "$d/var-lib-gpuserve" && cp -r /var/lib/gpuserve "$d/var-lib-gpuserve" 2>/dev/null
    cp "$RUN/lifecycle/observer-bench.jsonl" "$d/" 2>/dev/null  # the bench's restarts have their stops too
    cp -r /run/gpuserve-shim "$d/shim-state" 2>/dev/null
    journalctl --unit sglang.service --no-pager --output short-iso >"$d/journal.txt" 2>&1
    "$PY" "$WT/realgpu/stops_report.py" "$d" >"$d/report.md" 2>&1
    head -n 20 "$d/report.md"
    pack stops -C "$RUN" stops lifecycle times.tsv
}

phase_stops() {
    local d=$RUN/stops n=${REPS:-10} i; mkdir -p "$d" "$RUN/lifecycle"  # play() logs there
    use_site; device_minor
    [ "$(main_pid)" -gt 0 ] 2>/dev/null || play stops_deploy "$WT/realgpu/h200/deploy.yml" || return 1
    observer "$d/observer.jsonl"
    for i in $(seq 1 "$n"); do
        local extra=() client=""
        if [ "$n" -ge 2 ] && [ "$i" -ge $((n - 1)) ]; then
            # requests back to back until /health leaves 200 (SGLang's answer from its SIGTERM on), 1500 tokens
            # each (about 4 s): in flight at the stop. Drained within 60 s, then cut at 1 s.
            "$PY" "$WT/realgpu/inflight_client.py" --tokens 1500 --workers 2 --out "$d/requests-$i.jsonl" \
                --limit-s 240 &
            client=$!
            sleep 2
            if [ "$i" -eq "$n" ]; then extra=(-e sglang_server_stop_drain_timeout=1)
            else extra=(-e sglang_server_stop_drain_timeout=60); fi
        fi
        PACK_NAME=stops play "stop_$i" "$WT/playbooks/restart_server.yml" "${extra[@]}"
        local rc=$?
        [ -z "$client" ] || wait "$client"
        [ $rc -eq 0 ] || break
    done
    stops_collect "$d"
}

phase_rollback() {
    local d=$RUN/stops before args=${ROLLBACK_ARGS:-'{"mem_fraction_static": 0.001}'}; mkdir -p "$d" "$RUN/lifecycle"
    use_site; device_minor
    [ "$(main_pid)" -gt 0 ] 2>/dev/null || play rollback_deploy "$WT/realgpu/h200/deploy.yml" || return 1
    before=$(main_pid)
    observer "$d/observer-rollback.jsonl"
    PACK_NAME=stops play rollback "$WT/realgpu/h200/deploy.yml" -e "{\"h200_server_args_extra\": $args}"
    say "rollback: rc $? (2 expected: the restart failed, the last verified config serves again), MainPID $before -> $(main_pid)"
    grep -E "Loaded weights leave no GPU memory|Not enough memory|Rollback: " "$RUN/lifecycle/rollback.log" | cut -c1-300 | head -n 4
    stops_collect "$d"
}

phase_background() {  # the phases given, from a copy of this checkout, in a session of their own
    rm -rf "$STASH/wtbg" && cp -a "$WT" "$STASH/wtbg" && rm -f "$RUN/background.done"
    LIMIT_S=${BG_LIMIT_S:-1560} OUT=$RUN/out setsid nohup bash "$STASH/wtbg/realgpu/real_sglang_h200.sh" "$@" \
        >"$RUN/background.log" 2>&1 </dev/null &
    say "background: $* (pid $!, log $RUN/background.log)"
}

poll() {  # wait for the background phases (at most $1 s, or until $POLL_UNTIL exists), then bring back what is there
    local t0=$SECONDS
    while [ $((SECONDS - t0)) -lt "$1" ] && [ ! -f "$RUN/background.done" ] &&
          ! compgen -G "${POLL_UNTIL:-/nonexistent}" >/dev/null; do sleep 5; done
    grep -E '^\[' "$RUN/background.log" | tail -n 30
    [ -f "$RUN/background.done" ] && say "background done: rc $(cat "$RUN/background.done")" || say "background still running"
    cp "$RUN/out/machine.txt" "$OUT/" 2>/dev/null
    cp "$R/models/draft/model.safetensors" "$OUT/draft-model.safetensors" 2>/dev/null
    tar -czf "$OUT/run.tgz" --exclude='*.safetensors' --exclude=pairdata --exclude=out -C /tmp gpuserve-realgpu 2>/dev/null
    ls -l "$OUT"
}

for p in "$@"; do
    case $p in
        stash|poll) ;;  # take the next word
        env|health|unpack|install|pair|pairwait|refusals|server|lifecycle|bench|reps|stops|rollback|background) ;;
        .devcarry/*|[0-9]*) ;;
        *) echo "unknown phase $p" >&2; exit 64 ;;
    esac
done
rc=0
while [ $# -gt 0 ]; do
    case $1 in
        stash) phase_stash "$2" || rc=1; shift 2 ;;
        poll) poll "$2"; shift 2 ;;
        background) shift; phase_background "$@"; exit 0 ;;
        *) say "=== $1"; "phase_$1" || { rc=1; say "phase $1 failed"; case $1 in unpack|install|pair|pairwait) break ;; esac; }
           shift ;;
    esac
done
say "done (rc $rc)"
[ "${OUT:-}" = "$RUN/out" ] && echo "$rc" >"$RUN/background.done"
exit $rc
