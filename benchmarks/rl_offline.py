"""The shipped offline RL recipes, as shipped vs with their earlier settings: wall time and proof.

Each variant is one real ``clustertune run recipes/<recipe>.yaml [overrides]`` in a fresh
process (imports, policy load, the evaluations before and after, checkpoints and the final save
all counted), alternated so both see the same load. The earlier settings are the shipped
recipe's values before they were tuned for CPU, given as overrides. Prints each wall time, the
proof figures of each run (GRPO: mean evaluation reward before -> after with standard errors;
DPO: held-out accuracy and implicit-reward accuracy) and the ratio of the median wall times.

Needs a completed quickstart run (``clustertune run quickstart``) under the runs root.

    .venv/bin/python benchmarks/rl_offline.py                  # both recipes, 1 round each
    .venv/bin/python benchmarks/rl_offline.py --recipe grpo --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = {"grpo": "recipes/rlhf-grpo-offline.yaml", "dpo": "recipes/rlhf-dpo-offline.yaml"}
# The settings these recipes shipped with before (100 steps at a low learning rate; GRPO with
# 24-token completions).
EARLIER = {
    "grpo": ["train.max_steps=100", "train.lr=2e-4", "rl.max_new_tokens=24", "train.save_every=50", "rl.sample_every=25"],
    "dpo": ["train.max_steps=100", "train.lr=2e-4", "train.save_every=50"],
}

# --smoke: a few steps each, to check the benchmark still runs.
SMOKE = {"grpo": ["train.max_steps=2", "rl.num_generations=2", "rl.max_new_tokens=4", "train.batch_size=4",
                  "data.max_eval_samples=8"],
         "dpo": ["train.max_steps=2", "train.batch_size=4", "data.max_eval_samples=8"]}


def tiny_policy(path: Path) -> Path:
    """A 2-layer GPT-2 (width 64) and a byte-level BPE trained on the builtin corpus, saved as a model directory."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs()[:400], 512, classification=False, model_max_length=128)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=128, vocab_size=len(tok),
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def run_once(recipe: str, overrides: list[str], runs_root: str) -> tuple[float, dict]:
    exe = Path(sys.executable).with_name("clustertune")
    env = {**os.environ, "CLUSTERTUNE_RUNS": runs_root, "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    out = subprocess.run([str(exe), "run", str(ROOT / recipe), *overrides, "--no-progress"], env=env,
                         capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{recipe} {overrides} failed:\n{out.stderr[-3000:]}")
    run_dir = next(line.split("(", 1)[1].rstrip(")") for line in out.stderr.splitlines() if line.startswith("run ") and "(" in line)
    evals = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    return wall, {"first": evals[0], "last": evals[-1]}


def proof(kind: str, res: dict) -> str:
    a, b = res["first"], res["last"]
    if kind == "grpo":
        se = (a["eval_reward_stderr"] ** 2 + b["eval_reward_stderr"] ** 2) ** 0.5
        return (f"eval reward {a['eval_reward']:.3f} -> {b['eval_reward']:.3f} (x{b['eval_reward'] / a['eval_reward']:.2f}, "
                f"{(b['eval_reward'] - a['eval_reward']) / se:.0f} standard errors), {b['eval_samples']} samples")
    return (f"held-out accuracy {a['eval_accuracy']:.3f} -> {b['eval_accuracy']:.3f}, implicit-reward accuracy "
            f"{b['eval_gain_accuracy']:.3f}, margin {a['eval_margin']:.1f} -> {b['eval_margin']:.1f} nats, "
            f"{b['eval_samples']} pairs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", choices=["grpo", "dpo", "both"], default="both")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    ap.add_argument("--runs-root", default=os.environ.get("CLUSTERTUNE_RUNS", "runs"))
    args = ap.parse_args()
    if args.smoke:  # a tiny policy of its own: no quickstart run needed
        args.repeats = 1
        policy = tiny_policy(Path(args.runs_root) / "tiny-policy")
        for kind in SMOKE:
            SMOKE[kind].append(f"rl.policy={policy}")
    kinds = ["grpo", "dpo"] if args.recipe == "both" else [args.recipe]
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    ratios: list[float] = []
    for kind in kinds:
        walls: dict[str, list[float]] = {"shipped": [], "earlier": []}
        for _ in range(args.repeats):
            sides = (("shipped", []),) if args.smoke else (("shipped", []), ("earlier", EARLIER[kind]))
            for name, overrides in sides:
                overrides = overrides + (SMOKE[kind] if args.smoke else [])
                wall, res = run_once(RECIPES[kind], overrides, args.runs_root)
                walls[name].append(wall)
                print(f"{kind} {name:8s} {wall:7.1f} s  load {os.getloadavg()[0]:.2f}  {proof(kind, res)}", flush=True)
        if args.smoke:
            continue
        ratio = statistics.median(walls["earlier"]) / statistics.median(walls["shipped"])
        print(f"{kind}: shipped {statistics.median(walls['shipped']):.1f} s, earlier settings "
              f"{statistics.median(walls['earlier']):.1f} s: shipped is {ratio:.2f}x faster")
        ratios.append(ratio)
    if ratios:
        print(f"ratio={min(ratios):.2f}")  # the earlier settings' seconds over the shipped ones', the least over the recipes


if __name__ == "__main__":
    main()
