"""The same LoRA fine-tune two ways: a loop on the tinker SDK against `clustertune serve --tinker`,
and `clustertune run` (task sft), side by side: the loss of each step and steps per second.

The data: short chats ("After 41?" -> "42"), prepared by `clustertune run` into token ids and a
loss mask; the Tinker loop trains on exactly those rows (every position whose next token is an
assistant token weighted 1/N, N the step's trained tokens: the mean `clustertune run` takes), the
whole set each step. Both use LoRA rank 8, alpha 32, no dropout, on the attention and MLP layers
(not the output layer), the same seed for the adapter's initial weights, AdamW with betas 0.9 and
0.95, eps 1e-12, no weight decay, no clipping and a constant learning rate; fp32 on the CPU.
Equal settings should give equal losses: the script prints both per step and the largest
relative difference, then the time per step of each and the ratio.

    .venv/bin/python benchmarks/tinker_loop.py                  # a 4-layer base, 40 chats, 30 steps
    .venv/bin/python benchmarks/tinker_loop.py --smoke          # the tiny base, 8 chats, 6 steps
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
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


def run_side(base: Path, chats: Path, work: Path, steps: int, rows: int) -> tuple[Any, list[float], float]:
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
                  "cpu_threads": 1, "shuffle": False},
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


def tinker_side(base: Path, rows: list[tuple[list[int], list[int]]], work: Path, steps: int) -> tuple[list[float], float]:
    """The same rows through the tinker SDK against a server in this process."""
    os.environ.setdefault("TINKER_API_KEY", "tml-benchmark")
    os.environ.setdefault("TINKER_TELEMETRY", "0")
    import tinker
    from tinker import types

    from clustertune.api import serving

    server = serving.start(None, port=0, tinker=True, tinker_dir=work / "tinker", device="cpu", dtype="fp32")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        tc = tinker.ServiceClient(base_url=server.served.root_url).create_lora_training_client(
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
    finally:
        server.stop()
        thread.join(30)


def compare(work: Path, *, layers: int, width: int, chats: int, steps: int) -> dict[str, Any]:
    base = make_base(work / "base", layers, width)
    path = write_chats(work / "chats.jsonl", chats)
    run, run_losses, run_step = run_side(base, path, work, steps, rows=chats)
    rows = prepared_rows(run)
    tk_losses, tk_step = tinker_side(base, rows, work, steps)
    worst = max(abs(a - b) / abs(a) for a, b in zip(run_losses, tk_losses))
    return {"run": run_losses, "tinker": tk_losses, "worst_relative": worst, "rows": len(rows),
            "run_step_s": run_step, "tinker_step_s": tk_step}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the tiny base, 8 chats, 6 steps: the script still runs")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    size = dict(layers=2, width=64, chats=8, steps=6) if args.smoke else dict(layers=4, width=128, chats=40,
                                                                              steps=args.steps)
    work = Path(tempfile.mkdtemp(prefix="tinker-loop-"))
    r = compare(work, **size)
    print(f"{r['rows']} rows, {size['steps']} steps, LoRA r8 on a GPT-2 of {size['layers']} layers x {size['width']}")
    print("step  clustertune run  tinker SDK loop")
    for i, (a, b) in enumerate(zip(r["run"], r["tinker"]), 1):
        print(f"{i:4d}  {a:15.6f}  {b:15.6f}")
    print(f"largest relative difference of the loss: {r['worst_relative']:.2e}")
    print(f"seconds per step: clustertune run {r['run_step_s']:.4f}, tinker loop {r['tinker_step_s']:.4f}, "
          f"ratio (tinker / run) {r['tinker_step_s'] / r['run_step_s']:.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
