#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench_run
short_description: Every run of one benchmark visit with SGLang's own client, in one client process
version_added: "0.1.0"
description:
  - Checks that the running server serves the arm that was asked for (C(/server_info) max_running_requests,
    the scheduler's effective limit, the speculative algorithm) and reads the environment of every process in the
    server unit's cgroup (C(/proc/PID/environ)), so each figure carries the NCCL variables the workers really had.
  - Then runs the visit's O(warmup_runs) and O(repeats) runs at each O(concurrency) in ONE process of the SGLang
    venv's python (the collection's C(_bench_driver), its source handed over on stdin). The client
    (C(sglang.benchmark.serving), or the deprecated C(sglang.bench_serving)) is imported once and run once per run,
    as C(python -m) would run it, from local files only, after a C(/flush_cache). Each run's JSONL is parsed, not
    its stdout. Importing the client costs about 15 s on a real host, paid once per visit instead of once per run.
  - Before and after each measured run the driver reads the GPU state in the container (the query and strict
    parser of M(gpuserve.sglang.sglang_bench_gpu_state)) and SGLang's C(/metrics) counters; the accept length is
    their ratio over the run (C(accept_length_source=metrics)), else C(/server_info)'s C(avg_spec_accept_length)
    (V(server_info)), else none (V(none); always for a non-speculative arm).
  - It changes no configuration and always returns C(changed=false).
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
      - Also import the client module once (about 8 s with SGLang 0.5.23) and C(prometheus_client)'s parser, and
        fail with the error. Finding the file is not enough, since the client imports transformers, datasets,
        torchvision and more on every path.
      - With check mode this is a preflight. The sglang_benchmark role runs it before its first server restart.
    type: bool
    default: false
  base_url:
    description: URL of the server.
    type: str
    default: http://127.0.0.1:30000
  dataset:
    description:
      - The client's dataset. V(sharegpt) sends the conversations' first turns with the tokenizer's chat template
        (C(--apply-chat-template)), each answered with O(output_len) tokens (C(--sharegpt-output-len)); V(random)
        cuts and tiles the file's tokens to O(input_len) (C(--random-range-ratio 1.0)).
    type: str
    choices: [sharegpt, random]
    default: sharegpt
    version_added: "0.2.0"
  dataset_path:
    description:
      - ShareGPT-format JSON file on the target, the prompts of either dataset; without a valid file SGLang
        downloads ShareGPT from the hub, which this module never lets happen.
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
    description: Prompt length in tokens with O(dataset=random) (fixed); unused with V(sharegpt).
    type: int
    default: 256
  output_len:
    description: Output length in tokens (fixed).
    type: int
    default: 256
  concurrency:
    description: C(--max-concurrency) of the runs, each level in turn; V(1) is single-stream.
    type: list
    elements: int
    default: [1]
  warmup_runs:
    description:
      - Unrecorded runs per concurrency before the measured ones. With any, the client's own warmup request
        before each run is turned off (C(--warmup-requests 0)), as it would count in the run's C(/metrics) counters.
    type: int
    default: 0
    version_added: "0.2.0"
  repeats:
    description: Measured runs per concurrency.
    type: int
    default: 1
    version_added: "0.2.0"
  seed:
    description: Client random seed (same prompts for every arm).
    type: int
    default: 1
  flush_cache:
    description: POST C(/flush_cache) before each run, and let the client flush again after its warmup.
    type: bool
    default: true
  flush_timeout:
    description: Seconds the server may wait for in-flight requests before flushing.
    type: float
    default: 60
  output_prefix:
    description:
      - Path prefix of the runs' JSONL files on the target (C(PREFIX-c<concurrency>-r<repeat>.jsonl), warmup runs
        C(-w<n>)); each file is removed before its run, since the client appends.
    type: path
    required: true
    version_added: "0.2.0"
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
  nvidia_smi:
    description: nvidia-smi in the container, for the GPU state before and after each measured run.
    type: path
    default: nvidia-smi
    version_added: "0.2.0"
  nvidia_smi_timeout:
    description: Seconds one C(nvidia-smi) call may take (coreutils C(timeout)).
    type: float
    default: 10.0
    version_added: "0.2.0"
  min_count:
    description: Fail when fewer GPUs answer the GPU state query (a minimum; V(0) for any).
    type: int
    default: 0
    version_added: "0.2.0"
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
        the dataset and tokenizer paths are checked, and the client arguments of every planned run are returned.
"""

EXAMPLES = r"""
- name: Preflight, before any server restart (finds and imports the client, checks the local files)
  gpuserve.sglang.sglang_bench_run:
    import_client: true
    dataset_path: /var/lib/gpuserve/benchmark/dataset.json
    tokenizer: /models/Kimi-K2.5
    output_prefix: /var/lib/gpuserve/benchmark/preflight
  check_mode: true
  register: client

- name: One visit, one warmup and three measured runs at concurrency 1 and 16, in one client process
  gpuserve.sglang.sglang_bench_run:
    dataset_path: /var/lib/gpuserve/benchmark/dataset.json
    tokenizer: /models/Kimi-K2.5
    num_prompts: 32
    output_len: 512
    concurrency: [1, 16]
    warmup_runs: 1
    repeats: 3
    output_prefix: /var/lib/gpuserve/benchmark/v1-eagle3-s3
    expect:
      max_running_requests: 48
      speculative_algorithm: EAGLE3
  register: visit
"""

RETURN = r"""
runs:
  description:
    - The measured runs in the order they ran, each C({repeat, concurrency, started, finished, metrics, server,
      client, argv, gpu_before, gpu_after, gpu_before_time, gpu_after_time, provenance}), C(provenance) with the
      driver version and the workers' environment (C(nccl_env), C(nccl_env_consistent), C(worker_pids),
      C(unit_pids)).
    - C(metrics) holds the JSONL's figures (output_throughput, mean_tpot_ms, completed, ...) and C(accept_length)
      with C(accept_length_source) (V(metrics), V(server_info) or V(none)); from V(metrics) also the run's
      C(generation_tokens) and C(spec_verify_calls).
  returned: success, not in check mode
  type: list
  elements: dict
plan:
  description: Every run of the visit, warmup runs first, as C({label, argv}) (the client's arguments).
  returned: always
  type: list
  elements: dict
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
  returned: success, not in check mode
  type: dict
worker_env:
  description:
    - Environment variables (O(env_prefixes)) of the unit's NCCL workers, the C(sglang::scheduler*) processes (every
      process of the unit when none carries that title), read from C(/proc/PID/environ) by O(helper), once per visit.
    - RV(worker_env.consistent) is true when all workers carry the same set; RV(worker_env.env) is that set,
      RV(worker_env.per_pid) lists each worker's set otherwise. The launcher is not compared, since SGLang sets
      variables such as C(NCCL_CUMEM_ENABLE) for its children only.
  returned: success, not in check mode
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
        dataset=dict(type="str", choices=["sharegpt", "random"], default="sharegpt"),
        dataset_path=dict(type="path", required=True),
        tokenizer=dict(type="path", required=True),
        model=dict(type="str"),
        num_prompts=dict(type="int", default=16),
        input_len=dict(type="int", default=256),
        output_len=dict(type="int", default=256),
        concurrency=dict(type="list", elements="int", default=[1]),
        warmup_runs=dict(type="int", default=0),
        repeats=dict(type="int", default=1),
        seed=dict(type="int", default=1),
        flush_cache=dict(type="bool", default=True),
        flush_timeout=dict(type="float", default=60),
        output_prefix=dict(type="path", required=True),
        expect=dict(type="dict", default={}),
        worker_unit=dict(type="str", default="sglang.service"),
        helper=dict(type="path", default="/usr/local/sbin/gpuserve-sglang"),
        env_prefixes=dict(type="list", elements="str",
                          default=["NCCL_", "TORCH_NCCL", "TORCH_SYMM_MEM", "NVSHMEM_", "CUDA_VISIBLE_DEVICES"]),
        nvidia_smi=dict(type="path", default="nvidia-smi"),
        nvidia_smi_timeout=dict(type="float", default=10.0),
        min_count=dict(type="int", default=0),
        extra_args=dict(type="list", elements="str", default=[]),
    ), supports_check_mode=True)
    run_module(module)


if __name__ == "__main__":
    main()
