"""GPT-2 124M at sequence 1024: clustertune's path vs Trainer defaults vs Trainer + compile +
fused AdamW, side by side in one run, at equal batch sizes and at each side's best.

    .venv/bin/python benchmarks/gpu_gpt2.py                       # on a GPU: GPT-2 124M, batches 16 and 32
    .venv/bin/python benchmarks/gpu_gpt2.py --size tiny --batch 8  # on CPU: a tiny model, same comparison

Each (variant, batch) runs in a fresh process (see clustertune/train/bench.py); the table and
the ratios go to stdout, and with --json the raw rows go to a file for benchmarks/RESULTS.md.
It needs torch, transformers and accelerate only (random token blocks: no hub, no datasets).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    from clustertune.train.bench import BenchSpec, report, run_side_by_side
    from clustertune.train.bench_names import MODE_VARIANTS, SIZES, VARIANTS

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=SIZES, default="auto", help="gpt2 on a GPU and tiny on CPU by default")
    p.add_argument("--batch", default=None, help="comma-separated batch sizes (default: 16,32 for gpt2)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--skip", type=int, default=None, help="warm-up steps not counted")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated; also {', '.join(MODE_VARIANTS)} (train.compile_mode)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each in alternating order; medians reported")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = p.parse_args()
    if a.smoke:
        a.size, a.batch, a.steps, a.skip, a.variants = "tiny", "4", 4, 1, "clustertune-eager,trainer"

    spec = BenchSpec.preset(a.size)
    default_batches = "16,32" if spec.seq == 1024 else str(spec.batch)
    batches = [int(b) for b in (a.batch or default_batches).split(",")]
    spec = replace(spec, steps=a.steps or spec.steps, skip=a.skip or spec.skip)
    rows = run_side_by_side(spec, [v for v in a.variants.split(",") if v], batches, a.repeats)
    print("\n".join(report(spec, rows)))
    ours = max((r for r in rows if r["variant"] in ("clustertune", "clustertune-eager")), key=lambda r: r["tokens_per_s"],
               default=None)
    trainers = [r for r in rows if r["variant"] in ("trainer", "trainer-compile")]
    modes = [r for r in rows if r["variant"] in MODE_VARIANTS]
    default = next((r for r in rows if r["variant"] == "clustertune"), None)
    if ours is not None and trainers:
        # clustertune's tokens/s over the best Trainer setup's
        print(f"ratio={ours['tokens_per_s'] / max(r['tokens_per_s'] for r in trainers):.2f}")
    elif modes and default is not None:
        # the best train.compile_mode's tokens/s over the default compile's
        print(f"ratio={max(r['tokens_per_s'] for r in modes) / default['tokens_per_s']:.2f}")
    if a.json:
        a.json.write_text(json.dumps({"spec": spec.__dict__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
