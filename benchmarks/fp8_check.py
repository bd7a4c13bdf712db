"""FP8 against bf16 on one GPU: the same ~1B Llama-shaped model trained 100 steps each way with
``clustertune run`` (``train.fp8`` on and off, both compiled, bf16 autocast), the loss curves
compared and the tokens/s side by side.

    .venv/bin/python benchmarks/fp8_check.py            # an H100/H200 (FP8 tensor cores), ~1.1B, sequence 1024
    .venv/bin/python benchmarks/fp8_check.py --smoke    # CPU: the bf16 side trains, the fp8 side is refused

Checked on a GPU: run.json of the FP8 run records ``fp8: true``; the FP8 run's mean loss over
its last 10 steps within 2% of bf16's (torchao reports FP8 training within a fraction of a
percent of bf16 at this scale). The last line is ``ratio=<FP8 tokens/s / bf16 tokens/s>``. On a
CPU (``--smoke``) there are no FP8 tensor cores: the bf16 side trains the tiny shape and the fp8
side must be refused on its rank with the GPUs that have them named, which is what a user
without one sees.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# TinyLlama's widths (22 layers of 2048, grouped-query attention): ~1.1B parameters with a 16k vocabulary.
GPU_SHAPE = {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
             "num_key_value_heads": 4}
TINY_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2}


def recipe(shape: dict, seq: int, vocab: int, steps: int, batch: int, fp8: bool) -> dict:
    return {
        "name": "fp8" if fp8 else "bf16", "task": "causal_lm",
        "model": {"config": "llama", "tokenizer": "train", "tokenizer_vocab_size": vocab,
                  "config_overrides": {**shape, "max_position_embeddings": seq, "tie_word_embeddings": False}},
        "data": {"dataset": "builtin:pydoc", "block_size": seq, "max_eval_samples": 2 * batch},
        "train": {"batch_size": batch, "max_steps": steps, "log_every": 1, "lr": 3e-4, "warmup_steps": steps // 10,
                  "precision": "bf16", "fp8": fp8, "eval_at_start": False, "seed": 0,
                  **({"compile": True} if shape is GPU_SHAPE else {})},
    }


def train(where: Path, spec: dict) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    import yaml

    path = where / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    exe = Path(sys.executable).with_name("clustertune")
    env = {**os.environ, "CLUSTERTUNE_RUNS": str(where / "runs")}
    out = subprocess.run([str(exe), "run", str(path), "--no-progress"], capture_output=True, text=True, env=env)
    runs = sorted((where / "runs").glob(f"{spec['name']}-*"))
    return out, (runs[-1] if runs else None)


def curve(run_dir: Path) -> tuple[list[float], float]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["kind"] == "train"]
    rates = [r["tokens_per_s"] for r in train_rows[len(train_rows) // 5:] if r.get("tokens_per_s")]  # after compiling
    return [r["loss"] for r in train_rows], statistics.median(rates)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--smoke", action="store_true", help="CPU: the tiny shape; the fp8 side must be refused")
    a = p.parse_args()
    shape, seq, vocab, batch = (TINY_SHAPE, 32, 512, 4) if a.smoke else (GPU_SHAPE, 1024, 16384, 8)
    steps = 4 if a.smoke else a.steps
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        out, bf16_dir = train(where, recipe(shape, seq, vocab, steps, batch, fp8=False))
        if out.returncode != 0 or bf16_dir is None:
            sys.exit(f"the bf16 run failed:\n{out.stderr[-3000:]}")
        bf16, bf16_rate = curve(bf16_dir)
        print(f"bf16: {len(bf16)} steps, loss {bf16[0]:.3f} -> {bf16[-1]:.3f}, {bf16_rate:,.0f} tokens/s")
        out, fp8_dir = train(where, recipe(shape, seq, vocab, steps, batch, fp8=True))
        if a.smoke:
            said = "FP8 matrix multiplies need an NVIDIA GPU" in out.stderr
            if out.returncode == 0 or not said:
                sys.exit(f"the fp8 side was not refused on this CPU as it must be:\n{out.stderr[-3000:]}")
            print("fp8: refused on this CPU with the GPUs that have FP8 tensor cores named (as it must be)")
            return
        if out.returncode != 0 or fp8_dir is None:
            sys.exit(f"the fp8 run failed:\n{out.stderr[-3000:]}")
        fp8, fp8_rate = curve(fp8_dir)
        recorded = json.loads((fp8_dir / "run.json").read_text())["attempts"][-1].get("fp8")
        tail_bf16, tail_fp8 = statistics.mean(bf16[-10:]), statistics.mean(fp8[-10:])
        diff = tail_fp8 / tail_bf16 - 1
        print(f"fp8:  {len(fp8)} steps, loss {fp8[0]:.3f} -> {fp8[-1]:.3f}, {fp8_rate:,.0f} tokens/s; "
              f"run.json records fp8: {recorded}")
        print(f"mean loss of the last 10 steps: bf16 {tail_bf16:.4f}, fp8 {tail_fp8:.4f} ({100 * diff:+.2f}%, "
              f"goal within 2%): {'PASS' if abs(diff) <= 0.02 and recorded is True else 'FAIL'}")
        print(f"ratio={fp8_rate / bf16_rate:.2f}")


if __name__ == "__main__":
    main()
