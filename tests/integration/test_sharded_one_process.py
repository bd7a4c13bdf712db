"""FSDP in a single process, without a launcher: the "bigger model on one GPU" case (FSDP with
offload) needs a process group even for one rank. Run in this process, in bf16, with a
checkpoint and a resume; afterwards the group and its variables are gone, so a later run in
the same process (here: the resume) starts clean."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from clustertune.runs.store import list_runs
from tests.helpers import TINY_CAUSAL, cli, read_jsonl, with_


def test_fsdp_in_one_process_trains_checkpoints_and_resumes(tmp_path: Path) -> None:
    import torch.distributed as dist

    import clustertune as ct
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths
    from clustertune.train import checkpoint as ckpt
    from clustertune.train.execute import execute

    recipe = with_(TINY_CAUSAL, train={"strategy": "fsdp", "precision": "bf16", "max_steps": 4, "log_every": 1,
                                       "save_every": 2, "eval_at_start": False},
                   data={**TINY_CAUSAL["data"], "max_eval_samples": 9})
    run = ct.run(ct.load_recipe(recipe), runs_root_dir=tmp_path / "a", show_progress=False)
    assert run.state.value == "COMPLETED"
    assert not dist.is_initialized() and "RANK" not in os.environ  # the group of one is undone

    saved = run.paths.checkpoints / "step-00000002"
    state = ckpt.verify_checkpoint(saved)
    assert state["strategy"] == "fsdp" and state["world_size"] == 1
    assert any(f.startswith("shards/") for f in state["files"]) and "rng-0.pt" in state["files"]
    losses = {r["step"]: r["loss"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train"}
    assert sorted(losses) == [1, 2, 3, 4]
    # Logged losses are fp32 figures, not bf16-rounded ones (bf16 keeps 8 significant bits).
    assert all(torch.tensor(v).bfloat16().item() != v for v in losses.values())

    # A fresh run directory resumes from step 2 in this same process (a group of one again).
    again = RunPaths(tmp_path / "b")
    again.root.mkdir()
    for name in ("recipe.yaml", "data.json"):
        shutil.copy2(run.paths.root / name, again.root / name)
    shutil.copytree(run.paths.tokenizer, again.tokenizer)
    shutil.copytree(saved, again.checkpoints / saved.name)
    execute(load_recipe(again.recipe), again, again.checkpoints / saved.name, show_progress=False)
    after = {r["step"]: r["loss"] for r in read_jsonl(again.metrics) if r["kind"] == "train"}
    assert sorted(after) == [3, 4] and max(abs(after[s] - losses[s]) for s in after) < 1e-4
    summary = json.loads(run.paths.summary.read_text())
    assert summary["eval_samples"] == 9 and summary["final_eval"]["eval_loss"] > 0
    assert not dist.is_initialized() and "RANK" not in os.environ


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_in_bf16_saves_its_fp32_master_weights(tmp_path: Path, stage: int) -> None:
    # DeepSpeed computes with 16-bit copies of the weights; what it steps, and what the other
    # strategies save, are fp32 weights. The final model must be those, not the 16-bit copies.
    from safetensors import safe_open


    need = "DeepSpeed is not installed: `bash scripts/setup.sh test` installs it (DS_BUILD_OPS=0)"
    if importlib.util.find_spec("deepspeed") is None:
        pytest.fail(need) if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1" else pytest.skip(need)
    recipe = with_(TINY_CAUSAL, train={"strategy": "deepspeed", "zero_stage": stage, "precision": "bf16",
                                       "max_steps": 2, "log_every": 1, "eval_at_start": False})
    # In a process of its own: DeepSpeed keeps its process group for the next run in a process,
    # which tests that follow in this one must not inherit.
    (tmp_path / "ds.yaml").write_text(yaml.safe_dump(recipe))
    # Where torch keeps what it compiles: DeepSpeed on CPU builds nothing a ZeRO run without
    # offload uses (its shared-memory all-reduce, for inference only, took ~30 s to compile).
    ext = tmp_path / "torch-extensions"
    out = cli("run", str(tmp_path / "ds.yaml"), "--no-progress", "--runs-root", str(tmp_path / "runs"),
              env={"TORCH_EXTENSIONS_DIR": str(ext)})
    assert out.returncode == 0, out.stderr
    assert not ext.exists() or not any(ext.iterdir()), sorted(p.name for p in ext.iterdir())
    (run,) = list_runs(tmp_path / "runs")
    with safe_open(str(run.paths.model / "model.safetensors"), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert {t.dtype for t in tensors.values()} == {torch.float32}
    # Not 16-bit values widened: fp32 masters after two AdamW steps are not all bf16-representable.
    w = tensors["transformer.h.0.mlp.c_fc.weight"]
    assert not torch.equal(w, w.bfloat16().float())
