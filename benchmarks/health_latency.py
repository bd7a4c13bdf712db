"""How long `clustertune serve` takes to answer /health while one large request is being handled.

    .venv/bin/python benchmarks/health_latency.py            # 4-layer GPT-2 (width 256)
    .venv/bin/python benchmarks/health_latency.py --smoke    # the 2-layer test size

The server's promise: /health answers within 100 ms under any single request (tokenizing and
templating run off the event loop, bodies over --max-body are refused before they are read
whole). One server on a model built on the spot (benchmarks/serve.py's), and for each case one
request in a thread while this process asks /health every 20 ms on its own connection:

- idle: no request (the floor of this machine);

Each case sends its request again and again, one at a time, for at least 3 s (``--seconds``).
- max-body chat: a user message just under the default --max-body (4 MB of text), tokenized
  and templated, then refused as longer than the model's context (400);
- over-limit body: 16 MB to /v1/completions, refused with 413: back to back (a flood of some
  hundred bodies a second), then with 0.2 s between them;
- long generation: a streamed completion that fills the model's context.

Printed per case: the request's status and time, and /health's median, 99th percentile and
worst latency in ms, each against the 100 ms promise.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve import build_model, free_port, wait_ready  # noqa: E402  (benchmarks/serve.py)

LIMIT_MS = 100.0


def post(port: int, path: str, body: bytes) -> tuple[int, float]:
    """(status, seconds) of one POST with its own connection."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        return r.status, time.perf_counter() - t0
    except (ConnectionError, OSError):  # a server may close a connection whose body it refused
        return -1, time.perf_counter() - t0
    finally:
        conn.close()


def health_while(port: int, request: tuple[str, bytes] | None, for_s: float = 3.0,
                 pause: float = 0.0) -> tuple[list[float], str]:
    """/health latencies (ms), polled every 20 ms while ``request`` is sent again and again (one
    at a time) for at least ``for_s`` seconds; with no request, for ``for_s``."""
    done = threading.Event()
    result: list[str] = []

    def send() -> None:
        try:
            if request is None:
                time.sleep(for_s)
                result.append("none")
                return
            t0, outcomes = time.perf_counter(), []
            while not outcomes or time.perf_counter() - t0 < for_s:
                outcomes.append(post(port, *request))
                time.sleep(pause)
            statuses = sorted({str(s) for s, _ in outcomes})
            result.append(f"{'/'.join(statuses)} x{len(outcomes)}, {statistics.median(t for _, t in outcomes):.2f} s")
        finally:
            done.set()

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    lat = []
    while not done.is_set():
        t0 = time.perf_counter()
        conn.request("GET", "/health")
        r = conn.getresponse()
        r.read()
        lat.append((time.perf_counter() - t0) * 1000)
        if r.status != 200:
            raise SystemExit(f"/health answered {r.status} during the case")
        time.sleep(0.02)
    sender.join()
    conn.close()
    return lat, result[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the 2-layer test size, each case for 1 s")
    ap.add_argument("--seconds", type=float, default=3.0, help="how long each case sends its request")
    args = ap.parse_args()
    layers, width = (2, 128) if args.smoke else (4, 256)
    seconds = 1.0 if args.smoke else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model", layers, width)
        port = free_port()
        exe = Path(sys.executable).with_name("clustertune")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        proc = subprocess.Popen([str(exe), "serve", str(model), "--port", str(port), "--device", "cpu"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        try:
            wait_ready(f"http://127.0.0.1:{port}", proc)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as r:
                served = json.load(r)["data"][0]["id"]
            words = "the class of a tuple and a list "
            big = words * ((4_000_000 - 200) // len(words))
            cases = [
                ("idle", None),
                ("max-body chat", ("/v1/chat/completions", json.dumps(
                    {"model": served, "max_tokens": 8, "messages": [{"role": "user", "content": big}]}).encode())),
                ("over-limit body", ("/v1/completions", json.dumps(
                    {"model": served, "max_tokens": 8, "prompt": big * 4}).encode())),
                ("  0.2 s apart", ("/v1/completions", json.dumps(
                    {"model": served, "max_tokens": 8, "prompt": big * 4}).encode())),
                ("long generation", ("/v1/completions", json.dumps(
                    {"model": served, "max_tokens": 480, "prompt": "The", "stream": True, "temperature": 1.0}).encode())),
            ]
            print(f"/health every 20 ms during one request ({layers}-layer GPT-2, width {width}, CPU, "
                  f"{os.cpu_count()} cores); promise: {LIMIT_MS:.0f} ms")
            worst_all = 0.0
            for name, request in cases:
                pause = 0.0
                if name.endswith("apart"):
                    pause = 0.2
                lat, outcome = health_while(port, request, for_s=seconds, pause=pause)
                q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) >= 2 else lat * 99
                worst = max(lat)
                if name != "idle":
                    worst_all = max(worst_all, worst)
                print(f"  {name:<17} request {outcome:<20} /health n={len(lat):<4} median {statistics.median(lat):6.1f} ms  "
                      f"p99 {q[98]:6.1f} ms  worst {worst:6.1f} ms  ({worst / LIMIT_MS:.2f}x the promise)", flush=True)
            print(f"worst /health under a request: {worst_all:.1f} ms -> {'within' if worst_all <= LIMIT_MS else 'OVER'} "
                  f"{LIMIT_MS:.0f} ms")
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
