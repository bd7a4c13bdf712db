"""The same LoRA fine-tune two ways: a loop on the tinker SDK against `clustertune serve --tinker`,
and `clustertune run` (task sft), side by side: the loss of each step and steps per second.

The data: short chats ("After 41?" -> "42"), prepared by `clustertune run` into token ids and a
loss mask; the Tinker loop trains on exactly those rows (every position whose next token is an
assistant token weighted 1/N, N the step's trained tokens: the mean `clustertune run` takes), the
whole set each step. Both use LoRA rank 8, alpha 32, no dropout, on the attention and MLP layers
(not the output layer), the same seed for the adapter's initial weights, AdamW with betas 0.9 and
0.95, eps 1e-12, no weight decay, no clipping and a constant learning rate; fp32 on the CPU.
The server runs in its own process, as a user runs it, and both sides compute with the same
number of torch threads (`--threads`, default 1). In each of `--rounds` rounds (default 3) the
sides take turns: a new run, then a new training client on the one server. Equal settings should
give equal losses: the script prints both per step and the largest relative difference, then the
time per step of each side in each round and `ratio=`, the median of the rounds (Tinker over run).

    .venv/bin/python benchmarks/tinker_loop.py                  # a 4-layer base, 40 chats, 30 steps
    .venv/bin/python benchmarks/tinker_loop.py --smoke          # the tiny base, 8 chats, 6 steps, 1 round
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LR = 3e-3


def make_base(root: Path, layers: int, width: int) -> Path:
    """A GPT-2 of the given size and a 512-token BPE trained on the builtin corpus, ChatML inside."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.data.templates import CHATML
    from clustertune.models.tokenizer import train_bpe

    torch.manual_seed(0)
    tok = train_bpe(pydoc_paragraphs(), 512, classification=False, model_max_length=128)
    tok.chat_template = CHATML
    cfg = GPT2Config(vocab_size=len(tok), n_layer=layers, n_embd=width, n_head=2, n_positions=128,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    GPT2LMHeadModel(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    return root


def write_chats(path: Path, n: int, start: int = 0) -> Path:
    import json

    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"After {i}?"},
                                                     {"role": "assistant", "content": str(i + 1)}]}) + "\n"
                            for i in range(start, start + n)))
    return path


def run_side(base: Path, chats: Path, work: Path, steps: int, rows: int, threads: int) -> tuple[Any, list[float], float]:
    """`clustertune run` of the chats: the run, its loss per step, seconds per step."""
    import json

    import clustertune as ct

    recipe = ct.load_recipe({
        "name": "tinker-twin", "task": "sft", "model": {
            "name_or_path": str(base),
            "adapter": {"type": "lora", "rank": 8, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"}},
        "data": {"train_files": [str(chats)], "max_length": 64,
                 "validation_files": [str(write_chats(work / "held-out.jsonl", 2, start=1000))],
                 "sft": {"chat_template": "chatml", "generation_samples": 0}},
        "train": {"precision": "fp32", "batch_size": rows, "lr": LR, "lr_scheduler": "constant", "warmup_steps": 0,
                  "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-12, "weight_decay": 0.0,
                  "max_grad_norm": None, "max_steps": steps, "log_every": 1, "seed": 0,
                  "cpu_threads": threads, "shuffle": False},
    })
    run = ct.run(recipe, runs_root_dir=str(work / "runs"), show_progress=False)
    if run.state.value != "COMPLETED":
        raise SystemExit(f"clustertune run ended {run.state.value}: see {run.paths.root}")
    train_rows = [json.loads(line) for line in run.paths.metrics.read_text().splitlines()]
    train_rows = [r for r in train_rows if r.get("kind") == "train"]
    losses = [float(r["loss"]) for r in train_rows]
    # Rows are written at every step (log_every 1): the time between them is a step's, the
    # first step (warm-up) left out as on the other side.
    times = [float(r["time"]) for r in train_rows]
    return run, losses, (times[-1] - times[0]) / max(len(times) - 1, 1)


def prepared_rows(run: Any) -> list[tuple[list[int], list[int]]]:
    """The run's prepared training rows as (token ids, labels with -100 where no loss)."""
    from clustertune.data.staging import open_run_data
    from clustertune.recipe.load import load_recipe

    import numpy as np

    train, _ = open_run_data(load_recipe(run.paths.recipe), run.paths)
    out = []
    for i in range(len(train)):
        row = train.batch_tensors(np.array([i]))  # one row, cut to its own length
        out.append((row["input_ids"][0].tolist(), row["labels"][0].tolist()))
    return out


def start_server(work: Path, threads: int) -> tuple[Any, str]:
    """`clustertune serve --tinker` in its own process, as a user runs it: the process and its URL.

    ``threads``: torch's threads in the server (OMP_NUM_THREADS), as `train.cpu_threads` is the
    run's: both sides compute with the same number."""
    import re
    import subprocess

    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    log = (work / "server.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from clustertune.cli.main import main; sys.exit(main())",
                             "serve", "--tinker", "--port", "0", "--tinker-dir", str(work / "tinker"),
                             "--device", "cpu", "--dtype", "fp32"], env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        hit = re.search(r"Tinker API at (http://\S+?):? ", (work / "server.log").read_text())
        if hit:
            return proc, hit.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not start:\n{(work / 'server.log').read_text()}")


def tinker_side(url: str, base: Path, rows: list[tuple[list[int], list[int]]], steps: int) -> tuple[list[float], float]:
    """The same rows through the tinker SDK against the server at ``url``: a new training client
    (the same seed, so the same initial adapter) and its loss and seconds per step."""
    import tinker
    from tinker import types

    tc = tinker.ServiceClient(base_url=url).create_lora_training_client(
        base_model=str(base), rank=8, seed=0, train_unembed=False).result()
    total = sum(sum(1 for x in labels[1:] if x != -100) for _, labels in rows)
    data = [types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs={
        "target_tokens": ids[1:], "weights": [(1.0 / total) if x != -100 else 0.0 for x in labels[1:]]})
        for ids, labels in rows]
    losses, times = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        fb = tc.forward_backward(data, "cross_entropy")
        opt = tc.optim_step(types.AdamParams(learning_rate=LR, beta1=0.9, beta2=0.95, eps=1e-12))
        losses.append(fb.result().metrics["loss:sum"])
        opt.result()
        times.append(time.perf_counter() - t0)
    return losses, sum(times[1:]) / max(len(times) - 1, 1)


def compare(work: Path, *, layers: int, width: int, chats: int, steps: int, threads: int,
            rounds: int) -> dict[str, Any]:
    """``rounds`` rounds, the two sides taking turns in each (a new run, then a new training client
    on the one server): the machine's changes of speed fall on both."""
    os.environ.setdefault("TINKER_API_KEY", "tml-benchmark")
    os.environ.setdefault("TINKER_TELEMETRY", "0")
    base = make_base(work / "base", layers, width)
    path = write_chats(work / "chats.jsonl", chats)
    proc, url = start_server(work, threads)
    try:
        out: dict[str, Any] = {"run_step_s": [], "tinker_step_s": [], "worst_relative": 0.0}
        for i in range(rounds):
            (work / f"round-{i}").mkdir()
            run, run_losses, run_step = run_side(base, path, work / f"round-{i}", steps, rows=chats, threads=threads)
            rows = prepared_rows(run)
            tk_losses, tk_step = tinker_side(url, base, rows, steps)
            worst = max(abs(a - b) / abs(a) for a, b in zip(run_losses, tk_losses))
            out.update(run=run_losses, tinker=tk_losses, rows=len(rows),
                       worst_relative=max(out["worst_relative"], worst))
            out["run_step_s"].append(run_step)
            out["tinker_step_s"].append(tk_step)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny base, 8 chats, 6 steps: the script still runs")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the sides taking turns; the median is reported")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on each side (train.cpu_threads, the "
                    "server's OMP_NUM_THREADS); default 1")
    args = ap.parse_args(argv)
    size = dict(layers=2, width=64, chats=8, steps=6, rounds=1) if args.smoke else dict(layers=4, width=128, chats=40,
                                                                              steps=args.steps, rounds=args.rounds)
    work = Path(tempfile.mkdtemp(prefix="tinker-loop-"))
    r = compare(work, **size, threads=args.threads)
    print(f"{r['rows']} rows, {size['steps']} steps, LoRA r8 on a GPT-2 of {size['layers']} layers x {size['width']}")
    print("step  clustertune run  tinker SDK loop")
    for i, (a, b) in enumerate(zip(r["run"], r["tinker"]), 1):
        print(f"{i:4d}  {a:15.6f}  {b:15.6f}")
    print(f"largest relative difference of the loss (every round): {r['worst_relative']:.2e}")
    ratios = [t / w for t, w in zip(r["tinker_step_s"], r["run_step_s"])]
    for i, (w, t, q) in enumerate(zip(r["run_step_s"], r["tinker_step_s"], ratios), 1):
        print(f"round {i}: seconds per step: clustertune run {w:.4f}, tinker loop {t:.4f}, ratio {q:.2f}")
    print(f"ratio={statistics.median(ratios):.2f} (tinker loop / clustertune run, time per step, median of "
          f"{len(ratios)} rounds)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
