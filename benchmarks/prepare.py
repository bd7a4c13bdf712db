"""clustertune prepare vs the run_clm.py way (datasets.map tokenize, then group_texts), side by side.

    .venv/bin/python benchmarks/prepare.py            # ~10 MB of text (the builtin corpus x22)
    .venv/bin/python benchmarks/prepare.py --repeat 5 --rounds 1
    .venv/bin/python benchmarks/prepare.py --corpus stdlib   # ~10 MB of Python sources, no repeats

Same corpus (Python's reference docs repeated to about 10 MB, one JSON line per paragraph),
same tokenizer (the quickstart's byte-level BPE, 4,096 tokens, saved to a directory), same
block size (128). The peer is what ``run_clm.py`` does: ``Dataset.map(tokenize, batched=True,
num_proc=cores)`` then ``Dataset.map(group_texts, batched=True, num_proc=cores)``, timed from
an in-memory Dataset (its file loading is not counted; clustertune's is). clustertune is a
full ``prepare()`` miss: read the file, hash it, tokenize, pack, write shards and manifest.

Also checked and printed:
- identity: clustertune's blocks equal the peer's with one process and the whole dataset as
  one map batch (``num_proc=1, batch_size=None``; group_texts drops a remainder per map batch,
  so only that setting is comparable);
- cache hit: ``prepare()`` again, in a warm process, for this corpus and one 4x smaller (it
  must stay under a second and not grow with corpus size), and ``clustertune prepare`` as a
  fresh command (imports included);
- the tokenizer's throughput alone: the encoder prepare chose (gigatoken where it reproduces
  the tokenizer) against the Rust ``tokenizers`` encoder, in MB/s.

The last line is ``ratio=<clustertune tokens/s over the peer's>``.

Rounds alternate peer and clustertune; the best of each is reported (this machine is shared,
and ratios measured together are what counts).
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
from itertools import chain
from pathlib import Path

import numpy as np


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (the peer's map workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def stdlib_paragraphs(limit_bytes: int) -> list[str]:
    """Blank-line separated paragraphs of the standard library's own .py files, in path order,
    up to ``limit_bytes``: text that does not repeat (many distinct identifiers), unlike x22."""
    import sysconfig

    out: list[str] = []
    size = 0
    for f in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            src = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for para in src.split("\n\n"):
            if para.strip():
                out.append(para)
                size += len(para.encode("utf-8"))
        if size >= limit_bytes:
            break
    return out


def write_corpus(path: Path, repeat: int, kind: str = "docs") -> tuple[list[str], int]:
    from clustertune.data.builtin import pydoc_paragraphs

    texts = pydoc_paragraphs() * repeat if kind == "docs" else stdlib_paragraphs(repeat * 460_000)
    with path.open("w", encoding="utf-8") as fh:
        for t in texts:
            fh.write(json.dumps({"text": t}) + "\n")
    return texts, sum(len(t.encode("utf-8")) for t in texts)


def peer(texts: list[str], tok_dir: Path, block: int, num_proc: int, group_batch: int | None) -> tuple[float, int, np.ndarray]:
    """The run_clm.py way; returns seconds, tokens tokenized, blocks."""
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar
    from transformers import AutoTokenizer

    disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
    ds = Dataset.from_dict({"text": texts})
    t0 = time.perf_counter()

    def tokenize_function(examples):  # run_clm.py
        return tokenizer(examples["text"])

    tokenized = ds.map(tokenize_function, batched=True, num_proc=num_proc, remove_columns=["text"],
                       load_from_cache_file=False)

    def group_texts(examples):  # run_clm.py
        concatenated = {k: list(chain(*examples[k])) for k in examples.keys()}
        total = len(concatenated[list(examples.keys())[0]])
        total = (total // block) * block
        result = {k: [t[i : i + block] for i in range(0, total, block)] for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    kwargs = {"batch_size": group_batch} if group_batch != 1000 else {}
    grouped = tokenized.map(group_texts, batched=True, num_proc=num_proc, load_from_cache_file=False, **kwargs)
    secs = time.perf_counter() - t0
    n_tokens = sum(len(x) for x in tokenized["input_ids"])
    blocks = np.asarray(grouped.with_format("numpy")["input_ids"])
    return secs, n_tokens, blocks


def encoder_throughput(texts: list[str], n_bytes: int, tok_dir: Path, workers: int, rounds: int) -> None:
    """Tokenizer throughput alone, side by side: the encoder prepare chose against the Rust
    ``tokenizers`` encoder (``encode_batch_fast``, its own thread pool), best of ``rounds``."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from clustertune.data.encode import probe_sample, text_encoder

    enc = text_encoder(AutoTokenizer.from_pretrained(str(tok_dir)), probe_sample(texts), workers)
    rust = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    best = {"ours": float("inf"), "tokenizers": float("inf")}
    for _ in range(rounds):
        t0 = time.perf_counter()
        enc.encode_flat(texts)
        best["ours"] = min(best["ours"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        rust.encode_batch_fast(texts)
        best["tokenizers"] = min(best["tokenizers"], time.perf_counter() - t0)
    mb = n_bytes / 1e6
    print(f"\nencoder alone: {enc.engine} {mb / best['ours']:.1f} MB/s, tokenizers encode_batch_fast "
          f"{mb / best['tokenizers']:.1f} MB/s: {best['tokenizers'] / best['ours']:.1f}x")


def recipe_for(corpus: Path, val: Path, tok_dir: Path, cache: Path, block: int):
    from clustertune.recipe import load_recipe

    return load_recipe({
        "name": "bench", "task": "causal_lm",
        "model": {"config": "gpt2", "tokenizer": str(tok_dir)},
        "data": {"train_files": [str(corpus)], "validation_files": [str(val)], "block_size": block,
                 "cache_dir": str(cache)},
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=22, help="copies of the builtin corpus (22: about 10 MB)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    ap.add_argument("--corpus", choices=["docs", "stdlib"], default="docs",
                    help="docs: the builtin corpus repeated --repeat times; stdlib: the standard library's "
                         "Python sources, not repeated, about as large")
    args = ap.parse_args()
    if args.smoke:
        args.repeat, args.rounds = 1, 1

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.data.cache import prepare, resolve_workers
    from clustertune.models.tokenizer import train_bpe

    cores = len(os.sched_getaffinity(0))
    work = Path(tempfile.mkdtemp(prefix="ct-bench-prepare-"))
    try:
        corpus = work / "corpus.jsonl"
        texts, n_bytes = write_corpus(corpus, args.repeat, args.corpus)
        small = work / "small.jsonl"
        write_corpus(small, max(1, args.repeat // 4), args.corpus)
        val = work / "val.jsonl"
        val.write_text("".join(json.dumps({"text": t}) + "\n" for t in pydoc_paragraphs()[:200]))
        tok_dir = work / "tokenizer"
        train_bpe(pydoc_paragraphs(), 4096, classification=False, model_max_length=args.block).save_pretrained(str(tok_dir))
        print(f"corpus: {n_bytes / 1e6:.1f} MB of text, {len(texts):,} examples; block {args.block}; {cores} cores")
        workers = resolve_workers(None, recipe_for(corpus, val, tok_dir, work / "c", args.block))

        best_peer, best_ct = float("inf"), float("inf")
        cpu_peer, cpu_ct = float("inf"), float("inf")
        peer_tokens = 0
        for rnd in range(args.rounds):
            c0 = cpu_seconds()
            secs, peer_tokens, _ = peer(texts, tok_dir, args.block, cores, 1000)
            cpu_peer = min(cpu_peer, cpu_seconds() - c0)
            best_peer = min(best_peer, secs)
            cache = work / f"cache-{rnd}"
            r = recipe_for(corpus, val, tok_dir, cache, args.block)
            c0 = cpu_seconds()
            t0 = time.perf_counter()
            p = prepare(r, workers=workers)
            secs_ct = time.perf_counter() - t0
            cpu_ct = min(cpu_ct, cpu_seconds() - c0)
            best_ct = min(best_ct, secs_ct)
            ct_all = sum(p.counts(s)["tokens"] for s in ("train", "validation"))
            print(f"round {rnd + 1}: peer (datasets.map, num_proc={cores}) {secs:.2f}s   "
                  f"clustertune prepare ({workers} workers) {secs_ct:.2f}s "
                  f"[tokenize {p.manifest.record.seconds['tokenize']:.2f}s, write {p.manifest.record.seconds['write']:.2f}s]")
        peer_tps = peer_tokens / best_peer
        ct_tps = ct_all / best_ct
        print(f"\npeer:        {peer_tps:>12,.0f} tokens/s  ({peer_tokens:,} tokens in {best_peer:.2f}s)")
        print(f"clustertune: {ct_tps:>12,.0f} tokens/s  ({ct_all:,} tokens in {best_ct:.2f}s, file reading included)")
        print(f"ratio:       {ct_tps / peer_tps:.2f}x  (goal: at least 15x)")
        print(f"CPU time:    peer {cpu_peer:.2f}s, clustertune {cpu_ct:.2f}s: {peer_tokens / cpu_peer:,.0f} vs "
              f"{ct_all / cpu_ct:,.0f} tokens per CPU-second, {(ct_all / cpu_ct) / (peer_tokens / cpu_peer):.2f}x "
              "(the peer's count includes its num_proc children; steadier than wall time on a busy machine)")

        # Identity against the comparable peer setting.
        _, _, exact = peer(texts, tok_dir, args.block, 1, None)
        ours = np.asarray(p.open_split("train").input_ids)
        same = exact.shape == ours.shape and np.array_equal(exact, ours.astype(exact.dtype))
        print(f"\nidentity: {ours.shape[0]:,} blocks; equal to the peer's with num_proc=1, batch_size=None: {same}")
        _, _, multi = peer(texts, tok_dir, args.block, cores, 1000)
        print(f"          (the peer's own default, num_proc={cores}, batch 1000, gives {multi.shape[0]:,} blocks: "
              "a remainder dropped per map batch)")
        if not same:
            sys.exit("IDENTITY CHECK FAILED")
        encoder_throughput(texts, n_bytes, tok_dir, workers, args.rounds)

        # Cache hits: warm process, two corpus sizes; then a fresh command.
        hits = {}
        for name, f in (("small", small), ("full", corpus)):
            r = recipe_for(f, val, tok_dir, work / "cache-hit", args.block)
            prepare(r, workers=workers)
            t0 = time.perf_counter()
            for _ in range(5):
                assert prepare(r).hit
            hits[name] = (time.perf_counter() - t0) / 5
        print(f"\ncache hit (warm process): {hits['small'] * 1e3:.1f} ms at {n_bytes / 4e6:.1f} MB, "
              f"{hits['full'] * 1e3:.1f} ms at {n_bytes / 1e6:.1f} MB (goal: under 1 s, not growing)")
        yaml_path = work / "bench.yaml"
        import yaml

        yaml_path.write_text(yaml.safe_dump(recipe_for(corpus, val, tok_dir, work / "cache-hit", args.block).to_plain()))
        exe = Path(sys.executable).with_name("clustertune")
        t0 = time.perf_counter()
        out = subprocess.run([str(exe), "prepare", str(yaml_path)], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        print(f"cache hit (`clustertune prepare`, fresh process, imports included): {wall:.2f}s wall; "
              f"it reports {out.stdout.split('(')[1].split(')')[0] if '(' in out.stdout else out.stderr.strip()}")
        print(f"ratio={ct_tps / peer_tps:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
