"""The lab's SIMULATED SGLang server (lab/files/sglang_standin.py) for a unit test: simulated device files, a free
port, returned once /health answers 200."""
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from ansible_collections.gpuserve.sglang.tests.support.net import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(ROOT, "lab", "files", "sglang_standin.py")


def _healthy(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=10) as res:
            return res.status == 200
    except (urllib.error.HTTPError, OSError):
        return False


def start(tmp_path, *args, log=None, **env):
    """A ready stand-in started with ARGS (after --model-path sim/x, --host, --port) and the GPUSIM_* settings in
    env; its output to the file log, else dropped. Returns (port, process); stop() ends it."""
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_bytes(b"")
    port = free_port()
    argv = [sys.executable, STANDIN, "--model-path", "sim/x", "--host", "127.0.0.1", "--port", str(port)] + list(args)
    with open(log or os.devnull, "wb") as out:
        proc = subprocess.Popen(argv, env=dict(os.environ, GPUSIM_DEV_DIR=str(dev), **env), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while not _healthy(port):
        if time.monotonic() > deadline or proc.poll() is not None:
            stop(proc)
            raise AssertionError("the stand-in did not come up (rc %s)" % proc.poll())
        time.sleep(0.05)
    return port, proc


def stop(proc):
    """SIGKILL to the stand-in's process group, if it still runs."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
