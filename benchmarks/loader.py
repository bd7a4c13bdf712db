"""What feeding packed batches from the memory-mapped cache costs, against a training step.

    .venv/bin/python benchmarks/loader.py

The quickstart recipe's data is prepared (a cache hit after the first time) and opened the way
the nodes open it (``open_split``: memory-mapped shards). Timed separately, interleaved:
- the loader: next step's indices (shuffled, sharded) and ``to_batch`` (gather rows from the
  map, widen to int64 tensors), for the quickstart batch (16 x 128);
- a training step of the quickstart model (4 layers, width 256) on such a batch: forward,
  backward, AdamW step.
Goal: the loader under 2% of a step.
"""

from __future__ import annotations

import time

import torch


def main() -> None:
    from clustertune.data.cache import prepare
    from clustertune.data.loader import Position, TrainBatches, to_batch
    from clustertune.models.build import build_model, resolve_config
    from clustertune.recipe import load_recipe

    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = ap.parse_args()
    recipe = load_recipe("quickstart")
    p = prepare(recipe)
    train = p.open_split("train")
    tok = p.tokenizer()
    t = recipe.train
    batches = TrainBatches(train, t.batch_size, t.gradient_accumulation_steps, 0, 1, t.seed, t.shuffle)
    dev = torch.device("cpu")
    torch.manual_seed(0)
    model = build_model(recipe, resolve_config(recipe, tok), tok)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    pos = Position()

    def load_one() -> dict:
        nonlocal pos
        micro, pos = batches.step_indices(pos)
        return to_batch(train, micro[0], dev)

    def step(batch: dict) -> None:
        loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step(load_one())  # warm-up
    n_load, n_step = (60, 3) if a.smoke else (2000, 15)
    load_s = step_s = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n_load // 3):
            load_one()
        load_s += time.perf_counter() - t0
        batch = load_one()
        t0 = time.perf_counter()
        for _ in range(n_step // 3):
            step(batch)
        step_s += time.perf_counter() - t0
    per_load, per_step = load_s / (n_load // 3 * 3), step_s / (n_step // 3 * 3)
    print(f"data: {p.fingerprint}, {len(train)} blocks of {train.input_ids.shape[1]} ({type(train.input_ids).__name__})")
    print(f"loader: {per_load * 1e6:.0f} us per batch of {t.batch_size}x{train.input_ids.shape[1]}")
    print(f"step:   {per_step * 1e3:.1f} ms (quickstart model, CPU, {torch.get_num_threads()} threads)")
    print(f"ratio:  loader is {100 * per_load / per_step:.3f}% of a step (goal: under 2%)")
    print(f"ratio={per_load / per_step:.5f}")  # a batch's load over a training step


if __name__ == "__main__":
    main()
