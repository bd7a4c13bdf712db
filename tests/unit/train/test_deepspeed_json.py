"""A user's DeepSpeed JSON, as people copy them from HPC guides: read when the recipe is
validated (not first on the nodes), legacy spellings mapped, blocks the loop would ignore refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustertune.api import devices_of
from clustertune.launch.submit import dry_run_text, launch
from clustertune.recipe.load import load_recipe
from clustertune.train.ds_config import DeepSpeedConfigError, check_deepspeed_json, deepspeed_config
from tests.helpers import TINY_CAUSAL, cli, with_


def ds_recipe(tmp_path: Path, content: object, **train):
    path = tmp_path / "ds.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return load_recipe(with_(TINY_CAUSAL, train={"strategy": "deepspeed", "deepspeed_config": str(path), **train},
                             launch={"backend": "slurm", "nodes": 2, "gpus_per_node": 4}))


def test_broken_json_fails_validate_dry_run_and_launch_before_anything_exists(tmp_path: Path) -> None:
    r = ds_recipe(tmp_path, '{"zero_optimization": {"stage": 2, "overlap_comm": False,},}')
    for check in (lambda: check_deepspeed_json(r), lambda: dry_run_text(r, tmp_path / "runs"),
                  lambda: launch(r, runs_root_dir=tmp_path / "runs")):
        with pytest.raises(DeepSpeedConfigError, match="not valid JSON.*true/false/null.*trailing commas"):
            check()
    assert not (tmp_path / "runs").exists()


def test_validate_exits_2_on_a_contradicting_json_and_estimate_memory_uses_the_launch_section(tmp_path: Path) -> None:
    import yaml

    r = ds_recipe(tmp_path, {"zero_optimization": True})
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(r.to_plain()))
    out = cli("validate", str(recipe))
    assert out.returncode == 2, out.stderr
    assert "zero_optimization: true means ZeRO stage 1 to DeepSpeed" in out.stderr and "Traceback" not in out.stderr
    # 2 nodes x 4 GPUs: ZeRO-3 shards over 8 devices, not 1.
    est = cli("estimate-memory", str(recipe), "train.deepspeed_config=null", "train.zero_stage=3")
    assert est.returncode == 0, est.stderr
    assert "8 device(s)" in est.stdout


@pytest.mark.parametrize(("content", "train", "words"), [
    ({"zero_optimization": True}, {}, 'write "zero_optimization": {"stage": 2} or set train.zero_stage=1'),
    ({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100}}}, {}, "scheduler: the recipe's schedule runs"),
    ({"optimizer": {"type": "SGD", "params": {"lr": 0.1}}}, {}, "optimizer.type: 'SGD'.*remove the optimizer block"),
    ({"optimizer": {"type": "Lamb"}}, {}, "'Lamb'"),
    ({"optimizer": {"type": "Adam", "params": {"adam_w_mode": False}}}, {}, "'Adam'"),
    ({"zero_optimization": {"stage": 2, "cpu_offload": True}}, {}, "offload_optimizer.device: 'cpu'.*train.offload is 'none'"),
])
def test_legacy_and_ignored_blocks_are_refused_naming_the_recipe_key(tmp_path: Path, content: dict, train: dict,
                                                                     words: str) -> None:
    r = ds_recipe(tmp_path, content, **train)
    with pytest.raises(DeepSpeedConfigError, match=words):
        check_deepspeed_json(r)


def test_what_has_a_clear_meaning_is_mapped_onto_the_recipe(tmp_path: Path) -> None:
    # `true` is stage 1 to DeepSpeed: it agrees with a recipe at stage 1 and becomes that dict.
    cfg = deepspeed_config(ds_recipe(tmp_path, {"zero_optimization": True}, zero_stage=1), 8, "bf16")
    assert cfg["zero_optimization"]["stage"] == 1
    # Legacy cpu_offload is optimizer offload; DeepSpeed's "Adam" is AdamW.
    cfg = deepspeed_config(ds_recipe(tmp_path, {"zero_optimization": {"cpu_offload": True},
                                                "optimizer": {"type": "Adam", "params": {"lr": "auto"}}},
                                     offload="optimizer"), 8, "bf16")
    assert "cpu_offload" not in cfg["zero_optimization"]
    assert cfg["zero_optimization"]["offload_optimizer"]["device"] == "cpu" and cfg["optimizer"]["type"] == "AdamW"
    # precision: auto is decided on the node: a bf16 JSON is not a contradiction before launch.
    check_deepspeed_json(ds_recipe(tmp_path, {"bf16": {"enabled": True}}))


def test_memory_estimate_spans_the_launch_sections_devices(tmp_path: Path) -> None:
    r = ds_recipe(tmp_path, {"zero_optimization": {"stage": 3}}, zero_stage=3)
    assert devices_of(r) == 8
    assert devices_of(load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "gres": "gpu:a100:2"}))) == 2
    assert devices_of(load_recipe(with_(TINY_CAUSAL, launch={"procs_per_node": 3}))) == 3
    assert devices_of(load_recipe(TINY_CAUSAL)) == 1
