"""Host memory of each rank while a sharded run builds and shards its model (2 CPU ranks).

    python benchmarks/fsdp_build_memory.py [--layers 12] [--width 768] [--strategy fsdp|zero3]

Trains a GPT-2 shape (12 x 768 by default, ~85M parameters, 342 MB in fp32) for one step
under FSDP (or DeepSpeed ZeRO-3) on 2 local CPU ranks (``torch.distributed.run``, the
node-side ``execute`` on each) and prints, per rank, the resident memory before and after
building the model and the peak resident memory up to the end of sharding
(``VmRSS``/``VmHWM`` from /proc/self/status). With ``PYTHONPATH`` at an older checkout's
``src`` it measures that code the same way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def status_mib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    return -1


def rank_side(run_dir: Path, report: Path) -> None:
    """One rank: the node side of the run, with its memory noted after build and after sharding."""
    import clustertune.train.execute as node
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths

    paths = RunPaths(run_dir)
    recipe = load_recipe(paths.recipe)
    if recipe.train.strategy == "deepspeed":
        from clustertune.train.strategies.zero import DeepSpeedStrategy as Made
    else:
        from clustertune.train.strategies.accel import AccelerateStrategy as Made
    rank = os.environ.get("RANK", "0")
    notes: list[str] = []

    def noted(label: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(*a, **k):  # type: ignore[no-untyped-def]
            before = status_mib("VmRSS")
            out = fn(*a, **k)
            notes.append(f"rank {rank}: {label} {before} -> {status_mib('VmRSS')} MiB resident, "
                         f"peak so far {status_mib('VmHWM')} MiB")
            return out
        return wrapped

    # The whole build as the strategy does it (ZeRO-3 builds into partitions, and rank 0 of a
    # fresh model builds it once more whole); older code without Strategy.build: the model build.
    if hasattr(Made, "build"):
        Made.build = noted("build", Made.build)
    else:
        node.build_model = noted("build", node.build_model)
    Made.prepare = noted("shard", Made.prepare)
    node.execute(recipe, paths, None, show_progress=False)
    with report.open("a") as f:
        f.write("\n".join(notes) + "\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--strategy", choices=["fsdp", "zero3"], default="fsdp")
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    p.add_argument("--rank-side", nargs=2, metavar=("RUN_DIR", "REPORT"))
    a = p.parse_args()
    if a.smoke:
        a.layers, a.width = 2, 64
    for k, v in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(k, v)
    if a.rank_side:
        rank_side(Path(a.rank_side[0]), Path(a.rank_side[1]))
        return
    import yaml

    import clustertune as ct

    sys.path.insert(0, str(ROOT))
    from tests.helpers import TINY_CAUSAL, with_

    root = Path(tempfile.mkdtemp(prefix=f"{a.strategy}-build-"))
    shape = {"n_layer": a.layers, "n_embd": a.width, "n_head": max(1, a.width // 64), "n_positions": 64}
    recipe = with_(TINY_CAUSAL, model={"config_overrides": shape}, data={**TINY_CAUSAL["data"], "max_eval_samples": 8},
                   train={"batch_size": 2, "max_steps": 1, "log_every": 1, "eval_at_start": False, "save_every": None,
                          **({"strategy": "deepspeed", "zero_stage": 3} if a.strategy == "zero3" else {"strategy": "fsdp"})})
    # The prepared data and tokenizer, from a one-step run of a tiny model on one process.
    tiny = with_(recipe, model={"config_overrides": {"n_layer": 1, "n_embd": 64, "n_head": 2, "n_positions": 64}},
                 train={"strategy": "ddp", "zero_stage": None})
    prepared = ct.run(ct.load_recipe(tiny), runs_root_dir=root / "prepare", show_progress=False).paths.root
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(ct.load_recipe(recipe).to_plain()))
    shutil.copytree(prepared / "tokenizer", run_dir / "tokenizer")
    shutil.copy2(prepared / "data.json", run_dir / "data.json")
    report = root / "report.txt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(Path(__file__).resolve()), "--rank-side", str(run_dir), str(report)]
    out = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the ranks failed (exit {out.returncode}):\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    print("".join(sorted(report.read_text().splitlines(keepends=True))), end="")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
