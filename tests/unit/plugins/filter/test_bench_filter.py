"""Filters bench_plan / bench_progress (plugins/filter/bench.py)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuserve.sglang.plugins.filter.bench import FilterModule


def test_filters_registered_and_errors_are_filter_errors():
    f = FilterModule().filters()
    visits = f["bench_plan"]({"model_path": "/m"}, [{"name": "e", "args": {"speculative_algorithm": "EAGLE3"}}], 48)
    assert [v["arm"] for v in visits] == ["baseline", "e", "baseline"]
    with pytest.raises(AnsibleFilterError, match="bench_plan: .*every arm must run with 48"):
        f["bench_plan"]({}, [{"name": "e", "args": {"max_running_requests": 8}}], 48)
    with pytest.raises(AnsibleFilterError, match="bench_progress"):
        f["bench_progress"](visits, [], 7, 1.0)
