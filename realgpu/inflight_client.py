"""Requests in flight during a real restart (realgpu/real_sglang_h200.sh stops): W workers each send /generate
requests of N tokens back to back, as a client behind a gateway would, until /health stops answering 200 (SGLang's
answer from its SIGTERM on: a gateway routes elsewhere then) or the server is gone. One JSON line per request: when it
was sent and ended (epoch s), its status, the tokens it got, or the error (a request cut by the stop).

  python3 realgpu/inflight_client.py --port 30000 --tokens 1500 --workers 2 --out FILE [--limit-s 120]
"""
import argparse
import json
import threading
import time
import urllib.error
import urllib.request


def health(base):
    try:
        with urllib.request.urlopen(base + "/health", timeout=5) as res:
            return res.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def worker(base, tokens, out, lock, deadline, index):
    body = json.dumps({"text": "Write a long story about a lighthouse keeper and the sea.",
                       # greedy: the stop is measured here, not the sampler (a server without flashinfer crashed
                       # on the first sampled request, 2026-12-06)
                       "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True, "temperature": 0}}).encode()
    n = 0
    while time.time() < deadline and health(base) == 200:
        n += 1
        row = {"worker": index, "n": n, "sent": round(time.time(), 4)}
        req = urllib.request.Request(base + "/generate", data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as res:
                answer = json.loads(res.read())
            row.update(status=res.status, tokens=answer.get("meta_info", {}).get("completion_tokens"))
        except urllib.error.HTTPError as exc:
            row.update(status=exc.code, error=exc.read()[:200].decode("utf-8", "replace"))
        except (OSError, ValueError) as exc:
            row.update(status=None, error=str(exc) or type(exc).__name__)
        row["ended"] = round(time.time(), 4)
        with lock:
            out.write(json.dumps(row) + "\n")
            out.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--tokens", type=int, default=1500)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-s", type=float, default=300)
    opts = ap.parse_args()
    base = "http://127.0.0.1:%d" % opts.port
    deadline = time.time() + opts.limit_s
    lock = threading.Lock()
    with open(opts.out, "a") as out:
        threads = [threading.Thread(target=worker, args=(base, opts.tokens, out, lock, deadline, i))
                   for i in range(opts.workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


if __name__ == "__main__":
    main()
