#!/usr/bin/env bash
# Prepares the carry folders of realgpu/real_sglang_h200.sh (issue 29) on a machine with PyPI access, and prints
# the device calls that use them. Route C of the project's research note on SGLang on an H200 plus NVIDIA's CuTe DSL
# (`cutlass`, which sglang 0.5.23 imports for every Llama MLP; its absence ended the first try of route C).
#   realgpu/real_sglang_prepare.sh STAGE CARRY
#     STAGE  a scratch folder for the downloads (kept: a second run downloads nothing)
#     CARRY  the folder of the checkout the device call sends that git ignores (for example <checkout>/.devcarry,
#            listed in that checkout's .git/info/exclude); gets c1 c2 c3 (the wheels, each under 61 MiB with the
#            collection) and wt (the collection alone, for the later calls), each with wt.tgz = this worktree.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STAGE=$1
CARRY=$2
PLAT=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_34_x86_64)
dl() { nice python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
           "${PLAT[@]}" -d "$1" "${@:2}" 2>&1 | grep -v '^WARNING: Location' || true; }
mkdir -p "$STAGE"/{whl,big,ansible}
# sglang 0.5.23 and what its startup path imports beyond the machine's own packages (research note §2), plus
# what its benchmark client imports (datasets and multiprocess)
dl "$STAGE/whl" sglang==0.5.23 transformers==5.19.0 apache-tvm-ffi==0.1.11 pydantic-core==2.50.5 xgrammar==0.2.7 \
    soundfile==0.13.1 openai==2.8.0 pyzmq==27.3.0 ipython==9.18.1 pydantic==2.14.4 rpds-py==2026.9.1 msgspec==0.23.0 \
    compressed-tensors==0.18.0 cffi==2.1.1 fastapi==0.165.0 orjson==3.13.0 dill==0.4.1 gguf==0.19.0 pybase64==1.5.1 \
    jsonschema==4.26.0 uvicorn==0.55.0 traitlets==5.16.1 starlette==1.10.0 loguru==0.7.3 opentelemetry-api==1.45.2 \
    setproctitle==1.3.8 python-multipart==0.0.34 referencing==0.37.0 distro==1.9.0 jsonschema-specifications==2025.9.1 \
    typing-inspection==0.4.5 annotated-types==0.8.0 sniffio==1.3.1 partial-json-parser==0.2.1.1.post7 \
    datasets==5.2.0 multiprocess==0.70.19
dl "$STAGE/big" sglang-kernel==0.4.5 nvidia-cutlass-dsl==4.8.0 nvidia-cutlass-dsl-libs-base==4.8.0 \
    nvidia-cutlass-dsl-libs-core==4.8.0 nvidia-cutlass-dsl-libs-cu13==4.8.0
# ansible-core for the machine's Python 3.12 (cffi comes with the list above)
dl "$STAGE/ansible" ansible-core==2.21.5 jinja2==3.1.6 MarkupSafe==3.0.3 PyYAML==6.0.4 cryptography==50.0.2 \
    pycparser resolvelib
[ -n "$(ls "$STAGE"/ansible/psmisc_*.deb 2>/dev/null)" ] || (cd "$STAGE/ansible" && apt-get download psmisc)
# sglang-kernel 0.4.5 (the torch-2.11 build) without FA3, sm100, FlashMLA and the cp310-only InfLLM extension:
# none of them loads on this path (sgl_kernel/__init__ imports none; cp310 cannot load in 3.12)
K=$STAGE/sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl
if [ ! -f "$K" ]; then
    cp "$STAGE"/big/sglang_kernel-0.4.5-*.whl "$K"
    zip -q -d "$K" 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*' 'sgl_kernel/flashmla_ops*'
fi
CU13=$(ls "$STAGE"/big/nvidia_cutlass_dsl_libs_cu13-*.whl)
rm -rf "$CARRY"/c1 "$CARRY"/c2 "$CARRY"/c3 "$CARRY"/wt
mkdir -p "$CARRY"/c1 "$CARRY"/c2 "$CARRY"/c3 "$CARRY"/wt
cp "$STAGE"/whl/*.whl "$CARRY/c1/"
# c1 would be over 64 MB with the checkout that travels too (3.7 MB on 2026-12-03, second session)
for f in apache_tvm_ffi ipython openai; do mv "$CARRY"/c1/${f}-*.whl "$CARRY/c3/"; done
cp "$STAGE"/ansible/* "$CARRY/c2/"
(cd "$CARRY/c2" && split -b 55000000 -d -a 2 "$CU13" "$(basename "$CU13" .whl).part-")
mv "$CARRY/c2/$(basename "$CU13" .whl).part-01" "$CARRY/c3/"
# the call sends the session's checkout too (3.2 MB on 2026-12-03): the small ansible wheels ride with c3
for f in jinja2 markupsafe pyyaml resolvelib pycparser psmisc; do mv "$CARRY"/c2/${f}[-_]*.* "$CARRY/c3/"; done
cp "$K" "$STAGE"/big/nvidia_cutlass_dsl-4.8.0-*.whl "$STAGE"/big/nvidia_cutlass_dsl_libs_base-*.whl \
    "$STAGE"/big/nvidia_cutlass_dsl_libs_core-*.whl "$CARRY/c3/"
# ansible.posix's profile_tasks callback (one file, GPL-3.0) for each task's time in the plays' logs, when this
# machine has it (PROFILE_TASKS=path, else the first ansible.posix found by python3)
PT=${PROFILE_TASKS:-$(python3 -c 'import os, ansible_collections.ansible.posix as p; print(os.path.join(list(p.__path__)[0], "plugins/callback/profile_tasks.py"))' 2>/dev/null)}
[ -f "$PT" ] && cp "$PT" "$CARRY/c3/profile_tasks.py" || echo "no profile_tasks.py: the plays log no task times" >&2
(cd "$STAGE" && sha256sum whl/*.whl ansible/*.whl "$(basename "$K")" big/nvidia_cutlass_dsl*.whl |
    sed 's#  [^ ]*/#  #') >"$CARRY/c3/SHA256SUMS"
# each call carries at most 64 MiB with the sending checkout's tree (about 2.3 MB): say when a folder is too big
for c in c1 c2 c3; do
    [ "$(du -bs "$CARRY/$c" | cut -f1)" -lt 64300000 ] || echo "WARNING: $CARRY/$c is over 64.3 MB" >&2
done
# the collection as this worktree has it (tracked and new files; docs, tests and the lab stay here)
(cd "$HERE" && git ls-files -co --exclude-standard | grep -v -E '^(docs|results|tests|lab|molecule|changelogs)/' |
    tar -czf "$CARRY/wt/wt.tgz" -T -)
for c in c1 c2 c3; do cp "$CARRY/wt/wt.tgz" "$CARRY/$c/"; done
du -b -s "$CARRY"/c1 "$CARRY"/c2 "$CARRY"/c3 "$CARRY"/wt
cat <<EOF
Device calls (kind nvidia-h200), each started within 30 s of the last:
  carry [.devcarry/c1]: mkdir -p /tmp/stash/wt && tar -xzf .devcarry/c1/wt.tgz -C /tmp/stash/wt && bash /tmp/stash/wt/realgpu/real_sglang_h200.sh stash .devcarry/c1 env health
  carry [.devcarry/c2]: ... real_sglang_h200.sh stash .devcarry/c2
  carry [.devcarry/c3]: ... real_sglang_h200.sh stash .devcarry/c3 install server
  carry [.devcarry/wt]: ... real_sglang_h200.sh lifecycle
  carry [.devcarry/wt]: ... real_sglang_h200.sh bench
EOF
