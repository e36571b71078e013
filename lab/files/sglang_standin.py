#!/usr/bin/env python3
# GPUSERVE-LAB-SIMULATED: a stand-in for `python -m sglang.launch_server`, used only in the gpuserve lab.
"""SIMULATED SGLang server for the gpuserve lab (python3 stdlib only).

Started by the same systemd unit as the real server, under the deployed venv's interpreter, with the real
server's argv (the lab swaps the entrypoint, not the lifecycle). What it does like SGLang:
- sets the environment SGLang's engine sets before it spawns (engine.py `_set_envs_and_config`), then spawns
  one scheduler process per TP rank with multiprocessing 'spawn' (so the venv's .pth NCCL hook runs in each),
  plus a detokenizer; each rank renames itself `sglang::scheduler_TP<rank>` (cmdline and comm, as
  setproctitle does), opens the device node of its CUDA device (the rank's ordinal among the /dev/nvidiaN the
  container has, by minor), /dev/nvidiactl and /dev/nvidia-uvm and holds them (the lab's
  nvidia-smi stand-in counts that as GPU memory), and dies with its parent (SGLang's kill_itself_when_parent_died)
  unless GPUSIM_ORPHAN_WORKERS=1 (to exercise straggler cleanup);
- warms up, then serves /health and /health_generate (503 while warming, 200 after), /generate (SSE streaming
  and plain), /v1/completions, /v1/chat/completions, /v1/models, /model_info (+ /get_model_info),
  /server_info (+ /get_server_info; per-rank avg_spec_accept_length, cumulative until /flush_cache), /flush_cache,
  and /v1/loads (SGLang 0.5.23's load snapshot, what SMG's load monitor polls: num_running_reqs is the number of
  requests in flight, the one figure a drain waits on; the other figures are fixed or simple);
- exits 1 when it cannot bind its --host/--port, as uvicorn does under SGLang (the ranks are terminated);
What it does not do: load a model, use a GPU, or produce meaningful text.

Speed model (environment): GPUSIM_TOKENS_PER_S decode tokens/s per request (default 80), GPUSIM_WARMUP_S
(default 2; a real model loads for minutes, the lab keeps restarts short), GPUSIM_PREFILL_TOKENS_PER_S (default
20000), GPUSIM_NOISE relative jitter (default 0.02).
Speculative decoding (--speculative-algorithm set): each verify step emits on average GPUSIM_SPEC_ACCEPT_LENGTH
tokens (default: min(num_steps + 1, 2.6)) and costs GPUSIM_SPEC_STEP_COST decode steps (default 1.5);
GPUSIM_SPEC_DECODE_ATTN_FACTOR (default 1.0) multiplies the speed with --speculative-attention-mode decode.
"""
import argparse
import contextlib
import ctypes
import json
import multiprocessing
import os
import random
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.5.23"
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
    args, unknown = p.parse_known_args(argv)
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
    """setproctitle without the package: rewrite the argv area (/proc/self/cmdline) and comm."""
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(title[:15])
    except OSError:
        pass
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        arg_start, arg_end = int(fields[45]), int(fields[46])  # stat fields 48 and 49
        size = arg_end - arg_start
        if size > 1:
            data = title.encode()[: size - 1]
            ctypes.memmove(arg_start, data + b"\0" * (size - len(data)), size)
    except (OSError, ValueError, IndexError):
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


def scheduler_main(rank, tp_size, base_gpu_id, dev_dir, ready):
    if os.environ.get("GPUSIM_ORPHAN_WORKERS") != "1":
        die_with_parent()
    set_proctitle("sglang::scheduler_TP%d" % rank if tp_size > 1 else "sglang::scheduler")
    device = device_for_ordinal(gpu_for_rank(rank, base_gpu_id), dev_dir)
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
        steps = args.speculative_num_steps or 3
        self.accept = env_float("GPUSIM_SPEC_ACCEPT_LENGTH", min(steps + 1, 2.6)) if self.spec else 1.0
        self.step_cost = env_float("GPUSIM_SPEC_STEP_COST", 1.5) if self.spec else 1.0
        self.attn_factor = 1.0
        if self.spec and args.speculative_attention_mode == "decode":
            self.attn_factor = env_float("GPUSIM_SPEC_DECODE_ATTN_FACTOR", 1.0)
        # The scheduler's limit, reported as internal_states[].effective_max_running_requests_per_dp like SGLang's
        # scheduler (real SGLang derives it from the KV pool when unset; the stand-in takes 256).
        self.max_running = args.max_running_requests or 256
        self.slots = threading.BoundedSemaphore(self.max_running)
        self.running = 0  # requests in flight (holding a slot), for /v1/loads
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

    def generate(self, prompt_tokens, max_new):
        """Yields (new_token_texts, completion_tokens, verify_steps_so_far, finished)."""
        with self.slots, self.in_flight():
            time.sleep(prompt_tokens / self.prefill_tps + 0.005)
            done, steps, t0 = 0, 0, time.time()
            first = [random.choice(WORDS)]
            done, steps = 1, 1
            yield first, done, steps, done >= max_new
            while done < max_new:
                time.sleep(self.step_time())
                n = min(self.step_tokens(), max_new - done)
                done += n
                steps += 1
                yield [random.choice(WORDS) for _ in range(n)], done, steps, done >= max_new
            with self.lock:
                self.accepted_tokens += done
                self.verify_steps += steps
                dt = time.time() - t0
                if dt > 0:
                    self.last_gen_tps = done / dt

    @contextlib.contextmanager
    def in_flight(self):
        with self.lock:
            self.running += 1
        try:
            yield
        finally:
            with self.lock:
                self.running -= 1

    def loads(self):
        """GET /v1/loads as SGLang 0.5.23 answers it (srt/entrypoints/v1_loads.py, managers/load_snapshot.py),
        one entry per DP rank; SIMULATED figures except num_running_reqs."""
        with self.lock:
            running = self.running
        now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
        total = 100000
        load = {"timestamp": time.time(), "dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": 0,
                "num_waiting_uncached_tokens": 0, "num_used_tokens": 0, "num_total_tokens": total,
                "num_active_tokens": 0, "num_prealloc_ready_tokens": 0, "max_total_num_tokens": total,
                "max_running_requests": self.max_running, "token_usage": 0.0,
                "gen_throughput": round(self.last_gen_tps, 3), "cache_hit_rate": 0.0,
                "utilization": round(running / float(self.max_running), 4), "total_prefill_uncached_tokens": 0,
                "total_prefill_busy_us": 0, "decode_moments": [],
                "memory": {"weight_gb": 0.0, "kv_cache_gb": 0.0, "graph_gb": 0.0, "token_capacity": total},
                "queues": {"waiting": 0, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}}
        return {"timestamp": now, "version": VERSION, "accelerator": None, "num_accelerators": 1, "loads": [load]}

    def avg_accept(self):
        with self.lock:
            if not self.spec:
                return None
            return round(self.accepted_tokens / self.verify_steps, 4) if self.verify_steps else 0.0


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
                if not engine.ready:
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
                                "load_format": "auto", "has_image_understanding": False,
                                "has_audio_understanding": False, "model_type": None, "architectures": None,
                                "gpuserve_lab_simulated": True})
            elif r == "/v1/loads":
                self.send_json(engine.loads())
            elif r == "/v1/models":
                self.send_json({"object": "list", "data": [{
                    "id": served, "object": "model", "created": int(engine.started), "owned_by": "sglang",
                    "root": served, "parent": None, "max_model_len": args.context_length or 131072}]})
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
            info.update({"version": VERSION, "gpuserve_lab_simulated": True,
                         "launch_command": " ".join(sys.argv)})
            states = []
            for _rank in range(args.dp_size if args.dp_size > 1 else 1):
                st = {"last_gen_throughput": round(engine.last_gen_tps, 3),
                      "effective_max_running_requests_per_dp": engine.max_running,
                      "memory_usage": {"weight": 0.0, "kvcache": 0.0, "token_capacity": 0}}
                if engine.spec:
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
            for toks, done, steps, finished in engine.generate(plen, max_new):
                text += "".join(toks)
                meta = {"id": rid, "finish_reason": {"type": "length", "length": done} if finished else None,
                        "prompt_tokens": plen, "completion_tokens": done, "cached_tokens": 0,
                        "e2e_latency": time.time() - t0}
                if engine.spec:
                    meta["spec_verify_ct"] = steps
                    meta["spec_accept_length"] = done / steps
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
            for toks, done, steps, finished in engine.generate(plen, max_new):
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


def main(argv=None):
    args, unknown = parse_args(sys.argv[1:] if argv is None else argv)
    log("SIMULATED SGLang %s server (gpuserve lab): model %s, tp %d, speculative %s, ignored args %s"
        % (VERSION, args.model_path, args.tp_size, args.speculative_algorithm, unknown))
    set_sglang_env(args)
    dev_dir = os.environ.get("GPUSIM_DEV_DIR", "/dev")
    ctx = multiprocessing.get_context("spawn")
    readies, procs = [], []
    for rank in range(args.tp_size):
        ev = ctx.Event()
        pr = ctx.Process(target=scheduler_main, args=(rank, args.tp_size, args.base_gpu_id, dev_dir, ev),
                         name="sglang::scheduler_TP%d" % rank, daemon=False)
        pr.start()
        readies.append(ev)
        procs.append(pr)
    detok = ctx.Process(target=detokenizer_main, name="sglang::detokenizer", daemon=False)
    detok.start()
    procs.append(detok)

    def shutdown(*_, code=0):
        log("shutting down")
        for pr in procs:
            if pr.is_alive():
                pr.terminate()
        for pr in procs:
            pr.join(5)
        os._exit(code)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    for rank, ev in enumerate(readies):
        if not ev.wait(60) or not procs[rank].is_alive():
            log("scheduler TP%d failed to start" % rank)
            shutdown(code=1)
    engine = Engine(args)
    try:
        server = ThreadingHTTPServer((args.host, args.port), make_handler(engine, args))
    except OSError as exc:
        # as uvicorn's Server.startup under SGLang's launch_server: log, exit 1; the ranks die with their parent
        log("ERROR:    [Errno %s] error while attempting to bind on address %r: %s"
            % (exc.errno, (args.host, args.port), (exc.strerror or str(exc)).lower()))
        shutdown(code=1)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log("Uvicorn running on http://%s:%d (warming up %.1f s)" % (args.host, args.port,
                                                                env_float("GPUSIM_WARMUP_S", 2)))
    time.sleep(env_float("GPUSIM_WARMUP_S", 2))
    engine.ready = True
    engine.reset_stats()
    log("The server is fired up and ready to roll!")
    while True:
        time.sleep(1)
        for rank, pr in enumerate(procs[:-1]):
            if not pr.is_alive():
                log("scheduler TP%d exited with %s: shutting down" % (rank, pr.exitcode))
                shutdown(code=1)


if __name__ == "__main__":
    main()
