"""clustertune's training loop vs transformers' Trainer on CPU: tokens/s, side by side.

Both train the same GPT-2-style model (the quickstart's shape by default) from the same initial
weights on the same packed blocks in the same order, with AdamW, a linear schedule, clipping and
the same batch. Throughput is measured in the steady state: from the end of step ``--skip`` to
the end of the last step, so start-up (imports, data, model load) is not counted for either.
Each measurement runs in a fresh process; the two alternate, ``--repeats`` times each, and the
medians and their ratio are printed.

    .venv/bin/python benchmarks/train_cpu.py                 # 3 alternated runs of each
    .venv/bin/python benchmarks/train_cpu.py --repeats 5 --steps 60
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_init(out: Path, layers: int, width: int, block: int) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs(), 4096, classification=False, model_max_length=block)
    config = GPT2Config(vocab_size=len(tok), n_positions=block, n_embd=width, n_layer=layers, n_head=4,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(str(out))
    tok.save_pretrained(str(out))


def recipe_dict(init: Path, a: argparse.Namespace) -> dict:
    return {
        "name": "bench", "task": "causal_lm",
        "model": {"name_or_path": str(init)},
        "data": {"dataset": "builtin:pydoc", "block_size": a.block},
        "train": {"batch_size": a.batch, "lr": 1e-3, "warmup_steps": 5, "lr_scheduler": "linear",
                  "max_steps": a.steps, "weight_decay": 0.0, "max_grad_norm": 1.0, "shuffle": False,
                  "log_every": a.skip, "seed": 0, "precision": "fp32"},  # Trainer's on CPU
    }


def run_clustertune(init: Path, a: argparse.Namespace, workdir: Path) -> float:
    import clustertune as ct

    run = ct.run(ct.load_recipe(recipe_dict(init, a)), runs_root_dir=workdir / "runs", show_progress=False)
    rows = [json.loads(x) for x in run.paths.metrics.read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    first = next(r for r in train if r["step"] == a.skip)
    last = train[-1]
    tokens = (last["step"] - first["step"]) * a.batch * a.block
    return tokens / (last["time"] - first["time"])


def run_trainer(init: Path, a: argparse.Namespace, workdir: Path) -> float:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

    import clustertune as ct
    from clustertune.data.prepare import prepare_split
    from clustertune.data.sources import load_raw

    recipe = ct.load_recipe(recipe_dict(init, a))
    tok = AutoTokenizer.from_pretrained(str(init))
    blocks = prepare_split(recipe, load_raw(recipe.data, 0).train, tok, "train").input_ids.astype("int64")
    ds = Dataset.from_dict({"input_ids": blocks.tolist(), "labels": blocks.tolist()})
    marks: dict[int, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003
            marks[state.global_step] = time.time()

    args = TrainingArguments(
        output_dir=str(workdir / "trainer"), per_device_train_batch_size=a.batch, learning_rate=1e-3,
        warmup_steps=5, lr_scheduler_type="linear", max_steps=a.steps, weight_decay=0.0, max_grad_norm=1.0,
        optim="adamw_torch", train_sampling_strategy="sequential", dataloader_drop_last=True, use_cpu=True,
        seed=0, report_to=[], save_strategy="no", logging_steps=a.skip, disable_tqdm=True,
    )
    Trainer(model=AutoModelForCausalLM.from_pretrained(str(init)), args=args, train_dataset=ds,
            callbacks=[Clock()]).train()
    tokens = (a.steps - a.skip) * a.batch * a.block
    return tokens / (marks[a.steps] - marks[a.skip])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--skip", type=int, default=10, help="steps not counted (warm-up); also the log interval")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    p.add_argument("--one", choices=["clustertune", "trainer"], help=argparse.SUPPRESS)
    p.add_argument("--init", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.smoke:
        a.repeats, a.steps, a.skip, a.batch, a.block, a.layers, a.width = 1, 6, 2, 4, 64, 2, 64

    if a.one:  # a single measurement, in this fresh process
        with tempfile.TemporaryDirectory() as d:
            fn = run_clustertune if a.one == "clustertune" else run_trainer
            print(json.dumps({"tokens_per_s": fn(a.init, a, Path(d))}))
        return

    with tempfile.TemporaryDirectory() as d:
        init = Path(d) / "init"
        make_init(init, a.layers, a.width, a.block)
        results: dict[str, list[float]] = {"clustertune": [], "trainer": []}
        passthrough = [f"--{k}={getattr(a, k)}" for k in ("steps", "skip", "batch", "block")]
        for i in range(a.repeats):
            for who in ("clustertune", "trainer") if i % 2 == 0 else ("trainer", "clustertune"):
                out = subprocess.run([sys.executable, __file__, "--one", who, "--init", str(init), *passthrough],
                                     capture_output=True, text=True, check=True)
                tps = json.loads(out.stdout.strip().splitlines()[-1])["tokens_per_s"]
                results[who].append(tps)
                print(f"run {i + 1} {who:<12} {tps:8.0f} tokens/s", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"model: {a.layers} layers, width {a.width}, block {a.block}, batch {a.batch}, "
          f"{a.steps} steps ({a.skip} not counted), torch threads {__import__('torch').get_num_threads()}")
    print(f"median tokens/s: clustertune {med['clustertune']:.0f}, Trainer {med['trainer']:.0f}")
    print(f"ratio clustertune / Trainer: {med['clustertune'] / med['trainer']:.3f}x")
    print(f"ratio={med['clustertune'] / med['trainer']:.2f}")


if __name__ == "__main__":
    main()
