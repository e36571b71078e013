"""An NVML observer beside the real-GPU lifecycle run (realgpu/real_sglang_h200.sh): reads GPU 0's memory used
(memory info v2) every millisecond and appends one JSON line per change between "nothing used" and "something used"
(epoch seconds, bytes), so the manifests' and the systemctl shim's signal times can be set against the physical
release. Started under the title nvidia_gpu_exporter-gpuserve-observer: gpu_release spares monitoring exporters,
and this process holds /dev/nvidia* as one does. Runs until SIGTERM.

  python3 realgpu/nvml_observer.py OUT.jsonl
"""
import json
import signal
import sys
import time

import pynvml


def main(path):
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    last, peak = None, 0
    with open(path, "a") as f:
        while True:
            used = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used
            t = time.time()
            busy = used > 0
            peak = max(peak, used)
            if busy != last:
                f.write(json.dumps({"t": round(t, 4), "used": used, "busy": busy, "peak_before": peak}) + "\n")
                f.flush()
                last, peak = busy, used
            time.sleep(0.001)


if __name__ == "__main__":
    main(sys.argv[1])
