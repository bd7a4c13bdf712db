"""Time from launch to the first training step: `clustertune run` with 2 local CPU ranks
versus a plain `torchrun --standalone --nproc-per-node 2` of an equivalent minimal DDP script
(the same tiny GPT-2, gloo, AdamW, one optimizer step).

Both sides are measured alike: wall time from starting the command to the end of optimizer
step 1 on rank 0 (clustertune: the `time` of the first row of metrics.jsonl, logged every step;
torchrun: the time the script writes after its first step). The tokenizer is saved once up front
(the submitting side copies it; nothing is trained per launch), so the measured part is the
launch itself. Runs alternate; the median of each side and their ratio are printed.

    .venv/bin/python benchmarks/launch.py [--repeats 5]
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

import yaml

HERE = Path(__file__).resolve().parent
TINY = {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 64}

PLAIN = '''
import os, sys, time
import torch, torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel
dist.init_process_group("gloo")
torch.set_num_threads(1)
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=512, bos_token_id=0, eos_token_id=0, **{tiny})
model = torch.nn.parallel.DistributedDataParallel(GPT2LMHeadModel(cfg))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, 512, (4, 64))
loss = model(input_ids=ids, labels=ids).loss
loss.backward()
opt.step()
if dist.get_rank() == 0:
    open(sys.argv[1], "w").write(str(time.time()))
dist.destroy_process_group()
'''


def make_tokenizer(out: Path) -> None:
    from clustertune.data.builtin import builtin_rows
    from clustertune.models.tokenizer import train_bpe

    texts = [str(r["text"]) for r in builtin_rows("pydoc")]
    tok = train_bpe(texts, 512, classification=False, model_max_length=64)
    tok.save_pretrained(str(out))


def clustertune_once(work: Path, recipe: Path) -> float:
    runs = work / "runs"
    exe = Path(sys.executable).with_name("clustertune")
    t0 = time.time()
    out = subprocess.run([str(exe), "run", str(recipe), "--runs-root", str(runs), "--no-progress"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"clustertune run failed:\n{out.stdout}\n{out.stderr}")
    run_dir = sorted(runs.iterdir())[-1]
    first = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    return first["time"] - t0


def plain_once(work: Path, script: Path) -> float:
    stamp = work / "plain-step1"
    stamp.unlink(missing_ok=True)
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                          str(script), str(stamp)], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode != 0:
        raise SystemExit(f"torchrun failed:\n{out.stdout}\n{out.stderr}")
    return float(stamp.read_text()) - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    args = ap.parse_args()
    if args.smoke:
        args.repeats = 1
    with tempfile.TemporaryDirectory(prefix="ct-bench-launch-") as tmp:
        work = Path(tmp)
        make_tokenizer(work / "tokenizer")
        recipe = work / "tiny.yaml"
        recipe.write_text(yaml.safe_dump({
            "name": "bench", "task": "causal_lm",
            "model": {"config": "gpt2", "config_overrides": TINY, "tokenizer": str(work / "tokenizer")},
            "data": {"dataset": "builtin:pydoc", "block_size": 64, "max_eval_samples": 8},
            "train": {"batch_size": 4, "max_steps": 1, "log_every": 1, "cpu_threads": 1, "precision": "fp32"},
            "launch": {"procs_per_node": 2},
        }))
        script = work / "plain.py"
        script.write_text(PLAIN.replace("{tiny}", repr(TINY)))
        ct, plain = [], []
        for i in range(args.repeats):
            ct.append(clustertune_once(work, recipe))
            plain.append(plain_once(work, script))
            print(f"round {i + 1}: clustertune {ct[-1]:.2f} s   plain torchrun {plain[-1]:.2f} s", flush=True)
        m_ct, m_plain = statistics.median(ct), statistics.median(plain)
        print(f"median launch -> first step: clustertune {m_ct:.2f} s, plain torchrun {m_plain:.2f} s, "
              f"ratio {m_ct / m_plain:.2f}x (goal <= 1.3x)")
        print(f"ratio={m_ct / m_plain:.2f}")  # clustertune's seconds to the first step over plain torchrun's


if __name__ == "__main__":
    main()
