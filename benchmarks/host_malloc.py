"""A CPU training run with glibc's malloc defaults vs with freed memory kept for the next step.

clustertune sets glibc's mmap and trim thresholds to 1 GiB in every training process
(src/clustertune/train/host_malloc.py); ``CLUSTERTUNE_KEEP_FREED_MEMORY=0`` leaves glibc's
defaults, which is what a plain PyTorch or Trainer process gets. The same `clustertune run`
(the quickstart recipe, its model and data) runs both ways, alternated, each a fresh process;
printed per run: wall seconds, user and system CPU seconds, minor page faults, peak resident
memory (the largest process's). Start-up is included: it is the same on both sides.

    .venv/bin/python benchmarks/host_malloc.py                      # 40 steps, 3 runs of each
    .venv/bin/python benchmarks/host_malloc.py --procs 2            # two ranks (torchrun) a run
    .venv/bin/python benchmarks/host_malloc.py --smoke              # 2 steps of a 1-layer model, once

The last line is ``ratio=X``: the median CPU seconds with glibc's defaults over the median with
freed memory kept (above 1: keeping it is cheaper).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = {"glibc default": "0", "kept": "1"}


def one_run(exe: Path, args: list[str], env: dict[str, str], logs: Path) -> dict[str, float]:
    """One `clustertune run` in a fresh process; its resource use and its reaped children's
    (the ranks, through torchrun), from ``wait4``."""
    with open(logs / "out.txt", "w") as out, open(logs / "err.txt", "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([str(exe), "run", *args], stdout=out, stderr=err, env=env)
        _, status, use = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"clustertune run failed ({proc.returncode}):\n{(logs / 'err.txt').read_text()[-3000:]}")
    return {"wall": wall, "user": use.ru_utime, "sys": use.ru_stime, "faults": use.ru_minflt,
            "rss_mib": use.ru_maxrss / 1024}  # KiB: the largest process's peak


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3, help="runs of each side, alternated")
    p.add_argument("--procs", type=int, default=1, help="processes a run (2 or more: through torchrun)")
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = p.parse_args(argv)
    size: list[str] = []
    if a.smoke:
        a.steps, a.rounds = 2, 1
        size = ["model.config_overrides.n_layer=1", "model.config_overrides.n_embd=64",
                "model.tokenizer_vocab_size=512", "train.batch_size=4", "data.block_size=64"]
    exe = Path(sys.executable).with_name("clustertune")
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
               "CLUSTERTUNE_RUNS": str(Path(d) / "runs"), "CLUSTERTUNE_CACHE": str(Path(d) / "cache")}
        common = ["quickstart", *size, "train.eval_at_start=false", "train.save_every=null", "train.eval_every=null", "--no-progress"]
        if a.procs > 1:
            common.append(f"launch.procs_per_node={a.procs}")
        if not a.smoke:  # tokenizer and data prepared once, before anything is timed
            one_run(exe, [*common, "train.max_steps=1"], env, Path(d))
        rows: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
        for i in range(a.rounds):
            for side in SIDES if i % 2 == 0 else reversed(SIDES):
                r = one_run(exe, [*common, f"train.max_steps={a.steps}"], {**env, "CLUSTERTUNE_KEEP_FREED_MEMORY": SIDES[side]}, Path(d))
                rows[side].append(r)
                print(f"run {i + 1} {side:<14} wall {r['wall']:6.2f} s  user {r['user']:6.2f} s  sys {r['sys']:5.2f} s  "
                      f"faults {r['faults']:>9,}  peak RSS {r['rss_mib']:,.0f} MiB", flush=True)
    cpu = {side: statistics.median(r["user"] + r["sys"] for r in rs) for side, rs in rows.items()}
    print(f"quickstart model, {a.steps} steps, {a.procs} process(es), OMP_NUM_THREADS={env['OMP_NUM_THREADS']}; medians:")
    for side, rs in rows.items():
        print(f"  {side:<14} CPU {cpu[side]:6.2f} s  sys {statistics.median(r['sys'] for r in rs):5.2f} s  "
              f"wall {statistics.median(r['wall'] for r in rs):6.2f} s  faults {statistics.median(r['faults'] for r in rs):>11,.0f}  "
              f"peak RSS {statistics.median(r['rss_mib'] for r in rs):,.0f} MiB")
    print(f"ratio={cpu['glibc default'] / cpu['kept']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
