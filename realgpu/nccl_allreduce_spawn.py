#!/usr/bin/env python3
"""NCCL all-reduce across N GPUs, ranks started with torch.multiprocessing 'spawn' (as SGLang starts its workers).

Meant to run under `env -i` from a venv whose site-packages holds the gpuserve NCCL hook (realgpu/nccl_check.sh),
so every NCCL variable a rank sees came from the hook, not from the launching shell.

  --mode check   one all-reduce; each rank prints the expected variables as it sees them and
                 "rank R allreduce ok <value>"; exit 1 if a rank lacks a variable or the sum is wrong.
  --mode timing  the verify-step cost model: one "forward" = --n-allreduce small all-reduces (61 in our EAGLE-3
                 story) of --numel elements; ms per forward eager vs replayed from a CUDA graph. One JSON line
                 per variant on stdout (max over ranks).
"""
import argparse
import json
import os
import socket
import sys
import time


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env_view(names):
    return {name: os.environ.get(name) for name in names}


def _forward_timing(torch, dist, rank, args):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    bufs = [torch.ones(args.numel, dtype=dtype, device="cuda") for _ in range(args.n_allreduce)]

    def forward():
        for buf in bufs:
            dist.all_reduce(buf)

    def timed(run, iters):
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            run()
        torch.cuda.synchronize()
        elapsed = torch.tensor([(time.perf_counter() - start) * 1000.0 / iters], device="cuda")
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        return float(elapsed.item())

    for _ in range(args.warmup):
        forward()
    results = {"eager_ms_per_forward": timed(forward, args.iters)}

    try:
        results["graph_ms_per_forward"] = _graph_timing(torch, forward, timed, args)
    except RuntimeError as exc:  # report, keep the eager figure
        results["graph_error"] = str(exc)[:500]
    return results


def _graph_timing(torch, forward, timed, args):
    # capture on a side stream after warm-up, as CUDA graph capture of NCCL collectives requires
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            forward()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward()
    for _ in range(args.warmup):
        graph.replay()
    return timed(graph.replay, args.iters)


def _rank_main(rank, args, port, names):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    env = _env_view(names)
    print("rank %d pid %d env %s" % (rank, os.getpid(), " ".join("%s=%s" % kv for kv in sorted(env.items()))),
          flush=True)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=args.world_size, device_id=torch.device("cuda", rank))
    try:
        ok = True
        if args.expect:
            missing = [n for n, v in args.expect.items() if env.get(n) != v]
            if missing:
                print("rank %d MISSING %s" % (rank, ",".join(missing)), flush=True)
                ok = False
        if args.mode == "check":
            value = torch.ones(1, device="cuda")
            dist.all_reduce(value)
            torch.cuda.synchronize()
            got = float(value.item())
            ok = ok and got == float(args.world_size)
            print("rank %d allreduce %s %s" % (rank, "ok" if got == float(args.world_size) else "WRONG", got),
                  flush=True)
        else:
            results = _forward_timing(torch, dist, rank, args)
            if rank == 0:
                print(json.dumps(dict(results, label=args.label, world_size=args.world_size,
                                      n_allreduce=args.n_allreduce, numel=args.numel, dtype=args.dtype,
                                      iters=args.iters, nccl_version=".".join(map(str, torch.cuda.nccl.version())),
                                      env=env)), flush=True)
        if not ok:
            sys.exit(1)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--world-size", type=int, default=0, help="ranks (default: every visible GPU)")
    parser.add_argument("--mode", choices=("check", "timing"), default="check")
    parser.add_argument("--expect", default="", help="JSON object or @file: variables every rank must see")
    parser.add_argument("--label", default="", help="timing: name of this variant (e.g. tuned, baseline)")
    parser.add_argument("--n-allreduce", type=int, default=61, help="timing: all-reduces per forward")
    parser.add_argument("--numel", type=int, default=7168, help="timing: elements per all-reduce (one hidden row)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()

    import torch
    import torch.multiprocessing as mp

    if args.expect.startswith("@"):
        with open(args.expect[1:]) as fh:
            args.expect = json.load(fh)
    else:
        args.expect = json.loads(args.expect) if args.expect else {}
    gpus = torch.cuda.device_count()
    args.world_size = args.world_size or gpus
    if args.world_size < 2 or args.world_size > gpus:
        parser.error("--world-size %d needs 2..%d GPUs (%d visible)" % (args.world_size, gpus, gpus))
    names = sorted(set(args.expect) | {k for k in os.environ if k.startswith(("NCCL_", "TORCH_", "NVSHMEM_"))})
    print("gpus %d world_size %d nccl %s torch %s mode %s" % (gpus, args.world_size, torch.cuda.nccl.version(),
                                                             torch.__version__, args.mode), flush=True)
    print("parent pid %d env %s" % (os.getpid(), " ".join("%s=%s" % kv for kv in sorted(_env_view(names).items()))),
          flush=True)
    mp.spawn(_rank_main, args=(args, _free_port(), names), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
