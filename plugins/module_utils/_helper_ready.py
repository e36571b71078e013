# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuserve-sglang wait-ready: /health_generate 200 within a budget, then one real generation, or why not (the unit
stopped, nothing listens, the generation failed).

Private to this collection. Part of the container helper's package (_helper_cli.PACKAGE), which the module
gpuserve.sglang.sglang_helper installs: stdlib only at load, and it imports only files of that package.
"""
import argparse
import json
import socket
import sys
import time
import urllib.error
import urllib.request

from ansible_collections.gpuserve.sglang.plugins.module_utils._helper_run import systemctl

# A program run without Ansible (systemd, the role's command tasks, an operator): it prints its JSON, with no
# AnsibleModule to log through; its commands go through _helper_run.
# pylint: disable=ansible-bad-function


def _unit_state(unit):
    return systemctl("is-active", unit).out.strip() or "unknown"


def _main_started(unit):
    """When the unit's main process (the server, after ExecStartPre's gate) started, on CLOCK_MONOTONIC, which the
    container shares with systemd: seconds, or None when systemd has no such time (not started yet)."""
    value = systemctl("show", unit, "--property=ExecMainStartTimestampMonotonic", "--value").out.strip()
    return int(value) / 1e6 if value.isdigit() and int(value) > 0 else None


def _probe(host, port, path, timeout):
    try:
        with socket.create_connection((host, port), timeout=2):
            pass
    except OSError:
        return "port closed", None
    try:
        with urllib.request.build_opener().open(f"http://{host}:{port}{path}", timeout=timeout) as resp:
            return f"HTTP {resp.status}", resp.status
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}", exc.code
    except (OSError, urllib.error.URLError) as exc:
        return f"port open, {path} failed: {exc}", None


def _generate(host, port, prompt, tokens, timeout):
    """One real generation: (SGLang's answer, None), or (None, why). Sampled at SGLang's default temperature, as
    clients ask unless they want greedy: a real EAGLE-3 server without flashinfer answered greedy requests and crashed
    on its first sampled one. ignore_eos: every token asked for is generated."""
    params = {"max_new_tokens": tokens, "temperature": 1.0, "ignore_eos": True}
    body = json.dumps({"text": prompt, "sampling_params": params}).encode()
    request = urllib.request.Request(f"http://{host}:{port}/generate", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.build_opener().open(request, timeout=timeout) as resp:
            answer = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return None, f"/generate answered HTTP {exc.code}: {exc.read()[:300].decode('utf-8', 'replace')}"
    except (OSError, ValueError) as exc:
        return None, f"/generate failed: {exc}"
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) or not answer["text"]:
        return None, f"/generate answered without text: {json.dumps(answer)[:500]}"
    return answer, None


def cmd_wait_ready():
    parser = argparse.ArgumentParser(prog="gpuserve-sglang wait-ready")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/health_generate")
    parser.add_argument("--budget", type=float, default=60)
    parser.add_argument("--interval", type=float, default=2)
    parser.add_argument("--request-timeout", type=float, default=30)
    parser.add_argument("--unit", default="sglang.service")
    parser.add_argument("--listen-timeout", type=float, default=0)
    parser.add_argument("--generate-prompt", help="once ready, generate from this prompt (no generation without it)")
    parser.add_argument("--generate-tokens", type=int, default=8)
    parser.add_argument("--generate-timeout", type=float, default=300)
    opts = parser.parse_args(sys.argv[2:])

    start = time.monotonic()
    state, phase, status = "unknown", "not probed", None
    main_started = None
    while True:
        state = _unit_state(opts.unit)
        if state not in ("active", "activating", "reloading"):
            print(json.dumps({"ready": False, "unit": state, "phase": f"{opts.unit} is {state}",
                              "status": status, "waited_s": round(time.monotonic() - start, 1)}))
            return 4
        phase, status = _probe(opts.host, opts.port, opts.path, opts.request_timeout)
        if status == 200:
            said = {"ready": True, "unit": state, "phase": phase, "status": status}
            if opts.generate_prompt:
                said["generation"], why = _generate(opts.host, opts.port, opts.generate_prompt, opts.generate_tokens,
                                                    opts.generate_timeout)
                if why:
                    said.update(ready=False, phase=why)
            print(json.dumps(dict(said, waited_s=round(time.monotonic() - start, 1))))
            return 0 if said["ready"] else 6
        # Nothing listens on the port: past --listen-timeout seconds from the server's own start (not from this
        # call: the lifecycle calls once a minute), the server is not coming up (SGLang binds once its model loaded).
        if opts.listen_timeout > 0 and phase == "port closed" and state == "active":
            main_started = main_started or _main_started(opts.unit)
            up = time.monotonic() - main_started if main_started is not None else 0
            if up >= opts.listen_timeout:
                print(json.dumps({"ready": False, "unit": state, "status": status,
                                  "phase": f"nothing listens on {opts.host}:{opts.port} {up:.0f} s after the server "
                                           f"started (listen timeout {opts.listen_timeout:g} s)",
                                  "waited_s": round(time.monotonic() - start, 1)}))
                return 5
        if time.monotonic() - start + opts.interval >= opts.budget:
            break
        time.sleep(opts.interval)
    print(json.dumps({"ready": False, "unit": state, "phase": phase, "status": status,
                      "waited_s": round(time.monotonic() - start, 1)}))
    return 3
