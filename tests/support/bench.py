"""The benchmark's arms and runs as the tests of _bench, its verdict, its report and sglang_bench_report need them:
a Kimi server with two EAGLE-3 arms, runs made with small deterministic jitter, the real H200 GPU-state records
(tests/fixtures/h200-gpu-state)."""
import os

from ansible_collections.gpuserve.sglang.plugins.module_utils import _bench as b

SERVER_ARGS = {
    "model_path": "/models/kimi",
    "tp_size": 8,
    "port": 30000,
    "max_running_requests": 64,
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "/models/kimi-eagle3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
EAGLE = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "/models/kimi-eagle3",
         "speculative_eagle_topk": 1}
ARMS = [
    {"name": "eagle3-s2", "args": dict(EAGLE, speculative_num_steps=2, speculative_num_draft_tokens=3)},
    {"name": "eagle3-s3", "args": dict(EAGLE, speculative_num_steps=3, speculative_num_draft_tokens=4)},
]
IDLE_GPU = "0, 1980, 3201, 36, 89.37, 0x0000000000000000, P0\n1, 1980, 3201, 37, 91.00, 0x0000000000000000, P0\n"
H200_GPU_STATE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "h200-gpu-state")


def make_runs(visits, speeds, repeats=3, concurrencies=(1,), gpu=IDLE_GPU, jitter=0.2, **prov):
    """speeds: tok/s per visit index (or per arm name); runs with small deterministic jitter."""
    runs = []
    provenance = {"sglang_commit": "a" * 40, "sglang_dirty": False, "driver_version": "580.159.04",
                  "nccl_env": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}}
    provenance.update(prov)
    for v in visits:
        speed = speeds.get(v["index"], speeds.get(v["arm"]))
        for c in concurrencies:
            for r in range(repeats):
                tput = speed * c ** 0.5 + (r - 1) * jitter
                runs.append({
                    "visit": v["index"], "arm": v["arm"], "repeat": r, "concurrency": c,
                    "metrics": {"output_throughput": tput, "mean_tpot_ms": 1000.0 / tput, "completed": 8,
                                "expected": 8, "accept_length": None if v["kind"] == "baseline" else 2.5},
                    "gpu_before": b.parse_gpu_clocks(gpu), "gpu_after": b.parse_gpu_clocks(gpu),
                    "provenance": dict(provenance),
                    "started": "2026-11-30T00:%02d:00Z" % v["index"], "finished": "2026-11-30T00:%02d:30Z" % v["index"],
                })
    return runs
