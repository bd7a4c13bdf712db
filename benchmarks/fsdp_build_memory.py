"""Host memory of each rank while an FSDP run builds and shards its model (2 CPU ranks).

    python benchmarks/fsdp_build_memory.py [--layers 12] [--width 768]

Trains a GPT-2 shape (12 x 768 by default, ~85M parameters, 342 MB in fp32) for one step
under FSDP on 2 local CPU ranks (``torch.distributed.run``, the node-side ``execute`` on each)
and prints, per rank, the resident memory before and after building the model and the peak
resident memory up to the end of sharding (``VmRSS``/``VmHWM`` from /proc/self/status).
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
    import clustertune.train.entry as entry
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths
    from clustertune.train.strategies.accel import AccelerateStrategy

    rank = os.environ.get("RANK", "0")
    build, prepare = entry.build_model, AccelerateStrategy.prepare
    notes: list[str] = []

    def noted_build(*a, **k):  # type: ignore[no-untyped-def]
        before = status_mib("VmRSS")
        model = build(*a, **k)
        notes.append(f"rank {rank}: build {before} -> {status_mib('VmRSS')} MiB resident")
        return model

    def noted_prepare(self, *a, **k):  # type: ignore[no-untyped-def]
        out = prepare(self, *a, **k)
        notes.append(f"rank {rank}: sharded, {status_mib('VmRSS')} MiB resident, peak so far {status_mib('VmHWM')} MiB")
        return out

    entry.build_model, AccelerateStrategy.prepare = noted_build, noted_prepare
    paths = RunPaths(run_dir)
    entry.execute(load_recipe(paths.recipe), paths, None, show_progress=False)
    with report.open("a") as f:
        f.write("\n".join(notes) + "\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--rank-side", nargs=2, metavar=("RUN_DIR", "REPORT"))
    a = p.parse_args()
    for k, v in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(k, v)
    if a.rank_side:
        rank_side(Path(a.rank_side[0]), Path(a.rank_side[1]))
        return
    import yaml

    import clustertune as ct

    sys.path.insert(0, str(ROOT))
    from tests.helpers import TINY_CAUSAL, with_

    root = Path(tempfile.mkdtemp(prefix="fsdp-build-"))
    shape = {"n_layer": a.layers, "n_embd": a.width, "n_head": max(1, a.width // 64), "n_positions": 64}
    recipe = with_(TINY_CAUSAL, model={"config_overrides": shape}, data={**TINY_CAUSAL["data"], "max_eval_samples": 8},
                   train={"strategy": "fsdp", "batch_size": 2, "max_steps": 1, "log_every": 1,
                          "eval_at_start": False, "save_every": None})
    # The prepared data and tokenizer, from a one-step run of a tiny model on one process.
    tiny = with_(recipe, model={"config_overrides": {"n_layer": 1, "n_embd": 64, "n_head": 2, "n_positions": 64}},
                 train={"strategy": "ddp"})
    prepared = ct.run(ct.load_recipe(tiny), runs_root_dir=root / "prepare", show_progress=False).paths.root
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(ct.load_recipe(recipe).to_plain()))
    shutil.copytree(prepared / "tokenizer", run_dir / "tokenizer")
    shutil.copy2(prepared / "data.json", run_dir / "data.json")
    report = root / "report.txt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(Path(__file__).resolve()), "--rank-side", str(run_dir), str(report)]
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True)
    print("".join(sorted(report.read_text().splitlines(keepends=True))), end="")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
