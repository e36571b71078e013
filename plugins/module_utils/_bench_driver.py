# -*- coding: utf-8 -*-
# Copyright: contributors to gpuserve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's client driver: one process per visit runs every run of the visit with SGLang's own client.

Private to this collection. sglang_bench_run carries this file in its payload and hands its source to the SGLang
venv's python on stdin (`python - COMMAND ...`), so the program that runs in the container is this file. Standard
library only at load: prometheus_client (a dependency of SGLang) is imported where /metrics is parsed.

  pick [--import] MODULE...
      Prints the first MODULE the venv's sglang has, found without importing sglang (its __init__ pulls in torch).
      With --import it also imports that module once (the only complete test of the client's dependency set:
      0.5.23 imports transformers, datasets, torchvision, ... on every path) and prometheus_client's parser. The
      imports' own output goes to stderr, so stdout stays the module name; on failure the last stderr line is the
      message.
  run PLAN_JSON
      Runs PLAN's runs in order in this one process: each run is the client's module executed again as __main__
      with the run's argv (runpy), so the client's imports (sglang, torch, transformers: about 15 s on a real host)
      are paid once per visit instead of once per run. run_benchmark sets every global it reads (its `args`, the
      random and numpy seeds) from the run's argv, and the module body runs in a fresh namespace each time, so no
      state of one run reaches the next. A measured run reads the GPU state before and after it (PLAN's nvidia-smi
      argv lists, built and parsed by the module: one reader) and SGLang's /metrics counters right before and right
      after it. With PLAN's `template`, it first writes the ShareGPT dataset again with each first user turn in the
      tokenizer's chat template (chat_prompt). Prints one JSON object: {"runs": [...], "error": null or what stopped
      the visit}.
"""
import contextlib
import datetime
import importlib
import importlib.util
import io
import json
import os
import runpy
import subprocess
import sys
import traceback
import urllib.parse
from http.client import HTTPConnection, HTTPException, HTTPSConnection

# A program run by the SGLang venv's python in the container, not an Ansible module: it prints its JSON and runs its
# commands itself.
# pylint: disable=ansible-bad-function

TAIL = 3000


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pick(args):
    do_import = args[:1] == ["--import"]
    modules = args[1:] if do_import else args
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("sglang is not installed in " + sys.prefix)
    root = list(spec.submodule_search_locations)[0]
    found = [m for m in modules if os.path.isfile(os.path.join(root, *m.split(".")[1:]) + ".py")]
    if not found:
        sys.exit("no benchmark client (%s) in %s" % (" or ".join(modules), root))
    if do_import:
        for name, hint in ((found[0], "install what it needs into that venv"),
                           ("prometheus_client.parser", "SGLang depends on it; the benchmark parses /metrics with it")):
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    importlib.import_module(name)
            except Exception as exc:
                sys.exit("%s does not import in %s: %s: %s (%s)" % (name, sys.prefix, type(exc).__name__, exc, hint))
    print(found[0])
    return 0


def http(method, url, timeout):
    """(status, body text) of one request to the local server; an HTTP error is a status, a failed connection or
    reply raises OSError. http.client, not Ansible's open_url: this runs in the SGLang venv, without ansible-core."""
    parts = urllib.parse.urlsplit(url)
    conn = (HTTPSConnection if parts.scheme == "https" else HTTPConnection)(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, (parts.path or "/") + ("?" + parts.query if parts.query else ""),
                     body=b"" if method == "POST" else None)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    except HTTPException as exc:  # a reply that is not HTTP
        raise OSError("%s: %s" % (type(exc).__name__, exc))
    finally:
        conn.close()


def counter_totals(text, names):
    """{sample name: sum over its label sets} of the counters `names` in a /metrics text, parsed by
    prometheus_client's own parser. A name that is there but not a counter raises ValueError; one that is absent is
    left out (SGLang exports a counter's samples only once a request incremented it)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                if family.type != "counter":
                    raise ValueError("%s is a %s, not a counter" % (sample.name, family.type))
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def read_metrics(base_url, names, timeout=30):
    """One /metrics reading: {status, counters} or {status, error}; the module decides what it means."""
    try:
        status, body = http("GET", base_url + "/metrics", timeout)
    except OSError as exc:
        return {"status": None, "error": "GET /metrics failed: %s" % exc}
    if status != 200:
        return {"status": status}
    try:
        return {"status": status, "counters": counter_totals(body, names)}
    except Exception as exc:  # the parser's ValueError, or prometheus_client missing from the venv
        return {"status": status, "error": "/metrics could not be parsed: %s: %s" % (type(exc).__name__, exc)}


def read_gpus(argvs):
    """Each argv run once (the module built them, coreutils timeout included): [{rc, out, err, time}]."""
    out = []
    for argv in argvs:
        when = _now()
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, errors="surrogateescape",
                                  env=dict(os.environ, LC_ALL="C"), check=False)
            out.append({"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr, "time": when})
        except OSError as exc:
            out.append({"rc": 127, "out": "", "err": str(exc), "time": when})
    return out


def run_client(client, argv):
    """The client's module run as __main__ with argv, its output captured: (None or why it failed, output tail)."""
    sys.argv = [client] + list(argv)
    buf = io.StringIO()
    error = None
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            runpy.run_module(client, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = "%s exited %s" % (client, exc.code)
        except Exception:
            error = "%s raised %s" % (client, traceback.format_exc().strip().splitlines()[-1])
            buf.write(traceback.format_exc())
    return error, buf.getvalue()[-TAIL:]


def chat_prompt(tokenizer, text):
    """One user turn in the tokenizer's chat template, as text the server will encode with its special tokens.

    Where that encoding adds the BOS, a BOS the template wrote would be doubled, so a leading one goes. SGLang's
    client (--apply-chat-template) deletes every copy of the BOS string instead: for a ChatML model whose BOS is
    <|im_start|> (SmolLM2's), that deletes every turn marker and the model answers a prompt it never saw in
    training. So the client gets the prompts templated here and sends them as they are."""
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                           tokenize=False)
    bos = tokenizer.bos_token
    if bos and prompt.startswith(bos) and tokenizer.encode("a")[:1] == [tokenizer.bos_token_id]:
        prompt = prompt[len(bos):]
    return prompt


def templated(conversations, tokenizer):
    """The ShareGPT conversations the client would sample (two turns or more), their first turn templated."""
    out = []
    for conv in conversations:
        turns = conv.get("conversations", conv.get("conversation", []))
        if len(turns) >= 2:
            first = dict(turns[0], value=chat_prompt(tokenizer, turns[0]["value"]))
            out.append(dict(conv, conversations=[first] + list(turns[1:2])))
    return out


def template_dataset(spec):
    """PLAN's template: {source, output, tokenizer}: the dataset written again, templated. transformers is the
    client's own dependency."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec["tokenizer"])
    with open(spec["source"]) as f:
        conversations = json.load(f)
    with open(spec["output"], "w") as f:
        json.dump(templated(conversations, tokenizer), f)


def run_plan(plan):
    """PLAN: {client, base_url, flush_timeout (null: no flush), gpu_argvs, counters, template (null or
    template_dataset's spec), runs: [{label, argv, output_file, measured}]}. Stops at the first run that fails."""
    base = plan["base_url"]
    done = []
    if plan.get("template"):
        try:
            with contextlib.redirect_stdout(sys.stderr):
                template_dataset(plan["template"])
        except Exception as exc:
            return {"runs": done, "error": "the chat template could not be applied to %s: %s: %s"
                    % (plan["template"]["source"], type(exc).__name__, exc)}
    for run in plan["runs"]:
        rec = {"label": run["label"]}
        done.append(rec)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(run["output_file"])  # the client appends; a stale line must never be read as this run's
        if run["measured"]:
            rec["gpu_before"] = read_gpus(plan["gpu_argvs"])
        if plan["flush_timeout"] is not None:
            try:
                status, body = http("POST", "%s/flush_cache?timeout=%s" % (base, plan["flush_timeout"]),
                                    plan["flush_timeout"] + 30)
            except OSError as exc:
                status, body = None, str(exc)
            if status != 200:
                return {"runs": done, "error": "%s: POST /flush_cache returned %s: %s"
                        % (run["label"], status, body.strip()[:500])}
        if run["measured"]:
            rec["metrics_before"] = read_metrics(base, plan["counters"])
        rec["started"] = _now()
        error, rec["output_tail"] = run_client(plan["client"], run["argv"])
        rec["ended"] = _now()
        if error:
            return {"runs": done, "error": "%s: %s" % (run["label"], error)}
        if run["measured"]:
            rec["metrics_after"] = read_metrics(base, plan["counters"])
            rec["gpu_after"] = read_gpus(plan["gpu_argvs"])
    return {"runs": done, "error": None}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pick"]:
        return pick(argv[1:])
    if argv[:1] == ["run"] and len(argv) == 2:
        result = run_plan(json.loads(argv[1]))
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    sys.stderr.write("usage: python - pick [--import] MODULE... | python - run PLAN_JSON\n")
    return 64


if __name__ == "__main__":
    sys.exit(main())
