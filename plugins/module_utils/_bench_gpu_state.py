# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Body of the sglang_bench_gpu_state module: private to this collection.

Two nvidia-smi queries (clocks and driver version), built by _nvidia_smi and run with a timeout, parsed strictly: a
benchmark figure is never recorded without the GPU state it ran under. The one reader of the GPU state: this module
runs it on a host through the runner, sglang_bench_run has the client driver run the same argv lists in the
container before and after each run and parses their output here.
"""

from __future__ import annotations

import datetime

from ansible_collections.gpuserve.sglang.plugins.module_utils._bench import (
    CLOCKS_QUERY_FIELDS,
    BenchError,
    parse_gpu_clocks,
)
from ansible_collections.gpuserve.sglang.plugins.module_utils._nvidia_smi import (
    SmiError,
    check_result,
    driver_query,
    parse_driver_version,
    query,
)
from ansible_collections.gpuserve.sglang.plugins.module_utils._runner import Runner

GPU_STATE_ARGS = dict(
    nvidia_smi=dict(type="path", default="nvidia-smi"),
    nvidia_smi_timeout=dict(type="float", default=10.0),
    gpus=dict(type="list", elements="int", default=[]),
    min_count=dict(type="int", default=0),
)


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def gpu_state_argvs(params):
    """The two queries of one GPU state reading: clocks (CLOCKS_QUERY_FIELDS) and driver version."""
    ids, smi = params["gpus"], params["nvidia_smi"]
    return [query(smi, "gpu", CLOCKS_QUERY_FIELDS, ids=ids), driver_query(smi, ids)]


def parse_gpu_state(results, min_count, when):
    """The two queries' results (_runner.Result, in gpu_state_argvs' order) -> {gpus, driver_version, time}; raises
    BenchError or SmiError with the raw output when they cannot be read. results may be a generator that runs each
    query when asked: the driver query then never runs after a clocks query that failed (a hung nvidia-smi is not
    waited for twice)."""
    results = iter(results)
    clocks = next(results)
    check_result(clocks, "nvidia-smi clocks query")
    gpus = parse_gpu_clocks(clocks.out)
    if min_count and len(gpus) < min_count:
        raise BenchError("nvidia-smi answered for %d GPUs, expected %d: %r" % (len(gpus), min_count, clocks.out))
    driver = next(results)
    check_result(driver, "nvidia-smi driver_version query")
    return dict(gpus=gpus, driver_version=parse_driver_version(driver.out), time=when)


def gpu_state(runner, params, now=_now):
    """{gpus, driver_version, time}, read through runner; raises as parse_gpu_state."""
    when = now()
    results = (runner.run(argv, timeout=params["nvidia_smi_timeout"]) for argv in gpu_state_argvs(params))
    return parse_gpu_state(results, params["min_count"], when)


def run_module(module):
    try:
        result = gpu_state(Runner(module), module.params)  # each query passes nvidia_smi_timeout
    except SmiError as exc:
        module.fail_json(msg=exc.msg, changed=False)
    except BenchError as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(changed=False, **result)
