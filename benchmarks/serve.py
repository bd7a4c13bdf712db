"""clustertune serve vs transformers serve: requests/s and tokens/s at 1, 4 and 16 concurrent clients.

    .venv/bin/python benchmarks/serve.py            # 4-layer GPT-2 (width 256), 48 requests per level
    .venv/bin/python benchmarks/serve.py --smoke    # the 2-layer test size, 8 requests per level
    python3 benchmarks/serve.py --device cuda --size gpt2 --rounds 1   # on a GPU (gpu_hour.py's serving part)

One model directory (a GPT-2 built from its config, seeded, with a byte-level BPE trained on the
builtin corpus and ChatML as its chat template), served by each server in turn on this machine:

- ``clustertune serve DIR`` (transformers' continuous batching underneath);
- ``transformers serve DIR --continuous-batching`` with the same cache size, the peer's own
  OpenAI-compatible server.

Each level sends the same chat requests (greedy, ``max_tokens`` fixed, the answer not allowed
to end early: ``ignore_eos`` is not in OpenAI's protocol, so prompts are varied and the count of
completion tokens each server reports is what tokens/s divides) from N client threads with
OpenAI's own client, after one warm-up request. Servers run one at a time, so they do not share
the two cores, in ``--rounds`` rounds (default 3) in which they take turns, the first one changing
each round. Printed per round and level: requests/s, completion tokens/s and the median and 95th
percentile of a request's time for both; then per level ``ratio=``, the median over the rounds of
clustertune over the peer (tokens/s), with the medians of p50 and p95.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

QUESTIONS = ["Which keyword starts a loop?", "What does def define?", "What is a tuple?", "How do I open a file?",
             "What does yield do?", "Explain a dictionary.", "What is a class?", "What is None?"]


def build_model(root: Path, layers: int, width: int) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.data.templates import CHATML
    from clustertune.models.tokenizer import train_bpe

    torch.manual_seed(0)
    tok = train_bpe(pydoc_paragraphs(), 2048, classification=False, model_max_length=512)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    cfg = GPT2Config(vocab_size=len(tok), n_layer=layers, n_embd=width, n_head=4, n_positions=512,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.3)
    raise SystemExit(f"{base} not ready after {timeout:.0f} s")


def load(base_url: str, model: str, clients: int, requests: int, max_tokens: int) -> dict[str, Any]:
    """Requests/s, completion tokens/s and each request's seconds for ``requests`` chat requests
    from ``clients`` threads."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=600)

    def one(i: int) -> tuple[int, float]:
        t = time.perf_counter()
        r = client.chat.completions.create(model=model, temperature=0, max_tokens=max_tokens,
                                           messages=[{"role": "user", "content": f"{QUESTIONS[i % len(QUESTIONS)]} ({i})"}])
        return r.usage.completion_tokens, time.perf_counter() - t

    one(0)  # warm-up: first-call costs are not the server's speed
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = list(pool.map(one, range(requests)))
    dt = time.perf_counter() - t0
    return {"req_s": requests / dt, "tok_s": sum(n for n, _ in done) / dt, "latency": [s for _, s in done]}


def serve_and_measure(name: str, argv: list[str], base: str, model: str, levels: list[int], requests: int,
                      max_tokens: int) -> dict[int, dict[str, Any]]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        wait_ready(base, proc)
        out = {}
        for c in levels:
            out[c] = load(base + "/v1", model, c, requests, max_tokens)
            p50, p95 = percentiles(out[c]["latency"])
            print(f"  {name:<22} clients={c:<3} {out[c]['req_s']:7.2f} req/s {out[c]['tok_s']:9.1f} tokens/s "
                  f"p50 {p50 * 1000:6.1f} ms p95 {p95 * 1000:6.1f} ms", flush=True)
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def percentiles(seconds: list[float]) -> tuple[float, float]:
    """The median and the 95th percentile (nearest rank) of request times."""
    ordered = sorted(seconds)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the 2-layer test size and 8 requests per level")
    ap.add_argument("--levels", default="1,4,16")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the servers taking turns (the first one changing "
                    "each round); medians are reported")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cpu: fp32, both caches 512 blocks of 32; cuda: bf16, each server sizes its cache itself")
    ap.add_argument("--size", default="bench", choices=("bench", "gpt2"),
                    help="bench: 4 layers x 256 (default); gpt2: GPT-2 small's shape, 12 x 768 (for a GPU)")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    layers, width, requests = (2, 64, 8) if args.smoke else (12, 768, 48) if args.size == "gpt2" else (4, 256, 48)
    if args.smoke:
        args.rounds = 1
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp) / "bench-model", layers, width)
        gpu = args.device == "cuda"
        # On the CPU the peer is given clustertune's cache size (it would otherwise take most of the
        # machine's memory); on a GPU both size theirs from free memory.
        blocks = [] if gpu else ["--cb-num-blocks", "512", "--cb-max-batch-tokens", "512"]
        ours_dtype, peer_dtype = ("bf16", "bfloat16") if gpu else ("fp32", "float32")

        def ours() -> dict[int, dict[str, Any]]:
            port = free_port()
            return serve_and_measure("clustertune serve", [str(bindir / "clustertune"), "serve", str(model_dir), "--port",
                                                           str(port), "--device", args.device, "--dtype", ours_dtype,
                                                           "--no-check",  # served as the peer is: no fidelity check
                                                           "--max-running", "16"],
                                     f"http://127.0.0.1:{port}", model_dir.name, levels, requests, args.max_tokens)

        def peer() -> dict[int, dict[str, Any]]:
            port = free_port()
            return serve_and_measure("transformers serve", [str(bindir / "transformers"), "serve", str(model_dir),
                                                            "--port", str(port), "--host", "127.0.0.1", "--device",
                                                            args.device, "--dtype", peer_dtype, "--continuous-batching",
                                                            *blocks],
                                     f"http://127.0.0.1:{port}", str(model_dir), levels, requests, args.max_tokens)

        rounds = []
        for r in range(args.rounds):
            print(f"round {r + 1}", flush=True)
            # The sides take turns, the first one changing each round.
            first, second = (ours, peer) if r % 2 == 0 else (peer, ours)
            a, b = first(), second()
            rounds.append((a, b) if r % 2 == 0 else (b, a))
    rows = {}
    for c in levels:
        ratios = [o[c]["tok_s"] / p[c]["tok_s"] for o, p in rounds]
        ours_p50 = statistics.median(percentiles(o[c]["latency"])[0] for o, _ in rounds)
        peer_p50 = statistics.median(percentiles(p[c]["latency"])[0] for _, p in rounds)
        ours_p95 = statistics.median(percentiles(o[c]["latency"])[1] for o, _ in rounds)
        peer_p95 = statistics.median(percentiles(p[c]["latency"])[1] for _, p in rounds)
        rows[c] = {"ratios": ratios, "ratio": statistics.median(ratios), "clustertune_p50_s": ours_p50,
                   "peer_p50_s": peer_p50, "clustertune_p95_s": ours_p95, "peer_p95_s": peer_p95,
                   "clustertune_tok_s": [o[c]["tok_s"] for o, _ in rounds], "peer_tok_s": [p[c]["tok_s"] for _, p in rounds]}
        print(f"clients={c} ratio={rows[c]['ratio']:.2f}x (tokens/s, clustertune over transformers serve, median of "
              f"{len(ratios)} rounds: {', '.join(f'{x:.2f}' for x in ratios)}); p50 {ours_p50 * 1000:.1f} vs "
              f"{peer_p50 * 1000:.1f} ms, p95 {ours_p95 * 1000:.1f} vs {peer_p95 * 1000:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
