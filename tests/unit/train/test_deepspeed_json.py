"""A user's DeepSpeed JSON, as people copy them from HPC guides: read when the recipe is
validated (not first on the nodes), the source of truth for stage, offload, optimizer and
scheduler, its "auto" values filled from the recipe, contradictions named with both places."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustertune.errors import RecipeError

from clustertune.api import devices_of
from clustertune import api
from clustertune.launch.decision import planned_world_size
from clustertune.recipe.load import load_recipe
from clustertune.recipe.ds_config import DeepSpeedConfigError, deepspeed_config, resolve_deepspeed_json, with_deepspeed_json
from tests.helpers import TINY_CAUSAL, cli_here, with_


def ds_recipe(tmp_path: Path, content: object, **train):
    path = tmp_path / "ds.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    # precision auto, as a recipe that leaves it to the JSON says (the test recipes pin fp32)
    return load_recipe(with_(TINY_CAUSAL, train={"strategy": "deepspeed", "deepspeed_config": str(path),
                                                 "precision": "auto", **train},
                             launch={"backend": "slurm", "nodes": 2, "gpus_per_node": 4}))


def check_json(r):
    """The JSON checked before anything is submitted, as validate (api/preflight.py) and launch
    (launch/submit.py) check it: resolved against the recipe with the plan's world size."""
    return resolve_deepspeed_json(r, planned_world_size(r)).recipe


def test_broken_json_fails_validate_dry_run_and_launch_before_anything_exists(tmp_path: Path) -> None:
    r = ds_recipe(tmp_path, '{"zero_optimization": {"stage": 2, "overlap_comm": False,},}')
    with pytest.raises(DeepSpeedConfigError, match="not valid JSON.*true/false/null.*trailing commas"):
        check_json(r)
    # The one door's preflight gathers it with the key it belongs to, for a dry run and a run alike.
    for check in (lambda: api.dry_run(r, runs_root_dir=tmp_path / "runs"),
                  lambda: api.run(r, runs_root_dir=tmp_path / "runs")):
        with pytest.raises(RecipeError, match="train.deepspeed_config: .*not valid JSON.*true/false/null.*trailing commas"):
            check()
    assert not (tmp_path / "runs").exists()


def test_validate_exits_2_on_a_contradicting_json_and_estimate_memory_uses_the_launch_section(tmp_path: Path) -> None:
    import yaml

    r = ds_recipe(tmp_path, {"zero_optimization": {"stage": 3}}, zero_stage=2)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(r.to_plain()))
    out = cli_here("validate", str(recipe))
    assert out.returncode == 2, out.stderr
    assert f"zero_optimization.stage: 3 in {tmp_path / 'ds.json'}, but 2 from train.zero_stage" in out.stderr
    assert "Traceback" not in out.stderr
    # 2 nodes x 4 GPUs: ZeRO-3 shards over 8 devices, not 1.
    est = cli_here("estimate-memory", str(recipe), "train.deepspeed_config=null", "train.zero_stage=3")
    assert est.returncode == 0, est.stderr
    assert "8 device(s)" in est.stdout


@pytest.mark.parametrize(("content", "train", "words"), [
    ({"zero_optimization": {"stage": 3}}, {"zero_stage": 2}, r"zero_optimization.stage: 3 in \S+ds.json, but 2 from train.zero_stage"),
    ({"zero_optimization": False}, {"deepspeed_preset": "zero2-offload"},
     "zero_optimization.stage: 0 in .*, but 2 from train.deepspeed_preset=zero2-offload"),
    ({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}, {"offload": "none"},
     "'optimizer' offloaded in .*, but 'none' from train.offload"),
    ({"zero_optimization": {"stage": 2, "cpu_offload": True}}, {"offload": "none"}, "'optimizer' offloaded in"),
    ({"zero_optimization": {"stage": 7}}, {}, "7 in .* is not a ZeRO stage"),
    ({"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}}, {}, "combination DeepSpeed cannot run.*stage 0"),
    ({"optimizer": {"type": "SGD", "params": {"lr": 0.1}}}, {"lr": 0.001}, "optimizer.params.lr: 0.1 in .*, but 0.001 from train.lr"),
    ({"optimizer": {"type": "AdamW", "params": {"betas": [0.8, 0.9]}}}, {"adam_beta2": 0.95},
     r"optimizer.params.betas: \[0.8, 0.9\] in .*train.adam_beta1/train.adam_beta2"),
    ({"optimizer": {"type": "SGD", "params": {"momentum": "auto"}}}, {}, 'optimizer.params.momentum: "auto".*write one'),
    ({"optimizer": {"type": "Sgdd"}}, {}, "'Sgdd' .* neither a DeepSpeed optimizer nor a torch.optim class"),
    ({"optimizer": {"type": "Lamb"}}, {"device": "cpu"}, "'Lamb' .* runs only on CUDA GPUs.*SGD, Adam, AdamW or Adagrad"),
    ({"optimizer": {"type": "OneBitAdam"}}, {"device": "cpu"}, "'OneBitAdam' .* runs only on CUDA GPUs"),
    ({"optimizer": {"type": "ZeroOneAdam"}}, {"device": "cpu"}, "'ZeroOneAdam' .* runs only on CUDA GPUs"),
    ({"scheduler": {"type": "WarmupDecayLR"}}, {"lr_scheduler": "cosine"},
     "scheduler.type: 'WarmupDecayLR' in .* \\(linear\\), but 'cosine' from train.lr_scheduler"),
    ({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 100}}}, {"max_steps": 50, "warmup_steps": 10, "lr_scheduler": "constant"},
     "scheduler.params.warmup_num_steps: 100 in .*, but 10 from train.warmup_steps"),
    ({"train_micro_batch_size_per_gpu": 16}, {}, "train_micro_batch_size_per_gpu: 16 in .*, but 8 from train.batch_size"),
    ({"zero_optimization": {"stage": 2, "reduce_scatter": "auto"}}, {}, '"auto" for zero_optimization.reduce_scatter'),
])
def test_contradictions_name_both_places_and_what_cannot_run_here_is_refused(
        tmp_path: Path, content: dict, train: dict, words: str) -> None:
    r = ds_recipe(tmp_path, content, **train)
    with pytest.raises(DeepSpeedConfigError, match=words):
        check_json(r)


def test_the_json_decides_stage_offload_optimizer_and_scheduler(tmp_path: Path) -> None:
    # "Finetuning at scale": no ZeRO, SGD. Stage 0 is the run's, for every part that asks.
    sgd = {"zero_optimization": False, "train_micro_batch_size_per_gpu": "auto",
           "optimizer": {"type": "SGD", "params": {"lr": "auto", "momentum": 0.9}}}
    r = ds_recipe(tmp_path, sgd, lr=0.01)
    assert with_deepspeed_json(r).train.effective_zero_stage == 0 and r.train.effective_zero_stage == 2
    cfg = deepspeed_config(r, 2, "no", total_steps=10, hidden_size=64, cuda=False)
    assert cfg["zero_optimization"] == {"stage": 0} and cfg["train_micro_batch_size_per_gpu"] == 8
    assert cfg["optimizer"] == {"type": "SGD", "params": {"lr": 0.01, "momentum": 0.9}}
    # A ZeRO-3 + offload JSON as HF users write it, the recipe silent (or restating it).
    z3 = {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"},
                                "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                                "stage3_param_persistence_threshold": "auto"},
          "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
          "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                            "warmup_num_steps": "auto", "total_num_steps": "auto"}}}
    for train in ({}, {"zero_stage": 3, "offload": "params"}, {"deepspeed_preset": "zero3-offload"}):
        r = ds_recipe(tmp_path, z3, lr=1e-3, adam_beta2=0.95, weight_decay=0.01, lr_scheduler="linear",
                      **train)
        t = with_deepspeed_json(r).train
        assert (t.effective_zero_stage, t.effective_offload) == (3, "params")
        check_json(r)  # before the run: the step counts and sizes are still to come
        cfg = deepspeed_config(r, 2, "no", total_steps=50, hidden_size=64, cuda=False)
        zero = cfg["zero_optimization"]
        assert (zero["reduce_bucket_size"], zero["stage3_prefetch_bucket_size"],
                zero["stage3_param_persistence_threshold"]) == (64 * 64, int(0.9 * 64 * 64), 640)
        assert zero["offload_param"]["device"] == "cpu" and zero["offload_optimizer"]["device"] == "cpu"
        assert cfg["optimizer"]["params"] == {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.01,
                                              "torch_adam": False}  # offloaded: DeepSpeed's CPU Adam
        assert cfg["scheduler"]["params"] == {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 2,
                                              "total_num_steps": 50}
    # On the node the JSON decides: the resolved recipe there has every key written.
    node = load_recipe(r.to_plain())
    assert deepspeed_config(node, 2, "no", total_steps=50, hidden_size=64, cuda=False)["optimizer"] == cfg["optimizer"]
    # On the node every "auto" is filled, or the run says which it could not fill.
    with pytest.raises(DeepSpeedConfigError, match="reduce_bucket_size"):
        deepspeed_config(ds_recipe(tmp_path, z3, lr_scheduler="linear"), 2, "no", total_steps=50, hidden_size=None,
                         cuda=False)
    # Legacy cpu_offload is the optimizer offload; `true` is stage 1; DeepSpeed's Adam runs as torch's.
    r = ds_recipe(tmp_path, {"zero_optimization": {"cpu_offload": True}})
    assert with_deepspeed_json(r).train.effective_offload == "optimizer"
    assert deepspeed_config(ds_recipe(tmp_path, {"zero_optimization": True}), 8, "bf16")["zero_optimization"]["stage"] == 1
    cfg = deepspeed_config(ds_recipe(tmp_path, {"optimizer": {"type": "Adam", "params": {"lr": "auto"}}}), 8, "no")
    assert cfg["optimizer"]["type"] == "Adam" and cfg["optimizer"]["params"]["torch_adam"] is True
    # CUDA-only optimizers are the GPU's: accepted where one is (or may be: a SLURM job with GPUs).
    lamb = ds_recipe(tmp_path, {"optimizer": {"type": "Lamb", "params": {"lr": "auto"}}})
    check_json(lamb)
    assert deepspeed_config(lamb, 8, "bf16", cuda=True)["optimizer"]["type"] == "Lamb"
    with pytest.raises(DeepSpeedConfigError, match="'Lamb' .* runs only on CUDA GPUs"):
        deepspeed_config(lamb, 8, "bf16", cuda=False)
    # precision: auto is decided on the node: a bf16 JSON is not a contradiction before launch.
    check_json(ds_recipe(tmp_path, {"bf16": {"enabled": True}}))


def test_memory_estimate_spans_the_launch_sections_devices(tmp_path: Path) -> None:
    r = ds_recipe(tmp_path, {"zero_optimization": {"stage": 3}}, zero_stage=3)
    assert devices_of(r) == 8
    assert devices_of(load_recipe(with_(TINY_CAUSAL, launch={"backend": "slurm", "gres": "gpu:a100:2"}))) == 2
    assert devices_of(load_recipe(with_(TINY_CAUSAL, launch={"procs_per_node": 3}))) == 3
    assert devices_of(load_recipe(TINY_CAUSAL)) == 1
