#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench_run
short_description: One measured (or warmup) run of SGLang's own benchmark client against the local server
version_added: "0.1.0"
description:
  - Checks that the running server serves the arm that was asked for (C(/server_info) max_running_requests,
    the scheduler's effective limit, the speculative algorithm), flushes the server cache (C(/flush_cache)),
    runs C(python -m sglang.benchmark.serving) (falling back to the deprecated C(sglang.bench_serving)) with a
    random dataset of fixed lengths built from local files only, and parses the JSONL it writes, not its stdout.
  - Reads the environment of every process in the server unit's cgroup (C(/proc/PID/environ)), so each figure
    carries the NCCL variables the workers really had.
  - Runs inside the SGLang container. It changes no configuration and always returns C(changed=false).
author:
  - gpuserve engineers (@gpuserve)
extends_documentation_fragment:
  - gpuserve.sglang._attributes
options:
  python:
    description: Interpreter of the SGLang venv (the client must be the pinned SGLang's own).
    type: path
    default: /opt/sglang/venv/bin/python
  client_module:
    description:
      - Python module of the client, or V(auto) to use C(sglang.benchmark.serving) when the installed SGLang
        has it and C(sglang.bench_serving) otherwise.
    type: str
    default: auto
  import_client:
    description:
      - Also import the client module once (about 8 s with SGLang 0.5.23) and fail with its error. Finding the
        file is not enough, since the client imports transformers, datasets, torchvision and more on every path.
      - With check mode this is a preflight. The sglang_benchmark role runs it before its first server restart.
    type: bool
    default: false
  base_url:
    description: URL of the server.
    type: str
    default: http://127.0.0.1:30000
  dataset_path:
    description:
      - ShareGPT-format JSON file on the target. The C(random) dataset samples its prompt tokens from it; without a
        valid file SGLang downloads ShareGPT from the hub, which this module never lets happen.
    type: path
    required: true
  tokenizer:
    description: Local directory (or tokenizer.json) of the tokenizer the client counts tokens with.
    type: path
    required: true
  model:
    description: Model name passed as C(--model); default lets the client ask C(/v1/models).
    type: str
  num_prompts:
    description: Requests per run.
    type: int
    default: 16
  input_len:
    description: Prompt length in tokens (fixed, C(--random-range-ratio 1.0)).
    type: int
    default: 256
  output_len:
    description: Output length in tokens (fixed).
    type: int
    default: 256
  concurrency:
    description: C(--max-concurrency); V(1) is single-stream.
    type: int
    default: 1
  seed:
    description: Client random seed (same prompts for every arm).
    type: int
    default: 1
  warmup_requests:
    description: The client's own warmup requests before measuring.
    type: int
    default: 1
  flush_cache:
    description: POST C(/flush_cache) before the run, and let the client flush again after its warmup.
    type: bool
    default: true
  flush_timeout:
    description: Seconds the server may wait for in-flight requests before flushing.
    type: float
    default: 60
  output_file:
    description: JSONL path on the target; the client appends, so an existing file is removed first.
    type: path
    required: true
  expect:
    description:
      - What the server must be serving; keys C(max_running_requests) and C(speculative_algorithm)
        (V(null) for a non-speculative baseline). A mismatch fails before any request is sent.
    type: dict
    default: {}
  worker_unit:
    description: systemd unit whose cgroup processes' environment is recorded; empty to skip.
    type: str
    default: sglang.service
  helper:
    description:
      - The sglang_server role's in-container helper; C(helper worker-env) reads O(worker_unit)'s environment (the
        same reader the role's NCCL proof uses).
    type: path
    default: /usr/local/sbin/gpuserve-sglang
    version_added: "0.2.0"
  env_prefixes:
    description: Environment variable name prefixes recorded from the workers.
    type: list
    elements: str
    default: [NCCL_, TORCH_NCCL, TORCH_SYMM_MEM, NVSHMEM_, CUDA_VISIBLE_DEVICES]
  extra_args:
    description: Further bench_serving arguments, one list item per argv word.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is sent to the server. The client is found (and imported with O(import_client)),
        the dataset and tokenizer paths are checked, and the argv that would run is returned.
"""

EXAMPLES = r"""
- name: Preflight, before any server restart (finds and imports the client, checks the local files)
  gpuserve.sglang.sglang_bench_run:
    import_client: true
    dataset_path: /var/lib/gpuserve/benchmark/sharegpt_offline.json
    tokenizer: /models/Kimi-K2.5
    output_file: /var/lib/gpuserve/benchmark/preflight.jsonl
  check_mode: true
  register: client

- name: One single-stream run
  gpuserve.sglang.sglang_bench_run:
    dataset_path: /var/lib/gpuserve/benchmark/sharegpt_offline.json
    tokenizer: /models/Kimi-K2.5
    num_prompts: 16
    input_len: 1024
    output_len: 512
    concurrency: 1
    output_file: /var/lib/gpuserve/benchmark/run-0.jsonl
    expect:
      max_running_requests: 48
      speculative_algorithm: EAGLE3
  register: run
"""

RETURN = r"""
metrics:
  description: Figures from the JSONL (output_throughput, mean_tpot_ms, accept_length, completed, ...).
  returned: success, not in check mode
  type: dict
argv:
  description: The client command that ran.
  returned: always
  type: list
  elements: str
client_module:
  description: The client module used.
  returned: always
  type: str
started:
  description: UTC start time (ISO 8601).
  returned: always
  type: str
ended:
  description: UTC end time (ISO 8601). Not called C(finished), a key Ansible sets on task results itself.
  returned: always
  type: str
server:
  description: max_running_requests (configured and effective) and speculative_algorithm from /server_info.
  returned: success
  type: dict
worker_env:
  description:
    - Environment variables (O(env_prefixes)) of the unit's NCCL workers, the C(sglang::scheduler*) processes (every
      process of the unit when none carries that title), read from C(/proc/PID/environ) by O(helper).
    - RV(worker_env.consistent) is true when all workers carry the same set; RV(worker_env.env) is that set,
      RV(worker_env.per_pid) lists each worker's set otherwise. The launcher is not compared, since SGLang sets
      variables such as C(NCCL_CUMEM_ENABLE) for its children only.
  returned: success
  type: dict
  contains:
    pids:
      description: PIDs of the workers read.
      type: list
      elements: int
      returned: success
    pids_with_vars:
      description: PIDs of the workers that carry at least one variable of O(env_prefixes).
      type: list
      elements: int
      returned: success
    consistent:
      description: Whether every worker carries the same set; null when no worker was found.
      type: bool
      returned: success
    env:
      description: The set every worker carries (when RV(worker_env.consistent)).
      type: dict
      returned: success
    per_pid:
      description: Each worker's set, by PID, when the sets differ.
      type: dict
      returned: when the workers' sets differ
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench_run import run_module


def main():
    module = AnsibleModule(argument_spec=dict(
        python=dict(type="path", default="/opt/sglang/venv/bin/python"),
        client_module=dict(type="str", default="auto"),
        import_client=dict(type="bool", default=False),
        base_url=dict(type="str", default="http://127.0.0.1:30000"),
        dataset_path=dict(type="path", required=True),
        tokenizer=dict(type="path", required=True),
        model=dict(type="str"),
        num_prompts=dict(type="int", default=16),
        input_len=dict(type="int", default=256),
        output_len=dict(type="int", default=256),
        concurrency=dict(type="int", default=1),
        seed=dict(type="int", default=1),
        warmup_requests=dict(type="int", default=1),
        flush_cache=dict(type="bool", default=True),
        flush_timeout=dict(type="float", default=60),
        output_file=dict(type="path", required=True),
        expect=dict(type="dict", default={}),
        worker_unit=dict(type="str", default="sglang.service"),
        helper=dict(type="path", default="/usr/local/sbin/gpuserve-sglang"),
        env_prefixes=dict(type="list", elements="str",
                          default=["NCCL_", "TORCH_NCCL", "TORCH_SYMM_MEM", "NVSHMEM_", "CUDA_VISIBLE_DEVICES"]),
        extra_args=dict(type="list", elements="str", default=[]),
    ), supports_check_mode=True)
    run_module(module)


if __name__ == "__main__":
    main()
