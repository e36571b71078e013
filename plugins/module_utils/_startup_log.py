# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where an SGLang 0.5.23 start went: its log lines, read into phases (imports, scheduler start, init, weight load,
KV cache, CUDA graph capture, server start, warm-up) and SGLang's own "Engine startup timings" line.

The collection's one reader of SGLang's startup log: `gpuserve-sglang state --startup` reads the unit's journal with
it for the manifest (`startup`), realgpu/startup_phases.py reads saved logs with it. Stdlib only, runs nothing.

Lines come as journalctl prints them (`--output short-iso` or `short-iso-precise`: `2026-12-03T10:31:28.178844+0000
host sglang[2252]: MESSAGE`) or as SGLang writes them (`[2026-12-03 10:31:42] MESSAGE`, `[... TP0]` with tp > 1,
milliseconds with SGLANG_LOG_MS=1); the journal's timestamps are microseconds, SGLang's own whole seconds. Only the
last start in the lines counts: the last line of the container helper's exec (`gpuserve-sglang exec:`), else all.
The milestones (srt/model_executor/model_runner.py, cuda_graph_setup.py, speculative/*_worker*.py, engine.py,
entrypoints/http_server.py); a missing one (no CUDA graphs with --disable-cuda-graph) folds its phase into the next:
"""
import datetime
import re

# (milestone, the log text that marks it, first or last occurrence); the phase that ends at each is named after it
MILESTONES = (
    ("exec", re.compile(r"gpuserve-sglang exec: exec"), "last"),
    ("imports", re.compile(r"server_args="), "first"),                       # the main process imported SGLang
    ("scheduler_start", re.compile(r"Init parallel begin"), "first"),       # its schedulers spawned and imported
    ("init", re.compile(r"Load weight begin"), "first"),                    # distributed init, model config
    ("weight_load", re.compile(r"Load weight end"), "last"),                # target and draft weights
    ("kv_cache", re.compile(r"Capture .*CUDA graph begin"), "first"),       # memory pools
    ("cuda_graph", re.compile(r"Capture .*CUDA graph end"), "last"),        # every graph (JIT builds included)
    ("server_start", re.compile(r"Uvicorn running on"), "first"),           # tokenizer manager, HTTP server
    ("warm_up", re.compile(r"The server is fired up and ready to roll"), "first"),
)
JOURNAL = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d:?\d\d|Z)? \S+ [^:]*?: (.*)$")
SGLANG = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)(?: [^\]]*)?\] (.*)$")
ENGINE = re.compile(r"Engine startup timings \(s\): (.*)$")
GRAPH_END = re.compile(r"Capture (.+?) CUDA graph end\..*?elapsed=([0-9.]+) s")


def _epoch(stamp, offset=None):
    when = datetime.datetime.fromisoformat(stamp.replace(" ", "T"))
    if offset and offset != "Z":
        sign = 1 if offset[0] == "+" else -1
        digits = offset[1:].replace(":", "")
        when -= sign * datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def parse_line(line):
    """(epoch, message) of one log line; (None, line) when it has no timestamp (a traceback's continuation)."""
    line = line.rstrip("\n").split("\r")[-1]  # tqdm's progress redraws: the last one
    match = JOURNAL.match(line)
    if match:
        stamp, offset, message = match.groups()
        inner = SGLANG.match(message)
        return _epoch(stamp, offset), inner.group(2) if inner else message
    match = SGLANG.match(line)
    if match:
        return _epoch(match.group(1)), match.group(2)
    return None, line


def engine_timings(text):
    """SGLang's own "Engine startup timings (s): load_weight=0.12, ..., cuda_graph={prefill=2.82, ...}, ..." as a
    dict of floats ({} for an unreadable line)."""
    out = {}
    graphs = re.search(r"cuda_graph=\{([^}]*)\}", text)
    if graphs:
        out["cuda_graph"] = {k.strip(): float(v) for k, v in
                             (pair.split("=", 1) for pair in graphs.group(1).split(",") if "=" in pair)}
        text = text.replace(graphs.group(0), "")
    for pair in text.split(","):
        key, value = pair.strip().partition("=")[::2]
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def phases(lines, ready=None):
    """The last start in lines: {milestones: {name: s since the start}, phases: [{phase, s}], total_s, sglang:
    the Engine startup timings line, cuda_graphs: {capture: elapsed s}, resolution_s}. ready (epoch, optional): when
    the lifecycle saw /health_generate 200, the end of a last phase `ready_probe`."""
    parsed = [parse_line(line) for line in lines]
    execs = [i for i, (_t, msg) in enumerate(parsed) if MILESTONES[0][1].search(msg)]
    parsed = parsed[execs[-1]:] if execs else parsed
    stamped = [(t, msg) for t, msg in parsed if t is not None]
    if not stamped:
        return {"error": "no timestamped line"}
    found = {}
    for name, pattern, which in MILESTONES:
        hits = [t for t, msg in stamped if pattern.search(msg)]
        if hits:
            found[name] = hits[0] if which == "first" else hits[-1]
    start = found.get("exec", stamped[0][0])
    out = {"milestones": {}, "phases": [], "sglang": {}, "cuda_graphs": {},
           "resolution_s": 1e-6 if any(JOURNAL.match(line) for line in lines[:50]) else 1.0}
    last, last_name = start, "exec" if "exec" in found else "first line"
    for name, _pattern, _which in MILESTONES[1:]:
        if name in found and found[name] >= last:
            out["milestones"][name] = round(found[name] - start, 3)
            out["phases"].append({"phase": name, "s": round(found[name] - last, 3), "from": last_name})
            last, last_name = found[name], name
    if ready is not None and float(ready) >= last:
        out["phases"].append({"phase": "ready_probe", "s": round(float(ready) - last, 3), "from": last_name})
        last = float(ready)
    out["total_s"] = round(last - start, 3)
    for _t, msg in stamped:
        engine = ENGINE.search(msg)
        if engine:
            out["sglang"] = engine_timings(engine.group(1))
        graph = GRAPH_END.search(msg)
        if graph:
            out["cuda_graphs"][graph.group(1)] = float(graph.group(2))
    return out
