"""Does setproctitle overwrite a spawned worker's /proc/PID/environ? (the env proof's failure on the real H200,
docs/benchmarks.md 2026-12-03). Runs on any Linux machine with the setproctitle package (1.3.8 is SGLang 0.5.23's):

  env -i PATH=/usr/bin:/bin EARLY=x python3 realgpu/setproctitle_environ_check.py            -> 0 variables left
  env -i PATH=/usr/bin:/bin EARLY=x SPT_NOENV=1 python3 realgpu/setproctitle_environ_check.py -> all kept

A multiprocessing 'spawn' child titles itself `sglang::scheduler` as SGLang's scheduler does; the parent reads the
child's /proc/PID/environ and cmdline.
"""
import multiprocessing
import os
import time


def child(queue):
    import setproctitle
    setproctitle.setproctitle("sglang::scheduler")
    queue.put(os.getpid())
    time.sleep(5)


def main():
    os.environ["NCCL_PROTO"] = "LL"  # set late by the parent, as SGLang sets its own variables
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    pid = queue.get()
    time.sleep(0.2)
    with open("/proc/%d/environ" % pid, "rb") as f:
        names = [item.split(b"=", 1)[0].decode() for item in f.read().split(b"\0") if b"=" in item]
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        title = f.read().split(b"\0")[0].decode()
    print("SPT_NOENV=%r title=%r environ variables=%d EARLY=%s NCCL_PROTO=%s PATH=%s" % (
        os.environ.get("SPT_NOENV"), title, len(names), "EARLY" in names, "NCCL_PROTO" in names, "PATH" in names))
    proc.terminate()


if __name__ == "__main__":
    main()
