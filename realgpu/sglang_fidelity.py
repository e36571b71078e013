"""What a real SGLang server shows, recorded for the lab's SIMULATED stand-in to be held to, and
gpu_release + gate against it (item 2's release figures). Run on a GPU machine by realgpu/real_sglang_h200.sh:

  python3 realgpu/sglang_fidelity.py --out DIR --python VENV_PYTHON --args-json ARGV_JSON [--env-file F]
                                     [--release-reps N] [--ready-timeout S]

Run 0 (the capture): starts `VENV_PYTHON -m sglang.launch_server ARGV` in its own session (as the unit's main
process), polls /health, /health_generate, /server_info and /get_model_info every 0.2 s from the start (every
status change is kept, with the time since the start and whether the port was open), and once /health_generate
answers 200 records: the process tree of its session (pid, ppid, pgid, stat, /proc/PID/comm, cmdline as argv,
which /dev/nvidia* each holds, its NCCL/CUDA/SGLANG variables), nvidia-smi's compute apps and memory, the JSON of
/server_info, /get_server_info, /model_info, /get_model_info, /v1/models, /v1/loads, a /generate (plain and
streamed), /v1/completions, /flush_cache (GET and POST), /metrics and /health bodies. Then SIGTERM to the main
process only (SGLang's own shutdown path): every process's exit time, the main's exit status, and the first
NVML read of 0 bytes used (1 ms polling), all from the signal. Writes DIR/capture.json and DIR/server0.log.
Runs 1..N: the same server again, then realgpu/gpu_release_gpu.yml (gpuserve.sglang.gpu_release with its gate,
as the lifecycle runs it on the PVE host) against the live server, beside an NVML observer in this process;
DIR/release_reps.json. Exit 0 when run 0 served a generation.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = 30000
ENV_PREFIXES = ("NCCL_", "CUDA_", "SGLANG_", "TORCH_", "NVSHMEM_", "TRTLLM_", "CUTE_DSL_", "PYTORCH_", "OMP_",
                "TOKENIZERS_", "PYTHONPATH", "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def http(method, path, body=None, timeout=10, raw=False):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (PORT, path), data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            status, text, headers = res.status, res.read().decode("utf-8", "replace"), dict(res.headers)
    except urllib.error.HTTPError as exc:
        status, text, headers = exc.code, exc.read().decode("utf-8", "replace"), dict(exc.headers)
    if raw:
        return status, text, headers
    try:
        return status, json.loads(text) if text.strip() else None
    except ValueError:
        return status, text


def port_open():
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=0.5):
            return True
    except OSError:
        return False


def read(pid, name, binary=False):
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as f:
            data = f.read()
        return data if binary else data.decode("utf-8", "replace")
    except OSError:
        return None


def session_pids(sid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            stat = read(int(d), "stat")
            if stat:
                fields = stat.rsplit(")", 1)[1].split()
                if int(fields[3]) == sid:  # field 6: session
                    out.append(int(d))
    return sorted(out)


def describe(pid):
    stat = read(pid, "stat") or ""
    fields = stat.rsplit(")", 1)[1].split() if ")" in stat else []
    cmd = read(pid, "cmdline", binary=True) or b""
    env = read(pid, "environ", binary=True) or b""
    envd = dict(item.split(b"=", 1) for item in env.split(b"\0") if b"=" in item)
    fds = []
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("/dev/nvidia"):
                fds.append(target)
    except OSError:
        pass
    status = read(pid, "status") or ""
    threads = next((line.split()[1] for line in status.splitlines() if line.startswith("Threads:")), None)
    return {"pid": pid, "ppid": int(fields[1]) if fields else None, "pgid": int(fields[2]) if fields else None,
            "sid": int(fields[3]) if fields else None, "state": fields[0] if fields else None,
            "comm": (read(pid, "comm") or "").strip(),
            "argv": [a.decode("utf-8", "replace") for a in cmd.split(b"\0")[:-1]] if cmd.endswith(b"\0") else
            [cmd.decode("utf-8", "replace")],
            "cmdline_nul_terminated": cmd.endswith(b"\0"), "threads": int(threads) if threads else None,
            "nvidia_fds": sorted(set(fds)),
            "env": {k.decode(): v.decode("utf-8", "replace") for k, v in sorted(envd.items())
                    if k.decode("utf-8", "replace").startswith(ENV_PREFIXES)},
            "cgroup": (read(pid, "cgroup") or "").strip().splitlines()[-1:]}


class NoMemory:
    """--no-nvml (a CPU-only smoke test of this script against the lab's stand-in): nothing is ever used."""

    def used(self):
        return 0

    def first_zero(self, t0, limit_s=0):
        return 0.0


class Memory:
    def __init__(self):
        import pynvml
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def used(self):
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle, version=self.nvml.nvmlMemory_v2).used

    def first_zero(self, t0, limit_s=120.0):
        """Seconds from t0 to the first read of 0 bytes used (reads every 1 ms), or None."""
        while time.time() - t0 < limit_s:
            if self.used() == 0:
                return round(time.time() - t0, 4)
            time.sleep(0.001)
        return None


def start_server(args, argv, logpath, env):
    entry = [args.entry_script] if args.entry_script else ["-m", "sglang.launch_server"]
    log("start: %s %s %s" % (args.python, " ".join(entry), " ".join(argv)))
    logf = open(logpath, "w")
    proc = subprocess.Popen([args.python] + entry + argv, stdin=subprocess.DEVNULL,
                            stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, time.time()


def wait_ready(proc, t0, timeout, trace=None):
    """Poll until /health_generate is 200; trace gets every status change. True when ready."""
    last = {}
    slow_every, n = 10, 0
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            log("server exited with %s before it was ready" % proc.returncode)
            return False
        now = round(time.time() - t0, 3)
        probes = {"port": port_open()}
        paths = ["/health", "/health_generate"] + (["/server_info", "/get_model_info"] if n % slow_every == 0 else [])
        n += 1
        if probes["port"]:
            for path in paths:
                try:
                    status, body = http("GET", path, timeout=5)
                    probes[path] = status
                    if trace is not None and path == "/health" and status != 200:
                        probes["/health body"] = body if isinstance(body, (str, type(None))) else json.dumps(body)[:300]
                except (OSError, urllib.error.URLError) as exc:
                    probes[path] = "error: %s" % (getattr(exc, "reason", None) or exc)
        for k, v in probes.items():
            if last.get(k, "unset") != v:
                if trace is not None:
                    trace.append({"t_s": now, "what": k, "value": v})
                last[k] = v
        if probes.get("/health_generate") == 200:
            return True
        time.sleep(0.2)
    return False


def capture(args, argv, env, mem):
    out = {"argv": argv, "python": args.python, "trace": [], "endpoints": {}}
    proc, t0 = start_server(args, argv, os.path.join(args.out, "server0.log"), env)
    ready = wait_ready(proc, t0, args.ready_timeout, out["trace"])
    out["ready"] = ready
    out["start_to_ready_s"] = round(time.time() - t0, 3)
    out["main_pid"] = proc.pid
    if not ready:
        out["exit"] = proc.poll()
        stop(proc)
        return out
    log("ready after %.1f s" % out["start_to_ready_s"])
    pids = session_pids(proc.pid)
    out["processes"] = [describe(p) for p in pids]
    out["ps"] = subprocess.run(["ps", "-o", "pid,ppid,pgid,sid,stat,comm,args", "-g", str(proc.pid)],
                               capture_output=True, text=True).stdout
    out["nvidia_smi_apps"] = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"],
        capture_output=True, text=True).stdout
    out["nvml_used_bytes"] = mem.used()
    ep = out["endpoints"]
    for path in ("/health", "/health_generate", "/server_info", "/get_server_info", "/model_info", "/get_model_info",
                 "/v1/models", "/v1/loads", "/metrics", "/flush_cache"):
        try:
            status, text, headers = http("GET", path, timeout=30, raw=True)
        except (OSError, urllib.error.URLError) as exc:
            ep["GET " + path] = {"error": str(exc)}
            continue
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError:
            body = text[:2000]
        ep["GET " + path] = {"status": status, "content_type": headers.get("content-type"), "body": body}
    gen = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
    t = time.time()
    ep["POST /generate"] = dict(zip(("status", "body"), http("POST", "/generate", gen, timeout=60)),
                                took_s=round(time.time() - t, 3))
    status, text, headers = http("POST", "/generate", dict(gen, stream=True), timeout=60, raw=True)
    ep["POST /generate stream"] = {"status": status, "content_type": headers.get("content-type"),
                                   "lines": [line for line in text.splitlines() if line][:12]}
    ep["POST /v1/completions"] = dict(zip(("status", "body"), http(
        "POST", "/v1/completions", {"model": argv[argv.index("--model-path") + 1], "prompt": "Hello",
                                    "max_tokens": 4, "temperature": 0}, timeout=60)))
    status, text, _h = http("POST", "/flush_cache", {}, timeout=30, raw=True)
    ep["POST /flush_cache"] = {"status": status, "body": text}
    status, body = http("GET", "/server_info", timeout=30)
    ep["GET /server_info after generate"] = {"status": status, "body": body}
    # SGLang's own shutdown: SIGTERM to the main process only; who exits when, the main's status, the memory
    t_sig = time.time()
    os.kill(proc.pid, signal.SIGTERM)
    zero = {}
    th = threading.Thread(target=lambda: zero.update(s=mem.first_zero(t_sig)), daemon=True)
    th.start()
    exits = {}
    while time.time() - t_sig < 60:
        for p in pids:
            if p not in exits and not alive(p):
                exits[p] = round(time.time() - t_sig, 4)
        if len(exits) == len(pids):
            break
        time.sleep(0.005)
    th.join(60)
    out["sigterm_main"] = {"exit_after_s": {str(p): exits.get(p) for p in pids}, "main_status": proc.wait(30),
                           "left_after_60s": [p for p in pids if p not in exits],
                           "nvml_zero_after_s": zero.get("s")}
    stop(proc)
    log("SIGTERM to main: %s" % out["sigterm_main"])
    return out


def alive(pid):
    stat = read(pid, "stat")
    return bool(stat) and stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


def release_rep(args, argv, env, mem, rep):
    name = "release-%02d" % rep
    proc, t0 = start_server(args, argv, os.path.join(args.out, name + ".server.log"), env)
    row = {"rep": rep}
    if not wait_ready(proc, t0, args.ready_timeout):
        row["error"] = "not ready"
        stop(proc)
        return row
    row["start_to_ready_s"] = round(time.time() - t0, 3)
    row["used_mib_before"] = mem.used() // 2 ** 20
    zero = {}
    t_play = time.time()

    def observe():
        # the observer's clock starts before the play; the module's own signal_epoch is read afterwards
        while time.time() - t_play < 120:
            if mem.used() == 0:
                zero["at"] = time.time()
                return
            time.sleep(0.001)

    th = threading.Thread(target=observe, daemon=True)
    th.start()
    cmd = [sys.executable, "-m", "ansible.cli.playbook", "-i", "localhost,", "-c", "local",
           "-e", "ansible_python_interpreter=" + sys.executable, "-e", "bench_out=" + args.out,
           "-e", "bench_name=" + name, "-e", "bench_check=false", "-e", "bench_nvml=false",
           "-e", "bench_backend=nvml", "-e", "bench_poll_interval=0.01",
           "-e", json.dumps({"bench_exclude_pids": [os.getpid()]}),
           os.path.join(ROOT, "realgpu", "gpu_release_gpu.yml")]
    penv = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), LC_ALL="C.UTF-8", ANSIBLE_NOCOLOR="1")
    with open(os.path.join(args.out, name + ".ansible.log"), "w") as f:
        rc = subprocess.call(cmd, env=penv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    th.join(125)
    row["play_rc"] = rc
    row["play_s"] = round(time.time() - t_play, 3)
    try:
        with open(os.path.join(args.out, name + ".json")) as f:
            res = json.load(f)["release"]
    except (OSError, ValueError, KeyError):
        res = {}
    row.update({k: res.get(k) for k in ("kill_to_pass_s", "signal_epoch", "timings")})
    row["killed"] = [(k.get("pid"), k.get("signal"), (k.get("cmdline") or "")[:60]) for k in res.get("killed", [])]
    row["gate_polls"] = (res.get("gate") or {}).get("polls")
    if zero.get("at") and res.get("signal_epoch"):
        row["physical_s"] = round(zero["at"] - res["signal_epoch"], 4)
        if row["kill_to_pass_s"] is not None:
            row["over_s"] = round(row["kill_to_pass_s"] - row["physical_s"], 4)
    row["server_exit"] = proc.poll()
    stop(proc)
    log("%s: %s" % (name, {k: row.get(k) for k in ("start_to_ready_s", "kill_to_pass_s", "physical_s", "over_s",
                                                    "play_rc", "used_mib_before")}))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--args-json", required=True)
    ap.add_argument("--env-file")
    ap.add_argument("--release-reps", type=int, default=0)
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--skip-capture", action="store_true")
    ap.add_argument("--entry-script", help="run this script instead of -m sglang.launch_server (smoke test)")
    ap.add_argument("--no-nvml", action="store_true", help="no GPU: memory reads 0 (smoke test)")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no rep that would end after this (from start)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    argv = json.loads(args.args_json)
    env = dict(os.environ)
    if args.env_file:
        with open(args.env_file) as f:
            env.update(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))
    mem = NoMemory() if args.no_nvml else Memory()
    begin = time.time()
    rc = 0
    if not args.skip_capture:
        cap = capture(args, argv, env, mem)
        with open(os.path.join(args.out, "capture.json"), "w") as f:
            json.dump(cap, f, indent=1, default=str)
        rc = 0 if cap.get("ready") and (cap["endpoints"].get("POST /generate") or {}).get("status") == 200 else 1
    rows = []
    if rc:
        args.release_reps = 0  # no server to release
    per_rep = (cap.get("start_to_ready_s") or 60) + 20 if not args.skip_capture else 90
    try:
        for rep in range(1, args.release_reps + 1):
            if time.time() - begin + per_rep * 1.2 > args.budget_s:
                log("rep %d skipped: %.0f s used, about %.0f s a rep, budget %.0f s" % (
                    rep, time.time() - begin, per_rep, args.budget_s))
                break
            t = time.time()
            rows.append(release_rep(args, argv, env, mem, rep))
            per_rep = time.time() - t
    finally:
        if args.release_reps:
            with open(os.path.join(args.out, "release_reps.json"), "w") as f:
                json.dump(rows, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
