"""Holds the GPU until killed, for realgpu/gpu_release_gpu.sh.

  gpu_holder.py GIB READY   allocate and touch GIB GiB on cuda:0 with PyTorch (a stand-in for an SGLang worker)
  gpu_holder.py nvml READY  keep an NVML handle open and read memory every 0.5 s (a stand-in for an exporter)
  gpu_holder.py file PATH READY  keep PATH open (CPU-only dry run)
Writes READY once holding; then sleeps until a signal ends it.
"""
import sys
import time


def main():
    mode, ready = sys.argv[1], sys.argv[-1]
    if mode == 'nvml':
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        note = 'nvml open'
    elif mode == 'file':
        handle = open(sys.argv[2], 'rb')
        note = 'holding ' + sys.argv[2]
    else:
        import torch
        block = torch.empty(int(float(mode) * 2 ** 30), dtype=torch.uint8, device='cuda')
        block.fill_(1)  # touch every page so memory.used shows it
        torch.cuda.synchronize()
        note = '%d bytes on cuda:0' % block.numel()
    with open(ready, 'w') as f:
        f.write(note + '\n')
    while True:
        if mode == 'nvml':
            pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        time.sleep(0.5)


if __name__ == '__main__':
    main()
