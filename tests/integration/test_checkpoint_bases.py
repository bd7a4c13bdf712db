"""A run's checkpoint as another run's model: ``run:<run>@step-N`` as an SFT base, an RL policy or
reference; checked by the preflight, written out once, and known to ``runs rm``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

import clustertune as ct
from clustertune import api
from clustertune.cli.main import main
from clustertune.errors import RecipeError, RunError
from clustertune.runs.state import RunState
from tests.helpers import TINY_CAUSAL, with_
from tests.sft_fixtures import arithmetic_rows, write_jsonl


@pytest.fixture
def pretrained(runs_root: Path) -> ct.Run:
    """A tiny causal LM run of 7 steps with checkpoints at steps 3 and 6."""
    run = ct.run(ct.load_recipe(with_(TINY_CAUSAL, train={"max_steps": 7, "save_every": 3, "eval_at_start": False})),
                 show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    return run


def _sft(base: str, chats: Path, **train: object) -> dict:
    return {"name": "ckptsft", "task": "sft", "model": {"name_or_path": base},
            "data": {"train_files": [str(chats)], "max_length": 64, "validation_fraction": 0.1,
                     "sft": {"chat_template": "chatml", "generation_samples": 2, "max_new_tokens": 4}},
            "train": {"precision": "fp32", "batch_size": 4, "lr": 3e-3, "max_steps": 2, "log_every": 1,
                      "cpu_threads": 1, **train}}


def test_sft_from_a_checkpoint_writes_it_out_once_and_names_it(pretrained: ct.Run, runs_root: Path,
                                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chats = write_jsonl(tmp_path / "chats.jsonl", arithmetic_rows(60))
    ref = f"run:{pretrained.id}@step-3"
    (tmp_path / "sft.yaml").write_text(yaml.safe_dump(_sft(ref, chats)))
    # validate reads the checkpoint (signed, complete) and its run's final model's config: no write.
    assert main(["validate", str(tmp_path / "sft.yaml")]) == 0, capsys.readouterr()
    made = pretrained.paths.checkpoint_model(3)
    assert not made.exists()

    run = ct.run(ct.load_recipe(str(tmp_path / "sft.yaml")), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    resolved = yaml.safe_load(run.paths.recipe.read_text())
    assert resolved["model"]["name_or_path"] == str(made)
    # The model written out is the checkpoint's weights (step 3, not the final model of step 7).
    written = load_file(str(made / "model.safetensors"))
    saved = load_file(str(pretrained.paths.checkpoint(3) / "model.safetensors"))
    final = load_file(str(pretrained.paths.model / "model.safetensors"))
    key = "transformer.h.0.attn.c_attn.weight"
    assert (written[key] == saved[key]).all() and not (written[key] == final[key]).all()
    assert json.loads((made / "config.json").read_text())["n_positions"] == 64

    # A second run from the same checkpoint reuses the directory (not written again).
    stamp = (made / "model.safetensors").stat().st_mtime_ns
    again = ct.run(ct.load_recipe(with_(_sft(f"run:{pretrained.id[:14]}@step-00000003", chats), name="again")),
                   show_progress=False)
    assert again.state is RunState.COMPLETED, again.info.reason
    assert (made / "model.safetensors").stat().st_mtime_ns == stamp

    # The older run is still needed: runs rm refuses and names both runs using it.
    capsys.readouterr()
    assert main(["runs", "rm", pretrained.id]) == 2
    err = capsys.readouterr().err
    assert run.id in err and again.id in err


def test_bad_checkpoint_references_are_refused_before_a_run_exists(pretrained: ct.Run, runs_root: Path,
                                                                    tmp_path: Path) -> None:
    chats = write_jsonl(tmp_path / "chats.jsonl", arithmetic_rows(20))
    before = sorted(p.name for p in runs_root.iterdir())
    cases = {
        f"run:{pretrained.id}@step-7": r"model.name_or_path.*no complete checkpoint of step 7 \(its checkpoints: "
                                       r"step-3, step-6\)",
        f"run:{pretrained.id}@last": r"after '@' name a checkpoint as step-N",
        "run:nosuchrun@step-3": r"model.name_or_path.*no run 'nosuchrun'",
    }
    for ref, want in cases.items():
        with pytest.raises(RecipeError, match=want):
            api.validate((_sft(ref, chats)))
        with pytest.raises(RecipeError, match=want):
            ct.run(ct.load_recipe(_sft(ref, chats)), show_progress=False)
    # A checkpoint whose weights changed after it was signed is refused by its digest.
    weights = pretrained.paths.checkpoint(6) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(RecipeError, match=r"model.name_or_path: checkpoint file .*step-00000006.*is corrupt"):
        api.validate((_sft(f"run:{pretrained.id}@step-6", chats)))
    # The RL section's models go through the same checks.
    grpo = {"name": "g", "task": "rlhf", "data": {"dataset": "builtin:pydoc-prompts"},
            "train": {"batch_size": 4, "max_steps": 2},
            "rl": {"algorithm": "grpo", "policy": f"run:{pretrained.id}@step-9", "num_generations": 2,
                   "rewards": [{"function": "clustertune.rewards:char_fraction"}]}}
    with pytest.raises(RecipeError, match=r"rl.policy.*no complete checkpoint of step 9"):
        api.validate((grpo))
    assert sorted(p.name for p in runs_root.iterdir()) == before


def test_rl_models_named_by_checkpoint_become_its_model_directory(pretrained: ct.Run, runs_root: Path) -> None:
    from clustertune.use.bases import with_checkpoint_models

    ref = f"run:{pretrained.id}@step-3"
    recipe = ct.load_recipe({"name": "g", "task": "rlhf", "data": {"dataset": "builtin:pydoc-prompts"},
                             "train": {"batch_size": 4, "max_steps": 2},
                             "rl": {"algorithm": "grpo", "policy": ref, "reference": f"run:{pretrained.id}@step-6",
                                    "num_generations": 2,
                                    "rewards": [{"function": "clustertune.rewards:char_fraction"}]}})
    out = with_checkpoint_models(recipe, runs_root)
    assert out.rl.policy == str(pretrained.paths.checkpoint_model(3))
    assert out.rl.reference == str(pretrained.paths.checkpoint_model(6))
    assert (pretrained.paths.checkpoint_model(6) / "tokenizer_config.json").is_file()
    with pytest.raises(RunError, match=r"rl.policy: .*no complete checkpoint of step 4"):
        with_checkpoint_models(recipe.model_copy(update={"rl": recipe.rl.model_copy(
            update={"policy": f"run:{pretrained.id}@step-4"})}), runs_root)


def test_an_adapter_runs_checkpoint_is_merged_onto_its_base(sft_base: Path, runs_root: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from clustertune.use.bases import checkpoint_as_model
    from tests.sft_fixtures import sft_recipe

    recipe = sft_recipe(sft_base, write_jsonl(tmp_path / "c.jsonl", arithmetic_rows(40)))
    recipe["model"]["adapter"] = {"type": "lora", "rank": 4, "alpha": 8, "target_modules": ["c_attn"]}
    recipe["train"].update({"max_steps": 5, "save_every": 2})
    adapter_run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert adapter_run.state is RunState.COMPLETED, adapter_run.info.reason
    out = checkpoint_as_model(f"run:{adapter_run.id}@step-4", "model.name_or_path", runs_root)
    assert out is not None and not (out / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(out)
    base = AutoModelForCausalLM.from_pretrained(sft_base)
    name = "transformer.h.0.attn.c_attn.weight"
    # The adapter's update is in the merged weights; the untouched layers are the base's.
    assert not (merged.state_dict()[name] == base.state_dict()[name]).all()
    assert (merged.state_dict()["transformer.h.0.mlp.c_fc.weight"] == base.state_dict()["transformer.h.0.mlp.c_fc.weight"]).all()
