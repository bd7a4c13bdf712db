"""Teaching the quickstart model a user's own multi-turn chats: full fine-tuning (the shipped
SFT demo's settings) vs LoRA (the demo's earlier settings, and a wider LoRA), side by side.

The data: short three-turn conversations whose third answer is a word the first turn named
("Remember the word falcon." ... "What was the word?" -> "falcon"), 600 to train on and 60 held
out, written on the spot. Each variant is one `clustertune run sft-demo` with the data and its
settings as overrides, on the same quickstart model; the held-out exact match of the third
answer at step 0 (the untuned base) and at the end is printed for each, with its wall time.

    .venv/bin/python benchmarks/sft_recall.py                     # trains a quickstart first
    .venv/bin/python benchmarks/sft_recall.py --base runs/quickstart-.../model
    .venv/bin/python benchmarks/sft_recall.py --smoke             # a tiny base, 2 steps each
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

WORDS = ("apple river stone cloud lamp garden window silver candle forest bridge mirror pepper violin anchor "
         "basket castle desert engine feather glacier harbor island jacket kettle ladder magnet needle orange "
         "pillow quartz rocket saddle tunnel umbrella velvet wagon yellow zebra button carpet dragon falcon "
         "hammer jungle lemon marble nickel oyster parrot rabbit salmon tiger walnut").split()

# name -> overrides of the shipped sft-demo recipe
VARIANTS = {
    "full fine-tune (sft-demo)": [],
    "LoRA r16 +wte, lr 3e-3 (earlier demo)": [
        "model.adapter={type: lora, rank: 16, alpha: 32, target_modules: [c_attn, c_proj, c_fc, wte]}",
        "train.lr=3e-3"],
    "LoRA r64 +wte, lr 3e-3": [
        "model.adapter={type: lora, rank: 64, alpha: 128, target_modules: [c_attn, c_proj, c_fc, wte]}",
        "train.lr=3e-3"],
}


def conversation(rng: random.Random) -> dict:
    w, a, b = rng.choice(WORDS), rng.randint(1, 9), rng.randint(1, 9)
    return {"messages": [
        {"role": "user", "content": f"Remember the word {w}."}, {"role": "assistant", "content": "I will remember it."},
        {"role": "user", "content": f"What is {a} plus {b}?"}, {"role": "assistant", "content": str(a + b)},
        {"role": "user", "content": "What was the word?"}, {"role": "assistant", "content": w}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="a quickstart model directory (default: train one first)")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--smoke", action="store_true", help="a tiny base and 2 steps: the script still runs")
    args = ap.parse_args()

    import clustertune as ct

    work = Path(tempfile.mkdtemp(prefix="sft-recall-"))
    train, held = work / "chats.jsonl", work / "held-out.jsonl"
    for path, n, seed in ((train, 40 if args.smoke else 600, 1), (held, 8 if args.smoke else 60, 2)):
        rng = random.Random(seed)
        path.write_text("".join(json.dumps(conversation(rng)) + "\n" for _ in range(n)))
    base = args.base
    if base is None:
        start = ["model.config_overrides={n_layer: 1, n_embd: 32, n_head: 2, n_positions: 128}",
                 "model.tokenizer_vocab_size=512", "train.max_steps=2", "train.eval_every=2"] if args.smoke else []
        t0 = time.perf_counter()
        qs = ct.run(ct.load_recipe("quickstart", start), runs_root_dir=str(work / "runs"), show_progress=False)
        print(f"quickstart base: {qs.state.value} in {time.perf_counter() - t0:.0f} s ({qs.paths.model})")
        base = str(qs.paths.model)
    steps = 2 if args.smoke else args.steps
    rows = []
    for name, overrides in VARIANTS.items():
        recipe = ct.load_recipe("sft-demo", [
            f"model.name_or_path={base}", "data.dataset=null", f"data.train_files=[{train}]",
            f"data.validation_files=[{held}]", f"data.sft.generation_samples={8 if args.smoke else 60}",
            f"train.max_steps={steps}", *overrides])
        t0 = time.perf_counter()
        run = ct.run(recipe, runs_root_dir=str(work / "runs"), show_progress=False)
        wall = time.perf_counter() - t0
        evals = [r for r in map(json.loads, run.paths.metrics.read_text().splitlines()) if r["kind"] == "eval"]
        rows.append((name, evals[0]["eval_exact_match"], evals[-1]["eval_exact_match"], wall))
    print(f"\nheld-out exact match of the third answer, {steps} steps, {len(WORDS)} words:")
    for name, first, last, wall in rows:
        print(f"  {name:40s} {first:.2f} (step 0) -> {last:.2f}   {wall:5.1f} s")
    full, lora = rows[0][2], rows[1][2]
    print(f"gain over the base, full / earlier LoRA: {full - rows[0][1]:.2f} / {lora - rows[1][1]:.2f}")


if __name__ == "__main__":
    main()
