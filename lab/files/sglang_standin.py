#!/usr/bin/env python3
# GPUSERVE-LAB-SIMULATED: a stand-in for `python -m sglang.launch_server`, used only in the gpuserve lab.
"""SIMULATED SGLang server for the gpuserve lab (python3 stdlib only).

Started by the same systemd unit as the real server, under the deployed venv's interpreter, with the real
server's argv (the lab swaps the entrypoint, not the lifecycle). What it does like SGLang:
- sets the environment SGLang's engine sets before it spawns (engine.py `_set_envs_and_config`), then spawns
  one scheduler process per TP rank with multiprocessing 'spawn' (so the venv's .pth NCCL hook runs in each),
  plus a detokenizer; each rank renames itself `sglang::scheduler_TP<rank>` (cmdline and comm, as
  setproctitle does, which also overwrites /proc/PID/environ unless SPT_NOENV is set), opens the device node of its CUDA device (the rank's ordinal among the /dev/nvidiaN the
  container has, by minor), /dev/nvidiactl and /dev/nvidia-uvm and holds them (the lab's
  nvidia-smi stand-in counts that as GPU memory), and dies with its parent (SGLang's kill_itself_when_parent_died)
  unless GPUSIM_ORPHAN_WORKERS=1 (to exercise straggler cleanup);
- warms up, then serves /health and /health_generate (503 while warming, 200 after), /generate (SSE streaming
  and plain), /v1/completions, /v1/chat/completions, /v1/models, /model_info (+ /get_model_info),
  /server_info (+ /get_server_info; per-rank avg_spec_accept_length, cumulative until /flush_cache and absent
  until a verify step ran), /flush_cache, /metrics (only with --enable-metrics, as SGLang: what the benchmark and
  the canary read, class Metrics),
  and /v1/loads (SGLang 0.5.23's load snapshot, what SMG's load monitor polls: num_running_reqs is the number of
  requests in flight, the one figure a drain waits on; the other figures are fixed or simple);
- stops as SGLang 0.5.23 does (managers/tokenizer_manager.py, sigterm_watchdog): SIGTERM to the main process only
  sets a flag ("SIGTERM received ... Draining requests and shutting down...") and /health, /health_generate answer
  503; a watchdog looks at the flag every GPUSIM_WATCHDOG_S seconds (SGLang's 5, from the server's start, so the exit
  comes 0-5 s after the signal), then drains: while requests run or wait it logs "Gracefully exiting... Remaining
  number of requests N" and sleeps the same period, with no bound, unless SGL_FORCE_SHUTDOWN is true ("Force
  exiting."). Then the main process takes its GPUs' device files (SIMULATED: the real one's memory is released only
  when it exits, 0.14 s before the unit is inactive on an H200), ends its schedulers and exits 0. Requests keep
  being accepted and served during the drain, as SGLang's; SIGINT, and SIGTERM before the API is up, end it at once.
  /v1/loads counts requests holding a slot (num_running_reqs) and waiting for one (num_waiting_reqs);
- exits 1 when it cannot bind its --host/--port (an address it lacks, a port in use or outside 0-65535), as
  uvicorn does under SGLang (the ranks are terminated);
- SIMULATED startup fault (the lab's switch for a failure after the lifecycle's stop): when the file
  GPUSIM_STANDIN_FAULT (default /etc/gpuserve-lab/standin-fault) exists at a start, the stand-in removes it, logs
  an ERROR line (with the file's text, if any) and exits 1 before it spawns anything, as SGLang exits on a startup
  failure. One start only: the rollback's start that follows serves (the unit has Restart=no);
What it does not do: load a model, use a GPU, or produce meaningful text.

Speed model (environment): GPUSIM_TOKENS_PER_S decode tokens/s per request (default 80), GPUSIM_WARMUP_S
(default 2; a real model loads for minutes, the lab keeps restarts short), GPUSIM_PREFILL_TOKENS_PER_S (default
20000), GPUSIM_NOISE relative jitter (default 0.02).
Speculative decoding (--speculative-algorithm set): each verify step emits on average GPUSIM_SPEC_ACCEPT_LENGTH
tokens (default: min(num_steps + 1, 2.6)) and costs GPUSIM_SPEC_STEP_COST decode steps (default 1.5);
GPUSIM_SPEC_DECODE_ATTN_FACTOR (default 1.0) multiplies the speed with --speculative-attention-mode decode.
GPUSIM_SLOW_WHEN (argv words, for example `--mem-fraction-static 0.7`) makes the config whose argv holds them slower
(GPUSIM_SLOW_FACTOR, default 0.6) and, with GPUSIM_SLOW_ACCEPT_LENGTH, lower in acceptance: slow_config.
The accept length follows the algorithm/draft pairing, as SGLang 0.5.23 serves it: EAGLE (or NEXTN) with an EAGLE-3
head (the draft's config.json `architectures` names an *Eagle3* class) emits exactly one token per verify step
(accept length 1.00, no error: the head skips its fc layer); any other pairing, or a draft without a readable
config.json (the lab's), the accept length above. Not modelled: EAGLE3 with a draft that is no EAGLE-3 head, which
SGLang fails at start with (the role refuses it before).

Multi-node (SIMULATED; one server, tensor parallel over N nodes, as SGLang 0.5.23 runs it with `--nnodes N
--node-rank i --dist-init-addr HOST:PORT` (alias --nccl-init-addr) `--dist-timeout SECONDS`; nnodes 1, the default,
behaves exactly as a single node always did):
- --tp-size is the total over all nodes: node i runs k = tp_size/nnodes schedulers with the GLOBAL tp ranks
  i*k .. i*k+k-1, titled `sglang::scheduler_TP<global rank>`, each on the LOCAL ordinal (rank % k) + base_gpu_id.
- refused (log, exit 1) before anything starts: tp_size not divisible by nnodes, dp_size > 1 with nnodes > 1 (both
  as SGLang); nnodes > 1 without --dist-init-addr, node_rank outside 0..nnodes-1, a dist-init-addr that is not
  HOST:PORT or [V6]:PORT, a --dist-timeout <= 0 (SGLang itself checks none of these four up front: a node then
  never meets the others, or fails later in its schedulers; the stand-in is stricter).
- the rendezvous stands in for torch.distributed's TCPStore and the NCCL links, one TCP connection per node to
  rank 0's dist-init-addr. Each node first spawns its schedulers (they hold its GPUs while it waits, as SGLang's
  do while init_process_group waits), then rendezvouses for up to --dist-timeout seconds (600 when absent: the
  stand-in's stand-in for torch's 10-minute NCCL default), counted from the start of its rendezvous. Rank 0 listens
  on the dist-init-addr's host and port when that host is an address of this node, else on 0.0.0.0 (or ::) and
  that port, as torch's TCPStore always listens on every address; it waits for nnodes-1 nodes to connect and
  announce their rank (a wrong rank, nnodes or tp_size is refused; a node whose link drops before the group formed
  is dropped from it and may join again), then tells every node that all joined. On timeout it logs the ranks
  that never came and exits 1 (its schedulers die with it). A rank >= 1 node connects to rank 0, retrying every
  0.5 s until its dist-timeout, then exits 1. A node that comes after the group formed gets no answer and runs
  into its dist-timeout. Rank 0 binds its HTTP API only after every node joined (SGLang starts uvicorn only once
  its schedulers, which need every node, are ready: until then connection refused), then warms up.
- the link stays open as the group's liveness: a node's link dropping while rank 0 runs is a SIMULATED NCCL
  watchdog abort (rank 0 logs it, exits 1); rank 0's link dropping without its shutdown ends a rank >= 1 node
  with 1. There is no heartbeat: a silent partition (no FIN/RST) goes unnoticed, as SGLang's idle gloo wait
  does for up to 120 min.
- rank 0 sends a shutdown to every node ("stopping: shutdown sent to N node(s)") when it stops as a single node
  does (after the watchdog and the drain on SIGTERM; at once on SIGINT; a SIGKILL of its control group sends
  none, and the other nodes then lose the link); a rank >= 1 node exits 0 when it arrives ("shutdown received from
  rank 0"), also one that joined a group not formed yet. SIMULATED kindness: SGLang broadcasts it from rank 0's TP0
  scheduler after its drain. Rank 0's other exits (a
  scheduler died, a lost node, its HTTP bind) send none, as SGLang's SIGQUIT path kills the tree: the other nodes
  then lose the link and exit 1.
- a rank >= 1 node on SIGTERM or SIGINT to its main process logs and keeps running: only rank 0 stops a multi-node
  server, the unit's stop timeout (SIGKILL) bounds the rest. Its schedulers keep the single-node behaviour: they
  end on their own SIGTERM (SGLang's install no handler), so a `KillMode=control-group` stop of a rank >= 1 node
  SIGTERMs them too and the node then exits 1 ("scheduler TP<n> exited"), and rank 0 loses the link.
- a rank >= 1 node runs no detokenizer, tokenizer or API: from its start (SIMULATED: SGLang starts it only once
  the node's schedulers are ready) it serves a dummy health server on --host/--port, GET /health,
  /health_generate and /ping 200 with an empty body whatever its state, anything else 404; when it cannot bind,
  it logs as uvicorn does and exits 1, before spawning anything.
- rank 0's /server_info reports nnodes, node_rank, dist_init_addr and dist_timeout (None when absent), as SGLang's
  resolved args do.
"""
import argparse
import contextlib
import ctypes
import errno
import json
import multiprocessing
import os
import random
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.5.23"
DEFAULT_DIST_TIMEOUT_S = 600  # the stand-in's default --dist-timeout (SGLang leaves it to torch: 10 min for NCCL)
WORDS = (" the of and to in is was for on that with as by at from it an be this are or which has had not his"
         " but were they have one their all been also more when who other time first can its after into new").split()


def log(msg):
    print("[%s] [SIMULATED sglang stand-in] %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), msg), flush=True)


def env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="sglang_standin", add_help=True, allow_abbrev=False)
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", type=int, default=1)
    p.add_argument("--base-gpu-id", type=int, default=0)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr", "--nccl-init-addr", dest="dist_init_addr", default=None)
    p.add_argument("--dist-timeout", type=int, default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--speculative-algorithm", default=None)
    p.add_argument("--speculative-draft-model-path", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--speculative-attention-mode", default="prefill")
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    args, unknown = p.parse_known_args(argv)
    args.argv = list(argv)
    return args, unknown


def set_sglang_env(args):
    """What SGLang 0.5.23's engine does to os.environ before spawning (so workers inherit the same)."""
    os.environ.setdefault("NCCL_CUMEM_ENABLE", "0")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    if os.environ.get("TRTLLM_ENABLE_PDL", "1") != "0":
        os.environ["TRTLLM_ENABLE_PDL"] = "1"
    os.environ.setdefault("CUTE_DSL_LOG_LEVEL", "30")
    os.environ.setdefault("CUTE_DSL_LOG_TO_CONSOLE", "1")


def set_proctitle(title):
    """setproctitle as py-setproctitle 1.3.8 (SGLang's) does it on Linux, without the package: comm, and the title
    over the argv area padded with NULs (/proc/self/cmdline). Without SPT_NOENV in the environment it takes the
    environ area too, after copying the environment elsewhere, so /proc/PID/environ then reads empty while
    os.environ still works: the real scheduler and detokenizer on the H200 lost their NCCL variables there
    (tests/fixtures/sglang-0.5.23-h200; the package itself, run in a spawned child, empties it). SPT_NOENV=1
    keeps the environ area, the title then fits in the argv area."""
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(title[:15])
    except OSError:
        pass
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        arg_start, arg_end = int(fields[45]), int(fields[46])  # stat fields 48 and 49
        env_start, env_end = int(fields[47]), int(fields[48])  # 50 and 51
        end = arg_end
        if not os.environ.get("SPT_NOENV") and env_start == arg_end and env_end > env_start:
            libc = ctypes.CDLL(None)
            libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
            saved = dict(os.environb)
            libc.clearenv()  # the C environment moves to the heap before its area is reused, as the package does
            for key, value in saved.items():
                libc.setenv(key, value, 1)
            end = env_end
        size = end - arg_start
        if size > 1:
            data = title.encode()[: size - 1]
            ctypes.memmove(arg_start, data + b"\0" * (size - len(data)), size)
    except (OSError, ValueError, IndexError, AttributeError):
        pass


def die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG, like sglang's kill_itself_when_parent_died()


def gpu_for_rank(rank, base):
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if base + rank < len(ids) and ids[base + rank].isdigit():
            return int(ids[base + rank])
    return base + rank


def device_for_ordinal(ordinal, dev_dir):
    """The device node of CUDA device `ordinal`: CUDA numbers the GPUs it can see from 0, so in a container that
    is passed /dev/nvidia4..7 ordinal 0 is nvidia4. SIMULATED order: by device minor (CUDA's is by PCI bus id)."""
    try:
        minors = sorted(int(n[6:]) for n in os.listdir(dev_dir) if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        minors = []
    return "nvidia%d" % (minors[ordinal] if ordinal < len(minors) else ordinal)


def scheduler_main(rank, tp_size, base_gpu_id, dev_dir, ready, local_rank=None):
    """Scheduler of GLOBAL tp rank `rank`, on this node's CUDA device `local_rank` (+ base_gpu_id): the same on one
    node; on node i of a multi-node server local_rank = rank % (tp_size / nnodes)."""
    if os.environ.get("GPUSIM_ORPHAN_WORKERS") != "1":
        die_with_parent()
    set_proctitle("sglang::scheduler_TP%d" % rank if tp_size > 1 else "sglang::scheduler")
    device = device_for_ordinal(gpu_for_rank(rank if local_rank is None else local_rank, base_gpu_id), dev_dir)
    held = []
    for name in (device, "nvidiactl", "nvidia-uvm"):
        path = os.path.join(dev_dir, name)
        try:
            held.append(open(path, "rb"))
        except OSError as e:
            print("scheduler TP%d: cannot open %s: %s" % (rank, path, e), file=sys.stderr, flush=True)
            if name == device:
                sys.exit(1)
    ready.set()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


def detokenizer_main():
    if os.environ.get("GPUSIM_ORPHAN_WORKERS") != "1":
        die_with_parent()
    set_proctitle("sglang::detokenizer")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


class Engine:
    def __init__(self, args):
        self.args = args
        self.started = time.time()
        self.ready = False
        self.lock = threading.Lock()
        self.base_tps = env_float("GPUSIM_TOKENS_PER_S", 80)
        self.prefill_tps = env_float("GPUSIM_PREFILL_TOKENS_PER_S", 20000)
        self.noise = env_float("GPUSIM_NOISE", 0.02)
        self.spec = bool(args.speculative_algorithm)
        self.accept = spec_accept_length(args) if self.spec else 1.0
        self.step_cost = env_float("GPUSIM_SPEC_STEP_COST", 1.5) if self.spec else 1.0
        self.attn_factor = 1.0
        if self.spec and args.speculative_attention_mode == "decode":
            self.attn_factor = env_float("GPUSIM_SPEC_DECODE_ATTN_FACTOR", 1.0)
        # The scheduler's limit, reported as internal_states[].effective_max_running_requests_per_dp like SGLang's
        # scheduler (real SGLang derives it from the KV pool when unset; the stand-in takes 256).
        self.max_running = args.max_running_requests or 256
        self.slots = threading.BoundedSemaphore(self.max_running)
        self.running = 0  # requests in flight (holding a slot), for /v1/loads
        self.waiting = 0  # requests waiting for a slot
        self.gracefully_exit = False  # SGLang's flag: set by SIGTERM, read by the watchdog
        self.watchdog_s = env_float("GPUSIM_WATCHDOG_S", 5)
        self.metrics = Metrics(args.served_model_name or args.model_path, graphs=not args.disable_cuda_graph)
        slow, slow_accept = slow_config(getattr(args, "argv", []))
        if slow != 1.0 or slow_accept is not None:
            self.base_tps *= slow
            if self.spec and slow_accept is not None:
                self.accept = slow_accept
            log("SIMULATED slower config (GPUSIM_SLOW_WHEN %r): %.2f of the speed, accept length %s"
                % (os.environ.get("GPUSIM_SLOW_WHEN"), slow, self.accept if self.spec else "n/a"))
        self.reset_stats()

    def reset_stats(self):
        with self.lock:
            self.accepted_tokens = 0
            self.verify_steps = 0
            self.last_gen_tps = 0.0

    def step_time(self):
        jitter = random.gauss(1.0, self.noise) if self.noise > 0 else 1.0
        return max(1e-4, self.step_cost / (self.base_tps * self.attn_factor) * max(0.5, jitter))

    def step_tokens(self):
        if not self.spec:
            return 1
        top = (self.args.speculative_num_steps or 3) + 1
        lo = int(self.accept)
        n = lo + (1 if random.random() < self.accept - lo else 0)
        return max(1, min(top, n))

    def generate(self, prompt_tokens, max_new, stream=False):
        """Yields (new_token_texts, completion_tokens, verify_steps_so_far, finished)."""
        arrived = time.time()
        with self.slot():
            time.sleep(prompt_tokens / self.prefill_tps + 0.005)
            done, steps, t0 = 0, 0, time.time()
            first = [random.choice(WORDS)]
            # the prefill makes the first token; verify steps follow (the real 8-token /generate: spec_verify_ct 7,
            # and a 1-token request, /health_generate's, leaves avg_spec_accept_length unset)
            done, steps = 1, 0
            yield first, done, steps, done >= max_new
            while done < max_new:
                time.sleep(self.step_time())
                self.metrics.step()
                n = min(self.step_tokens(), max_new - done)
                done += n
                steps += 1
                yield [random.choice(WORDS) for _ in range(n)], done, steps, done >= max_new
            end = time.time()
            # SGLang's TPOT: (finished - first token) / (completion tokens - 1), for a request that hit its length
            self.metrics.finished(done, steps if self.spec else 0, stream, ttft=t0 - arrived,
                                  tpot=(end - t0) / (done - 1) if done > 1 else None, e2e=end - arrived)
            with self.lock:
                # SGLang's avg_spec_accept_length counts the tokens verify steps emitted (metrics_reporter
                # spec_num_accept_tokens), not the prefill's: a draft never accepted reads exactly 1.00 there, while
                # meta_info's spec_accept_length divides completion_tokens (16 / 15 for 16 tokens)
                self.accepted_tokens += done - 1
                self.verify_steps += steps
                dt = time.time() - t0
                if dt > 0:
                    self.last_gen_tps = done / dt

    @contextlib.contextmanager
    def slot(self):
        """A request's place: counted waiting until it holds one of max_running slots, then running."""
        with self.lock:
            self.waiting += 1
        taken = False
        try:
            self.slots.acquire()
            taken = True
            with self.lock:
                self.waiting -= 1
                self.running += 1
            yield
        finally:
            with self.lock:
                if taken:
                    self.running -= 1
                else:
                    self.waiting -= 1
            if taken:
                self.slots.release()

    def in_flight_total(self):
        with self.lock:
            return self.running + self.waiting

    def loads(self):
        """GET /v1/loads as SGLang 0.5.23 answers it (srt/entrypoints/v1_loads.py, managers/load_snapshot.py),
        one entry per DP rank; SIMULATED figures except num_running_reqs."""
        with self.lock:
            running, waiting = self.running, self.waiting
        now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
        total = 100000
        load = {"timestamp": time.time(), "dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": waiting,
                "num_waiting_uncached_tokens": 0, "num_used_tokens": 0, "num_total_tokens": total,
                "num_active_tokens": 0, "num_prealloc_ready_tokens": 0, "max_total_num_tokens": total,
                "max_running_requests": self.max_running, "token_usage": 0.0,
                "gen_throughput": round(self.last_gen_tps, 3), "cache_hit_rate": 0.0,
                "utilization": round(running / float(self.max_running), 4), "total_prefill_uncached_tokens": 0,
                "total_prefill_busy_us": 0, "decode_moments": [],
                "memory": {"weight_gb": 0.0, "kv_cache_gb": 0.0, "graph_gb": 0.0, "token_capacity": total},
                "disaggregation": {"mode": "null", "prefill_bootstrap_queue_reqs": 0, "prefill_inflight_queue_reqs": 0,
                                   "decode_prealloc_queue_reqs": 0, "decode_transfer_queue_reqs": 0,
                                   "decode_retracted_queue_reqs": 0, "kv_transfer_speed_gb_s": 0.0,
                                   "kv_transfer_latency_ms": 0.0},
                "queues": {"waiting": waiting, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}}
        return {"timestamp": now, "version": VERSION, "accelerator": None, "num_accelerators": 1, "loads": [load]}

    def avg_accept(self):
        with self.lock:
            if not self.spec:
                return None
            # SGLang reports it only once a verify step ran (internal_state.py _average_accept_length)
            return round(self.accepted_tokens / self.verify_steps, 4) if self.verify_steps else None


class Metrics:
    """GET /metrics with --enable-metrics: what the benchmark and a rolling deploy's canary read, with SGLang 0.5.23's
    names, types, help texts, labels and buckets (srt/observability/metrics_collector.py): the tokenizer's counters
    and histograms (TokenizerMetricsCollector, per finished request: its completion tokens, its spec_verify_ct when
    it ran any, its time to first token, its time per output token, its end-to-end latency; aborted requests) and
    the scheduler's CUDA-graph counter (SchedulerMetricsCollector, one per decode or verify step, mode
    decode_cuda_graph, or decode_none with --disable-cuda-graph), in its multiprocess exposition (no _created
    samples; a label set appears once a request incremented it). SGLang's other metrics are not served."""

    # (name, help, with is_streaming)
    COUNTERS = (("sglang:generation_tokens_total", "Number of generation tokens processed.", True),
                ("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.", False),
                ("sglang:num_requests_total", "Number of requests processed.", True),
                ("sglang:num_aborted_requests_total", "Number of requests aborted.", False))
    TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
    ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
                   0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
    # (name, help, buckets)
    HISTOGRAMS = (("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS),
                  ("sglang:request_time_per_output_token_seconds",
                   "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
                   ITL_BUCKETS),
                  ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                   TTFT_BUCKETS + (600, 1200, 1800, 2400)))
    PASSES = ("sglang:cuda_graph_passes_total", "Total number of forward passes categorized by CUDA graph.")

    def __init__(self, model_name, graphs=True):
        self.model_name = model_name
        self.mode = "decode_cuda_graph" if graphs else "decode_none"
        self.lock = threading.Lock()
        self.values = {}  # (counter name, is_streaming or None) -> value; never reset, as a counter is not
        self.observed = {}  # (histogram name, is_streaming) -> [bucket counts..., sum, count]
        self.passes = 0

    def finished(self, completion_tokens, spec_verify_ct, stream, ttft=None, tpot=None, e2e=None):
        flag = "true" if stream else "false"
        with self.lock:
            for key, value in ((("sglang:generation_tokens_total", flag), completion_tokens),
                               (("sglang:num_requests_total", flag), 1),
                               (("sglang:spec_verify_calls_total", None), spec_verify_ct)):
                if value > 0:
                    self.values[key] = self.values.get(key, 0.0) + value
            for (name, _doc, buckets), value in zip(self.HISTOGRAMS, (ttft, tpot, e2e)):
                if value is None:
                    continue
                slot = self.observed.setdefault((name, flag), [0] * len(buckets) + [0.0, 0])
                for i, bound in enumerate(buckets):
                    if value <= bound:
                        slot[i] += 1
                slot[-2] += value
                slot[-1] += 1

    def step(self):
        with self.lock:
            self.passes += 1

    def text(self):
        name = self.model_name.replace("\\", "\\\\").replace('"', '\\"')
        base = 'engine_type="unified",%smodel_name="%s"'
        lines = []
        with self.lock:
            values, observed, passes = dict(self.values), {k: list(v) for k, v in self.observed.items()}, self.passes
        for metric, doc, by_stream in self.COUNTERS:
            lines += ["# HELP %s %s" % (metric, doc), "# TYPE %s counter" % metric]
            for (key, stream), value in sorted(values.items(), key=lambda kv: str(kv[0])):
                if key == metric:
                    labels = base % ('is_streaming="%s",' % stream if by_stream else "", name)
                    lines.append("%s{%s} %r" % (metric, labels, float(value)))
        for metric, doc, buckets in self.HISTOGRAMS:
            lines += ["# HELP %s %s" % (metric, doc), "# TYPE %s histogram" % metric]
            for (key, stream), slot in sorted(observed.items()):
                if key != metric:
                    continue
                labels = base % ('is_streaming="%s",' % stream, name)
                for bound, count in zip(buckets + ("+Inf",), slot[:len(buckets)] + [slot[-1]]):
                    lines.append('%s_bucket{%s,le="%s"} %r' % (metric, labels, bound if bound == "+Inf"
                                                               else repr(float(bound)), float(count)))
                lines.append("%s_sum{%s} %r" % (metric, labels, float(slot[-2])))
                lines.append("%s_count{%s} %r" % (metric, labels, float(slot[-1])))
        metric, doc = self.PASSES
        lines += ["# HELP %s %s" % (metric, doc), "# TYPE %s counter" % metric]
        if passes:
            lines.append('%s{engine_type="unified",mode="%s",model_name="%s",moe_ep_rank="0",pp_rank="0",tp_rank="0"}'
                         ' %r' % (metric, self.mode, name, float(passes)))
        return "\n".join(lines) + "\n"


def slow_config(argv):
    """SIMULATED slower config (GPUSIM_SLOW_WHEN, a lab test's switch for a canary that must fail): when the server's
    argv holds those words in that order (for example `--mem-fraction-static 0.7`), it decodes at GPUSIM_SLOW_FACTOR
    of its speed (default 0.6) and, with GPUSIM_SLOW_ACCEPT_LENGTH set, accepts that many tokens per verify step.
    (1.0, None) for any other argv, or without the setting."""
    words = os.environ.get("GPUSIM_SLOW_WHEN", "").split()
    if not words or not any(argv[i:i + len(words)] == words for i in range(len(argv) - len(words) + 1)):
        return 1.0, None
    accept = os.environ.get("GPUSIM_SLOW_ACCEPT_LENGTH")
    return env_float("GPUSIM_SLOW_FACTOR", 0.6), float(accept) if accept else None


def spec_accept_length(args):
    """SIMULATED mean tokens per verify step for the algorithm and the draft (module docstring)."""
    if args.speculative_algorithm.upper() in ("EAGLE", "NEXTN") and args.speculative_draft_model_path:
        archs = model_identity(args.speculative_draft_model_path)["architectures"] or []
        if any("eagle3" in str(arch).lower() for arch in archs):
            return 1.0
    return env_float("GPUSIM_SPEC_ACCEPT_LENGTH", min((args.speculative_num_steps or 3) + 1, 2.6))


def model_identity(model_path):
    """/get_model_info's model_type and architectures: the model directory's config.json, as SGLang reads them
    (None when the directory has none, as the lab's has not)."""
    try:
        with open(os.path.join(model_path, "config.json")) as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        cfg = {}
    return {"model_type": cfg.get("model_type"), "architectures": cfg.get("architectures"),
            "max_position_embeddings": cfg.get("max_position_embeddings")}


def prompt_len(body):
    if isinstance(body.get("input_ids"), list):
        return max(1, len(body["input_ids"]))
    text = body.get("text", body.get("prompt", ""))
    if isinstance(text, list):
        text = " ".join(str(t) for t in text)
    if "messages" in body:
        text = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
    return max(1, len(str(text).split()))


def make_handler(engine, args):
    served = args.served_model_name or args.model_path

    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *a):  # quiet, like uvicorn's access log off
            pass

        def send_json(self, obj, status=200):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def send_text(self, text, status=200):
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b"{}"
            try:
                return json.loads(raw or b"{}")
            except ValueError:
                return {}

        def route(self):
            return self.path.split("?", 1)[0]

        def do_GET(self):
            r = self.route()
            if r in ("/health", "/health_generate"):
                if engine.gracefully_exit:
                    log("Health check request received during shutdown. Returning 503.")
                if not engine.ready or engine.gracefully_exit:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if r == "/health_generate":
                    for _ in engine.generate(1, 1):
                        pass
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif r == "/flush_cache":
                self.flush()
            elif r in ("/server_info", "/get_server_info"):
                self.send_json(self.server_info())
            elif r in ("/model_info", "/get_model_info"):
                self.send_json({"model_path": args.model_path, "served_model_name": served,
                                "tokenizer_path": args.tokenizer_path or args.model_path, "is_generation": True,
                                "preferred_sampling_params": None, "weight_version": "default",
                                "load_format": "auto", "reasoning_parser": None, "tool_call_parser": None,
                                "disaggregation_mode": "null", "has_image_understanding": False,
                                "has_audio_understanding": False, "gpuserve_lab_simulated": True,
                                **{k: v for k, v in model_identity(args.model_path).items()
                                   if k in ("model_type", "architectures")}})
            elif r == "/metrics" and args.enable_metrics:
                data = engine.metrics.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif r == "/v1/loads":
                self.send_json(engine.loads())
            elif r == "/v1/models":
                self.send_json({"object": "list", "data": [{
                    "id": served, "object": "model", "created": int(engine.started), "owned_by": "sglang",
                    "root": served, "parent": None,
                    "max_model_len": args.context_length or model_identity(args.model_path)["max_position_embeddings"]
                    or 131072}]})
            else:
                self.send_json({"detail": "Not Found"}, 404)

        def do_POST(self):
            r = self.route()
            if r == "/flush_cache":
                self.body()
                self.flush()
            elif r == "/generate":
                self.generate_native(self.body())
            elif r == "/v1/completions":
                self.generate_oai(self.body(), chat=False)
            elif r == "/v1/chat/completions":
                self.generate_oai(self.body(), chat=True)
            else:
                self.send_json({"detail": "Not Found"}, 404)

        def flush(self):
            engine.reset_stats()
            self.send_text("Cache flushed.\nPlease check backend logs for more details. "
                           "(When there are running or waiting requests, the operation will not be performed.)\n")

        def server_info(self):
            info = {k: v for k, v in vars(args).items()}
            # launch_command: the arguments only, as SGLang's resolved args have it
            info.update({"version": VERSION, "gpuserve_lab_simulated": True, "status": "ready",
                         "launch_command": " ".join(sys.argv[1:])})
            states = []
            for _rank in range(args.dp_size if args.dp_size > 1 else 1):
                st = {"world_size": args.tp_size, "last_gen_throughput": round(engine.last_gen_tps, 3),
                      "effective_max_running_requests_per_dp": engine.max_running,
                      "memory_usage": {"weight": 0.0, "kvcache": 0.0, "token_capacity": 0}}
                if engine.avg_accept() is not None:
                    st["avg_spec_accept_length"] = engine.avg_accept()
                states.append(st)
            info["internal_states"] = states
            return info

        def sse_start(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()  # HTTP/1.0: the stream ends when the connection closes

        def sse(self, obj):
            self.wfile.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")
            self.wfile.flush()

        def not_ready(self):
            if engine.ready:
                return False
            self.send_json({"error": {"message": "The server is not ready (warming up)."}}, 503)
            return True

        def generate_native(self, body):
            if self.not_ready():
                return
            sp = body.get("sampling_params") or {}
            max_new = int(sp.get("max_new_tokens") or 128)
            plen = prompt_len(body)
            rid = body.get("rid") or uuid.uuid4().hex
            stream = bool(body.get("stream"))
            text, t0 = "", time.time()
            if stream:
                self.sse_start()
            meta = {}
            for toks, done, steps, finished in engine.generate(plen, max_new, stream):
                text += "".join(toks)
                meta = {"id": rid, "finish_reason": {"type": "length", "length": done} if finished else None,
                        "prompt_tokens": plen, "completion_tokens": done, "cached_tokens": 0,
                        "e2e_latency": time.time() - t0}
                if engine.spec:
                    meta["spec_verify_ct"] = steps
                    meta["spec_accept_length"] = done / steps if steps else 0.0
                if stream:
                    try:
                        self.sse({"text": text, "output_ids": [], "meta_info": meta, "index": 0})
                    except (BrokenPipeError, ConnectionResetError):
                        return
            if stream:
                self.sse(b"[DONE]")
            else:
                self.send_json({"text": text, "output_ids": [], "meta_info": meta, "index": 0})

        def generate_oai(self, body, chat):
            if self.not_ready():
                return
            max_new = int(body.get("max_completion_tokens") or body.get("max_tokens") or 128)
            plen = prompt_len(body)
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
            stream = bool(body.get("stream"))
            obj = "chat.completion" if chat else "text_completion"
            created = int(time.time())
            if stream:
                self.sse_start()
            text, done = "", 0
            for toks, done, steps, finished in engine.generate(plen, max_new, stream):
                piece = "".join(toks)
                text += piece
                if stream:
                    choice = {"index": 0, "finish_reason": "length" if finished else None}
                    if chat:
                        choice["delta"] = {"role": "assistant", "content": piece}
                    else:
                        choice["text"] = piece
                    chunk = {"id": rid, "object": obj + (".chunk" if chat else ""), "created": created,
                             "model": body.get("model") or args.model_path, "choices": [choice],
                             "usage": {"prompt_tokens": plen, "completion_tokens": done,
                                       "total_tokens": plen + done}}
                    try:
                        self.sse(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        return
            usage = {"prompt_tokens": plen, "completion_tokens": done, "total_tokens": plen + done}
            if stream:
                self.sse(b"[DONE]")
                return
            choice = {"index": 0, "finish_reason": "length"}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            self.send_json({"id": rid, "object": obj, "created": created,
                            "model": body.get("model") or args.model_path, "choices": [choice], "usage": usage})

    return Handler


def parse_addr(text):
    """--dist-init-addr as SGLang's NetworkAddress.parse takes it: HOST:PORT, NAME:PORT or [V6]:PORT."""
    text = (text or "").strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
        if ":" in host:
            raise ValueError("an IPv6 address must be bracketed: [ADDR]:PORT")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("not HOST:PORT")
    return host, int(port)


def check_parallel(args):
    """The multi-node argument set, or why it is refused (None: fine)."""
    if args.nnodes < 1:
        return "--nnodes must be at least 1, not %d" % args.nnodes
    if args.tp_size % args.nnodes:
        return "tp_size must be divisible by number of nodes (--tp-size %d, --nnodes %d)" % (
            args.tp_size, args.nnodes)
    if args.dp_size > 1 and args.nnodes != 1:
        return ("multi-node data-parallel replicas are not supported; use attention DP (--attn-dp-size) across "
                "nodes")
    if not 0 <= args.node_rank < args.nnodes:
        return "--node-rank %d is outside 0..%d (--nnodes %d)" % (args.node_rank, args.nnodes - 1, args.nnodes)
    if args.dist_timeout is not None and args.dist_timeout <= 0:
        return "--dist-timeout must be positive, not %d" % args.dist_timeout
    if args.nnodes > 1:
        if not args.dist_init_addr:
            return ("--nnodes %d needs --dist-init-addr HOST:PORT (rank 0's address): without it the nodes never "
                    "meet" % args.nnodes)
        try:
            parse_addr(args.dist_init_addr)
        except ValueError as exc:
            return "--dist-init-addr %r: %s" % (args.dist_init_addr, exc)
    return None


def fmt_addr(host, port):
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


class LineReader:
    """Lines of the rendezvous protocol (ASCII, one message a line) from one socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def line(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("timed out")
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            data = self.sock.recv(4096)
            if not data:
                raise EOFError("connection closed")
            self.buf += data
            if len(self.buf) > 4096 and b"\n" not in self.buf:
                raise ValueError("line too long")
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("ascii", "replace").strip()


def send_line(sock, text):
    sock.sendall(text.encode("ascii") + b"\n")


class Node:
    """This node's processes and its one way out (from the main thread, a signal handler or a link's thread)."""

    def __init__(self):
        self.procs = []  # schedulers first, then the detokenizer (rank 0 only)
        self.schedulers = []  # (global tp rank, process)
        self.devices = []  # the device file of each scheduler's GPU
        self.held = []
        self.lock = threading.Lock()
        self.stopping = False

    def shutdown(self, code=0, before=None):
        if not self.lock.acquire(blocking=False):
            return  # already on its way out
        self.stopping = True
        if before is not None:
            before()
        log("kill_process_tree called: parent_pid=%d, include_parent=False, pid=%d" % (os.getpid(), os.getpid()))
        for pr in self.procs:
            if pr.is_alive():
                pr.terminate()
        for pr in self.procs:
            pr.join(5)
        os._exit(code)

    def watch_schedulers(self):
        while True:
            time.sleep(1)
            for rank, pr in self.schedulers:
                if not pr.is_alive():
                    log("scheduler TP%d exited with %s: shutting down" % (rank, pr.exitcode))
                    self.shutdown(code=1)


class Rank0Group:
    """SIMULATED torch.distributed TCPStore + NCCL links on rank 0: one TCP connection from every other node."""

    def __init__(self, args, node):
        self.args = args
        self.node = node
        self.nnodes = args.nnodes
        self.host, self.port = parse_addr(args.dist_init_addr)
        self.peers = {}  # node rank -> (socket, "addr:port")
        self.cond = threading.Condition()
        self.formed = False
        self.stopping = False
        self.sock = None

    def listen(self):
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
            where = fmt_addr(self.host, self.port)
        except OSError as exc:
            if not (isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL):
                sock.close()
                raise
            wildcard = "::" if family == socket.AF_INET6 else "0.0.0.0"
            sock.bind((wildcard, self.port))
            where = "%s (%s is not an address of this node)" % (fmt_addr(wildcard, self.port), self.host)
        sock.listen(64)
        self.sock = sock
        threading.Thread(target=self.accept_loop, daemon=True).start()
        return where

    def accept_loop(self):
        while True:
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handshake, args=(conn, fmt_addr(addr[0], addr[1])), daemon=True).start()

    def handshake(self, conn, addr):
        reader = LineReader(conn)
        try:
            words = reader.line(timeout=5).split()
        except (OSError, EOFError, ValueError):
            conn.close()
            return
        try:
            rank, nnodes, tp_size = (int(w) for w in words[1:4]) if words[:1] == ["JOIN"] else (None, None, None)
        except ValueError:
            rank = nnodes = tp_size = None
        with self.cond:
            if rank is None:
                error = "not a rendezvous message"
            elif nnodes != self.nnodes or tp_size != self.args.tp_size:
                error = "node rank %s has --nnodes %s --tp-size %s, rank 0 has --nnodes %d --tp-size %d" % (
                    rank, nnodes, tp_size, self.nnodes, self.args.tp_size)
            elif not 1 <= rank < self.nnodes:
                error = "node rank %d is not one of 1..%d" % (rank, self.nnodes - 1)
            elif self.formed:
                log("node rank %d from %s came after the group formed: no answer (SIMULATED: it waits out its "
                    "dist-timeout)" % (rank, addr))
                threading.Thread(target=self.hold, args=(conn,), daemon=True).start()
                return
            elif rank in self.peers:
                error = "node rank %d already joined from %s" % (rank, self.peers[rank][1])
            else:
                error = None
            if error:
                log("refused a join from %s: %s" % (addr, error))
                with contextlib.suppress(OSError):
                    send_line(conn, "ERR " + error)
                conn.close()
                return
            try:
                send_line(conn, "OK")
            except OSError:
                conn.close()
                return
            self.peers[rank] = (conn, addr)
            log("joined rank %d from %s (%d of %d nodes)" % (rank, addr, len(self.peers) + 1, self.nnodes))
            self.cond.notify_all()
        self.monitor(rank, conn, addr)

    def hold(self, conn):
        with contextlib.suppress(OSError):
            while conn.recv(4096):
                pass
        conn.close()

    def monitor(self, rank, conn, addr):
        why = "connection closed"
        try:
            conn.settimeout(None)
            while conn.recv(4096):
                pass
        except OSError as exc:
            why = str(exc) or type(exc).__name__
        if self.stopping or self.node.stopping:
            return
        with self.cond:
            if not self.formed:
                if self.peers.get(rank, (None,))[0] is conn:
                    del self.peers[rank]
                log("node rank %d (%s) left before the group formed (%s): waiting for it again" % (rank, addr, why))
                conn.close()
                return
        log("SIMULATED NCCL watchdog: lost node rank %d (%s): %s; aborting the server" % (rank, addr, why))
        self.node.shutdown(code=1)

    def wait_all(self, timeout):
        """True once every node joined; False after `timeout` seconds (the missing ranks logged)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.peers) < self.nnodes - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [r for r in range(1, self.nnodes) if r not in self.peers]
                    log("rendezvous timed out after %d s (--dist-timeout): node rank(s) %s never joined (%d of %d "
                        "nodes here); exiting" % (timeout, ", ".join(str(r) for r in missing), len(self.peers) + 1,
                                                  self.nnodes))
                    return False
                self.cond.wait(min(left, 0.5))
            self.formed = True
            peers = dict(self.peers)
        for rank, (conn, addr) in sorted(peers.items()):
            with contextlib.suppress(OSError):  # a link that broke just now: its monitor aborts the server
                send_line(conn, "ALL %d" % self.nnodes)
        log("all %d nodes joined" % self.nnodes)
        return True

    def send_shutdown(self):
        self.stopping = True
        sent = 0
        for rank, (conn, addr) in sorted(dict(self.peers).items()):
            try:
                send_line(conn, "SHUTDOWN")
                sent += 1
            except OSError as exc:
                log("could not send the shutdown to node rank %d (%s): %s" % (rank, addr, exc))
        log("stopping: shutdown sent to %d node(s)" % sent)


def join_rank0(args, node, timeout):
    """A rank >= 1 node's side of the rendezvous: (socket, LineReader) once every node joined, or exit 1."""
    host, port = parse_addr(args.dist_init_addr)
    where = fmt_addr(host, port)
    deadline = time.monotonic() + timeout
    last, told = None, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            log("rendezvous timed out after %d s (--dist-timeout): rank 0 at %s never answered (last: %s); exiting"
                % (timeout, where, last))
            node.shutdown(code=1)
        try:
            sock = socket.create_connection((host, port), timeout=min(left, 2))
            break
        except OSError as exc:
            last = exc.strerror or str(exc) or type(exc).__name__
            if not told:
                log("rank 0 at %s is not reachable yet (%s): retrying every 0.5 s for up to %d s"
                    % (where, last, timeout))
                told = True
            time.sleep(max(0.0, min(0.5, deadline - time.monotonic())))
    reader = LineReader(sock)
    try:
        send_line(sock, "JOIN %d %d %d" % (args.node_rank, args.nnodes, args.tp_size))
        answer = reader.line(timeout=max(0.1, deadline - time.monotonic()))
        if answer != "OK":
            log("rank 0 at %s refused node rank %d: %s; exiting"
                % (where, args.node_rank, answer[4:] if answer.startswith("ERR ") else answer))
            node.shutdown(code=1)
        log("joined rank 0 at %s as node rank %d: waiting for all %d nodes" % (where, args.node_rank, args.nnodes))
        answer = reader.line(timeout=max(0.1, deadline - time.monotonic()))
    except socket.timeout:
        log("rendezvous timed out after %d s (--dist-timeout): no answer from rank 0 at %s (the group did not form, "
            "or formed without this node); exiting" % (timeout, where))
        node.shutdown(code=1)
    except (OSError, EOFError, ValueError) as exc:
        log("lost the link to rank 0 at %s before the group formed (%s); exiting" % (where, exc))
        node.shutdown(code=1)
    if answer == "SHUTDOWN":  # rank 0 stopped before every node joined
        log("shutdown received from rank 0")
        node.shutdown(code=0)
    if not answer.startswith("ALL"):
        log("unexpected rendezvous answer from rank 0 at %s: %r; exiting" % (where, answer))
        node.shutdown(code=1)
    log("all %d nodes joined" % args.nnodes)
    return sock, reader, where


def follow_rank0(node, reader, where):
    """A rank >= 1 node's link to rank 0: its shutdown ends the node with 0, a drop without it with 1."""
    why = "connection closed"
    while True:
        try:
            line = reader.line(None)
        except (OSError, EOFError, ValueError) as exc:
            why = str(exc) or type(exc).__name__
            break
        if line == "SHUTDOWN":
            log("shutdown received from rank 0")
            node.shutdown(code=0)
            return
    if not node.stopping:
        log("SIMULATED NCCL watchdog: lost the link to rank 0 at %s without its shutdown (%s); aborting"
            % (where, why))
        node.shutdown(code=1)


def make_dummy_handler():
    """SGLang's dummy health server on a rank >= 1 node (utils/common.py launch_dummy_health_check_server)."""

    class DummyHandler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *a):
            pass

        def reply(self, status, data=b""):
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.split("?", 1)[0] in ("/health", "/health_generate", "/ping"):
                self.reply(200)
            else:
                self.reply(404, b'{"detail":"Not Found"}')

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            self.reply(404, b'{"detail":"Not Found"}')

    return DummyHandler


def bind_http(args, handler):
    """The HTTP server on --host/--port, or None after logging as uvicorn does under SGLang."""
    try:
        server = ThreadingHTTPServer((args.host, args.port), handler)
    except OSError as exc:
        # as uvicorn's Server.startup under SGLang's launch_server: log, exit 1; the ranks die with their parent
        log("ERROR:    [Errno %s] error while attempting to bind on address %r: %s"
            % (exc.errno, (args.host, args.port), (exc.strerror or str(exc)).lower()))
        return None
    except (OverflowError, ValueError) as exc:
        # a port outside 0-65535: bind() raises before any errno. Uncaught, it ended the main thread while the
        # interpreter waited on the schedulers at exit, so the process lived on without serving; SGLang exits.
        log("ERROR:    error while attempting to bind on address %r: %s" % ((args.host, args.port), exc))
        return None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_schedulers(args, node, ctx, dev_dir):
    """This node's schedulers: GLOBAL tp ranks node_rank*k .. node_rank*k+k-1, on local ordinals 0..k-1."""
    k = args.tp_size // args.nnodes
    readies = []
    for rank in range(args.node_rank * k, args.node_rank * k + k):
        ev = ctx.Event()
        pr = ctx.Process(target=scheduler_main, args=(rank, args.tp_size, args.base_gpu_id, dev_dir, ev, rank % k),
                         name="sglang::scheduler_TP%d" % rank, daemon=False)
        pr.start()
        readies.append((rank, ev, pr))
        node.schedulers.append((rank, pr))
        node.procs.append(pr)
        node.devices.append(os.path.join(dev_dir, device_for_ordinal(gpu_for_rank(rank % k, args.base_gpu_id),
                                                                     dev_dir)))
    return readies


def wait_schedulers(node, readies):
    for rank, ev, pr in readies:
        if not ev.wait(60) or not pr.is_alive():
            log("scheduler TP%d failed to start" % rank)
            node.shutdown(code=1)


def hold_gpus(node):
    """SIMULATED: the main process takes its schedulers' GPU files before they exit, so the lab's nvidia-smi counts
    the memory until the main process exits, as an H200 showed (the scheduler's memory freed only then)."""
    for path in node.devices:
        with contextlib.suppress(OSError):
            node.held.append(open(path, "rb"))


def sigterm_watchdog(engine, node, group):
    """SGLang 0.5.23's TokenizerManager.sigterm_watchdog: the flag every watchdog_s seconds, then the drain with no
    bound (a period's sleep while requests remain) unless SGL_FORCE_SHUTDOWN, then the shutdown."""
    while not engine.gracefully_exit:
        time.sleep(engine.watchdog_s)
    while True:
        remaining = engine.in_flight_total()
        if os.environ.get("SGL_FORCE_SHUTDOWN", "false").lower() in ("true", "1"):
            log("Signal SIGTERM received while force shutdown flag set. Force exiting.")
            break
        log("Gracefully exiting... Remaining number of requests %d. Remaining requests remaining_rids=[%s]."
            % (remaining, ", ".join("'simulated-%d'" % i for i in range(remaining))))
        if remaining > 0:
            time.sleep(engine.watchdog_s)
        else:
            break

    def before():
        hold_gpus(node)
        if group is not None:
            group.send_shutdown()
    node.shutdown(code=0, before=before)


def dist_timeout(args):
    return args.dist_timeout if args.dist_timeout is not None else DEFAULT_DIST_TIMEOUT_S


def run_other_node(args, dev_dir):
    """Node rank >= 1: the dummy health server, this node's schedulers, the rendezvous, then wait for rank 0."""
    node = Node()
    if bind_http(args, make_dummy_handler()) is None:
        sys.exit(1)
    log("Dummy health check server started in background thread at %s:%d (node rank %d: no API here, rank 0 "
        "serves it)" % (args.host, args.port, args.node_rank))

    def on_signal(signum, _frame):
        log("%s on node rank %d: waiting for rank 0's shutdown (only rank 0 stops a multi-node server)"
            % (signal.Signals(signum).name, args.node_rank))

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    ctx = multiprocessing.get_context("spawn")
    readies = start_schedulers(args, node, ctx, dev_dir)
    wait_schedulers(node, readies)
    timeout = dist_timeout(args)
    log("rendezvous (SIMULATED torch.distributed/NCCL): node rank %d of %d joining rank 0 at %s, dist-timeout %d s"
        % (args.node_rank, args.nnodes, args.dist_init_addr, timeout))
    _sock, reader, where = join_rank0(args, node, timeout)
    threading.Thread(target=follow_rank0, args=(node, reader, where), daemon=True).start()
    log("node rank %d of %d is up (SIMULATED): its schedulers run until rank 0's shutdown"
        % (args.node_rank, args.nnodes))
    node.watch_schedulers()


FAULT_FILE = "/etc/gpuserve-lab/standin-fault"


def startup_fault():
    """The lab's SIMULATED startup fault: the message of a start that must fail, or None. The file is removed, so it
    fails one start only."""
    path = os.environ.get("GPUSIM_STANDIN_FAULT", FAULT_FILE)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        text = "(unreadable: %s)" % exc
    try:
        os.unlink(path)
        gone = "removed: this start only"
    except OSError as exc:
        gone = "NOT removed (%s): the next start fails too" % exc
    return "SIMULATED startup failure (the lab's fault switch %s, %s)%s" % (path, gone, ": " + text if text else "")


def main(argv=None):
    args, unknown = parse_args(sys.argv[1:] if argv is None else argv)
    log("SIMULATED SGLang %s server (gpuserve lab): model %s, tp %d, speculative %s, ignored args %s"
        % (VERSION, args.model_path, args.tp_size, args.speculative_algorithm, unknown))
    fault = startup_fault()
    if fault:
        log("ERROR: %s; exiting" % fault)
        sys.exit(1)
    problem = check_parallel(args)
    if problem:
        log("ERROR: %s; exiting" % problem)
        sys.exit(1)
    if args.nnodes > 1:
        k = args.tp_size // args.nnodes
        log("SIMULATED multi-node: node rank %d of %d, tp ranks %d..%d of %d on this node, dist-init-addr %s, "
            "dist-timeout %d s%s" % (args.node_rank, args.nnodes, args.node_rank * k, args.node_rank * k + k - 1,
                                     args.tp_size, args.dist_init_addr, dist_timeout(args),
                                     "" if args.dist_timeout is not None else " (the stand-in's default)"))
    set_sglang_env(args)
    dev_dir = os.environ.get("GPUSIM_DEV_DIR", "/dev")
    if args.node_rank >= 1:
        return run_other_node(args, dev_dir)
    node = Node()
    ctx = multiprocessing.get_context("spawn")
    readies = start_schedulers(args, node, ctx, dev_dir)
    detok = ctx.Process(target=detokenizer_main, name="sglang::detokenizer", daemon=False)
    detok.start()
    node.procs.append(detok)
    group = Rank0Group(args, node) if args.nnodes > 1 else None
    serving = []  # the engine, once its API is up

    def on_signal(signum, _frame):
        if signum == signal.SIGTERM and serving:
            log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
            serving[0].gracefully_exit = True
            return
        node.shutdown(code=0, before=group.send_shutdown if group is not None else None)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    wait_schedulers(node, readies)
    if group is not None:
        timeout = dist_timeout(args)
        try:
            where = group.listen()
        except OSError as exc:
            log("rendezvous (SIMULATED torch.distributed TCPStore): cannot listen on %s: [Errno %s] %s; exiting"
                % (args.dist_init_addr, exc.errno, exc.strerror or exc))
            node.shutdown(code=1)
        log("rendezvous (SIMULATED torch.distributed TCPStore): listening on %s, waiting up to %d s for %d "
            "node(s)" % (where, timeout, args.nnodes - 1))
        if not group.wait_all(timeout):
            node.shutdown(code=1)
    engine = Engine(args)
    if bind_http(args, make_handler(engine, args)) is None:
        node.shutdown(code=1)
    serving.append(engine)
    threading.Thread(target=sigterm_watchdog, args=(engine, node, group), daemon=True).start()
    log("Uvicorn running on http://%s:%d (warming up %.1f s)"
        % (args.host, args.port, env_float("GPUSIM_WARMUP_S", 2)))
    time.sleep(env_float("GPUSIM_WARMUP_S", 2))
    engine.ready = True
    engine.reset_stats()
    log("The server is fired up and ready to roll!")
    node.watch_schedulers()


if __name__ == "__main__":
    main()
