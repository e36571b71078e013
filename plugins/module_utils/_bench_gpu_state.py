# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Body of the sglang_bench_gpu_state module: private to this collection.

Two nvidia-smi queries (clocks and driver version), built by _nvidia_smi and run through the runner with a
timeout, parsed strictly: a benchmark figure is never recorded without the GPU state it ran under.
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


def gpu_state(runner, params, now=_now):
    """{gpus, driver_version, time}; raises BenchError or SmiError with the raw output when it cannot be read."""
    ids, smi, timeout = params["gpus"], params["nvidia_smi"], params["nvidia_smi_timeout"]
    when = now()
    res = runner.run(query(smi, "gpu", CLOCKS_QUERY_FIELDS, ids=ids), timeout=timeout)
    check_result(res, "nvidia-smi clocks query")
    gpus = parse_gpu_clocks(res.out)
    if params["min_count"] and len(gpus) < params["min_count"]:
        raise BenchError("nvidia-smi answered for %d GPUs, expected %d: %r"
                         % (len(gpus), params["min_count"], res.out))
    res = runner.run(driver_query(smi, ids), timeout=timeout)
    check_result(res, "nvidia-smi driver_version query")
    return dict(gpus=gpus, driver_version=parse_driver_version(res.out), time=when)


def run_module(module):
    try:
        result = gpu_state(Runner(module), module.params)  # each query passes nvidia_smi_timeout
    except SmiError as exc:
        module.fail_json(msg=exc.msg, changed=False)
    except BenchError as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(changed=False, **result)
