"""Peak memory of a causal-LM ``prepare`` on corpora whose vocabulary keeps growing.

    .venv/bin/python benchmarks/prepare_memory.py                       # 0.5 GB and 2 GB
    .venv/bin/python benchmarks/prepare_memory.py --sizes 0.25 --reset-off

Writes a synthetic corpus (a .txt file, one text of about 200 words per line) whose words are
drawn from a Zipf distribution (exponent 1.2) over an unbounded generated lexicon (the k-th
most frequent word is k written in a scrambled base-26), so new words keep appearing however
large it gets: the worst case for a pre-token cache. Each size runs ``prepare`` in a fresh
process (``clustertune prepare``'s code path, with a small validation file) and reads its
peak RSS from the kernel (``wait4``). ``--reset-off`` also runs the smallest size with the
encoder never rebuilt (its cache unbounded), to show what the bound costs in speed.

The peer here is the same prepare with the cache unbounded; the last line prints the ratio of
peak RSS at the largest size to the smallest (1.0: memory does not grow with the corpus).
Files go to --tmp (default /tmp) and are deleted afterwards (corpora kept with --corpus-dir).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_LETTERS = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", dtype=np.uint8)


def words_bytes(ranks: np.ndarray, per_line: int = 200) -> bytes:
    """The words of ``ranks`` (scrambled base 26, 1 to 7 letters), separated by spaces, a line
    break after every ``per_line`` words."""
    k = (ranks.astype(np.int64) * 2654435761) % (26 ** 7)  # scramble, so ranks do not share prefixes
    digits = np.empty((len(k), 8), dtype=np.uint8)
    digits[:, 7] = ord(" ")
    digits[per_line - 1:: per_line, 7] = ord("\n")
    length = np.ceil(np.log(ranks + 1.0) / np.log(26)).astype(np.int64) + 1
    for col in range(6, -1, -1):
        digits[:, col] = _LETTERS[k % 26]
        k //= 26
    digits[:, :7][np.arange(7)[None, :] < (7 - length)[:, None]] = 0  # cut each word to its length
    return digits.tobytes().replace(b"\0", b"")


def write_corpus(path: Path, size_bytes: int, seed: int = 0) -> int:
    """Zipf-distributed words until ``size_bytes``; returns how many distinct words it holds."""
    rng = np.random.default_rng(seed)
    seen = np.zeros(26 ** 6, dtype=bool)
    written = 0
    with path.open("wb") as fh:
        while written < size_bytes:
            ranks = rng.zipf(1.2, 4_000_000)
            ranks = ranks[ranks < 26 ** 6]
            seen[ranks] = True
            block = words_bytes(ranks)
            fh.write(block)
            written += len(block)
        fh.write(b"\n")
    return int(seen.sum())


CHILD = """
import json, sys, time
from clustertune.data import encode
from clustertune.data.cache import prepare
from clustertune.recipe import load_recipe
if sys.argv[2] == "off":
    encode.RESET_CHARS = 1 << 62
elif sys.argv[2]:
    encode.RESET_CHARS = int(sys.argv[2])
r = load_recipe(json.loads(sys.argv[1]))
t0 = time.perf_counter()
p = prepare(r, workers=2)
print(json.dumps({"seconds": time.perf_counter() - t0, "tokens": p.counts("train")["tokens"],
                  "split": p.manifest.record.seconds}))
"""


def run_child(recipe: dict, reset: str) -> tuple[dict, float]:
    """Run one prepare in a fresh process; its result and its peak RSS in MiB."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(recipe), reset], stdout=subprocess.PIPE,
                            text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read() if proc.stdout else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"prepare failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[0.5, 2.0], help="corpus sizes in GB")
    ap.add_argument("--reset-off", action="store_true", help="also run the smallest size with no cache bound")
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    ap.add_argument("--corpus-dir", help="keep the corpora here (reusing ones already there), not deleted")
    ap.add_argument("--reset-chars", type=int, help="the encoder's rebuild interval in characters (default: its own)")
    args = ap.parse_args()
    if args.smoke:
        args.sizes = [0.002]

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    work = Path(tempfile.mkdtemp(prefix="ct-bench-memory-", dir=args.tmp))
    try:
        tok_dir = work / "tokenizer"
        train_bpe(pydoc_paragraphs(), 4096, classification=False, model_max_length=128).save_pretrained(str(tok_dir))
        val = work / "val.jsonl"
        val.write_text("".join(json.dumps({"text": t}) + "\n" for t in pydoc_paragraphs()[:200]))
        runs = [(s, "on") for s in sorted(args.sizes)] + ([(min(args.sizes), "off")] if args.reset_off else [])
        peaks: dict[tuple[float, str], float] = {}
        for size, reset in runs:
            corpus = Path(args.corpus_dir or work) / f"zipf-{size}.txt"
            if not corpus.exists():
                t0 = time.perf_counter()
                distinct = write_corpus(corpus, int(size * 1e9))
                print(f"corpus {size} GB: {corpus.stat().st_size / 1e9:.2f} GB, {distinct:,} distinct words, "
                      f"written in {time.perf_counter() - t0:.0f}s", flush=True)
            recipe = {"name": "mem", "task": "causal_lm", "model": {"config": "gpt2", "tokenizer": str(tok_dir)},
                      "data": {"train_files": [str(corpus)], "validation_files": [str(val)], "block_size": 128,
                               "cache_dir": str(work / f"cache-{size}-{reset}")}}
            res, peak = run_child(recipe, reset if reset == "off" else str(args.reset_chars or ""))
            peaks[(size, reset)] = peak
            mb = corpus.stat().st_size / 1e6
            print(f"{size} GB, cache bound {reset}: peak RSS {peak:,.0f} MiB; prepare {res['seconds']:.1f}s "
                  f"({mb / res['seconds']:.1f} MB/s, {res['tokens'] / res['seconds']:,.0f} tokens/s; "
                  f"manifest seconds {res['split']})", flush=True)
            shutil.rmtree(work / f"cache-{size}-{reset}", ignore_errors=True)
        small, large = min(args.sizes), max(args.sizes)
        print(f"peak RSS {peaks[(large, 'on')]:,.0f} MiB at {large} GB vs {peaks[(small, 'on')]:,.0f} MiB "
              f"at {small} GB (goal: under 1024 MiB, not growing)")
        print(f"ratio={peaks[(large, 'on')] / peaks[(small, 'on')]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
