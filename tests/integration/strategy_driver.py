"""Node side of one run under ``torch.distributed.run``: what each rank of a launched job does.

    python -m torch.distributed.run --standalone --nproc_per_node 2 \\
        tests/integration/strategy_driver.py RUN_DIR [CHECKPOINT_TO_RESUME] [--sizes 4x128,6x256]

RUN_DIR holds the resolved recipe.yaml, the tokenizer and data.json (the prepared data), so
no rank tokenizes anything.
Every rank runs clustertune's node-side ``execute``: data, model, strategy, the loop, the
final gathered save.

``--also RUN_DIR2[::CHECKPOINT] ...``: afterwards, in the same processes, each of these run
directories (their recipes may name other strategies and models), resumed from CHECKPOINT
where one is given: a matrix of small runs for the price of one launch.

``--sizes LAYERSxWIDTH,...``: afterwards, in the same processes, one more step of the same
recipe for each of these model shapes, each in RUN_DIR/sizes/LAYERSxWIDTH, so that the state
each rank holds (the loop's ``state_memory`` metrics row) is recorded for several model sizes
without launching a job per size.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if __name__ == "__main__":  # as clustertune.train.entry starts a rank; the loop releases it
    from clustertune import startup

    startup.hold()


def sized_run(run_dir: Path, layers: int, width: int) -> Path:
    """RUN_DIR's recipe with another model shape, one step, as a run directory of its own."""
    import yaml

    from clustertune.recipe.load import load_recipe

    sub = run_dir / "sizes" / f"{layers}x{width}"
    plain = load_recipe(run_dir / "recipe.yaml").to_plain()
    plain["model"]["config_overrides"].update({"n_layer": layers, "n_embd": width})
    plain["train"].update({"max_steps": 1, "save_every": None, "eval_at_start": False})
    plain["data"]["max_eval_samples"] = 8
    if os.environ.get("RANK", "0") == "0":
        sub.mkdir(parents=True)
        (sub / "recipe.yaml").write_text(yaml.safe_dump(plain))
        shutil.copytree(run_dir / "tokenizer", sub / "tokenizer")
        shutil.copy2(run_dir / "data.json", sub / "data.json")
    return sub


def main() -> None:
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths
    from clustertune.train.execute import execute

    p = argparse.ArgumentParser()
    p.add_argument("run_dir", type=Path)
    p.add_argument("resume", type=Path, nargs="?")
    p.add_argument("--sizes", default="")
    p.add_argument("--also", nargs="*", default=[])
    a = p.parse_args()
    # The deprecation warnings DeepSpeed triggers on every collective would bury the log.
    warnings.filterwarnings("ignore", category=FutureWarning)
    if os.environ.get("RANK", "0") == "0":
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths = RunPaths(a.run_dir)
    sizes = [tuple(int(x) for x in s.split("x")) for s in a.sizes.split(",") if s]
    # Rank 0 writes the extra run directories first (the process group comes and goes with
    # each run, so the others wait for a file rather than a barrier).
    subs = [sized_run(a.run_dir, layers, width) for layers, width in sizes]
    ready = a.run_dir / "sizes" / "ready"
    if sizes and os.environ.get("RANK", "0") == "0":
        ready.touch()
    deadline = time.monotonic() + 120
    while sizes and not ready.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{ready} never appeared")
        time.sleep(0.1)
    also = [(Path(d), Path(c) if c else None) for d, _, c in (spec.partition("::") for spec in a.also)]
    if subs or also:
        # One process group for all the runs of this launch: Accelerate's end_training destroys
        # it after each run, and a gloo group made again under the same launcher store can hang
        # in its connect. Each run finds it up (Accelerate then does not create one).
        import torch.distributed as dist

        destroy = dist.destroy_process_group
        dist.destroy_process_group = lambda group=None: None
    execute(load_recipe(paths.recipe), paths, a.resume, show_progress=False)
    for sub in subs:
        execute(load_recipe(sub / "recipe.yaml"), RunPaths(sub), None, show_progress=False)
    for run_dir, resume in also:
        execute(load_recipe(run_dir / "recipe.yaml"), RunPaths(run_dir), resume, show_progress=False)
    if subs or also:
        destroy()


if __name__ == "__main__":
    main()
    from clustertune.train.attempt import exit_rank

    exit_rank(0)  # as clustertune's own ranks end: no interpreter teardown with gloo threads alive
