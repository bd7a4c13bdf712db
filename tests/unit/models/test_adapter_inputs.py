"""Bad adapter settings: each a typed error naming the key and the fix, nothing written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from clustertune.errors import UserError, ModelError, RecipeError
from clustertune.extras import install_hint
from tests.adapter_fixtures import lora_recipe
from tests.helpers import with_


def load(recipe: dict, overrides: list[str] | None = None):
    import clustertune as ct

    return ct.load_recipe(recipe, overrides or [])


def test_rank_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"model\.adapter\.rank: .*greater than or equal to 1"):
        load(lora_recipe(tmp_path, rank=0))


def test_qlora_with_offload_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"train\.offload: qlora.*train\.offload=none"):
        load(with_(lora_recipe(tmp_path, type="qlora"), train={"strategy": "fsdp", "offload": "params"}))


def test_adapter_on_a_fresh_model_asks_for_pretrained_weights() -> None:
    from tests.helpers import TINY_CAUSAL

    recipe = with_(TINY_CAUSAL)
    recipe["model"]["adapter"] = {"rank": 4}
    with pytest.raises(RecipeError, match=r"model\.adapter: .*set model\.name_or_path"):
        load(recipe)


def run_fails(recipe: dict, runs_root: Path, match: str) -> UserError:
    import clustertune as ct

    # Refused by the preflight that validate shares (a RecipeError listing every problem).
    with pytest.raises(UserError, match=match) as err:
        ct.run(load(recipe), runs_root_dir=runs_root, show_progress=False)
    assert not runs_root.exists() or not any(runs_root.iterdir())  # refused before a run directory exists
    return err.value


def test_target_modules_matching_nothing_lists_the_models_layers(llama_base: Path, runs_root: Path) -> None:
    err = run_fails(lora_recipe(llama_base, target_modules=["q_proj", "c_attn"]), runs_root,
                    r"model\.adapter\.target_modules: 'c_attn' match")
    assert "q_proj" not in str(err).split("match")[0]  # only the missing name is named
    for name in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
        assert name in str(err)


def test_one_string_is_a_regular_expression_and_says_so(llama_base: Path, runs_root: Path) -> None:
    run_fails(lora_recipe(llama_base, target_modules="q_proj"), runs_root,
              r"'q_proj' match\(es\) no module of LlamaForCausalLM \(one string is a regular expression")
    import clustertune as ct

    run = ct.run(load(lora_recipe(llama_base, target_modules=r".*\.(q|v)_proj"), ["train.max_steps=1"]),
                 runs_root_dir=runs_root, show_progress=False)
    assert run.state.value == "COMPLETED"


def test_a_module_peft_cannot_wrap_is_a_model_error(llama_base: Path, runs_root: Path) -> None:
    # RMSNorm layers exist but are no layer type LoRA supports.
    run_fails(lora_recipe(llama_base, target_modules=["input_layernorm"]), runs_root,
              r"model\.adapter: PEFT cannot put a lora adapter on LlamaForCausalLM .*q_proj")


def test_qlora_without_bitsandbytes_says_how_to_install(llama_base: Path, runs_root: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # as if it were not installed: import fails
    run_fails(lora_recipe(llama_base, type="qlora"), runs_root, re.escape(f"`{install_hint('qlora')}`"))


def test_unknown_trainable_token_is_named(llama_base: Path, runs_root: Path) -> None:
    import clustertune as ct
    from clustertune.models.adapters import apply_adapter
    from transformers import AutoModelForCausalLM, AutoTokenizer

    recipe = load(lora_recipe(llama_base, trainable_token_indices=["<|not-a-token|>"]))
    model = AutoModelForCausalLM.from_pretrained(str(llama_base))
    with pytest.raises(ModelError, match=r"trainable_token_indices: '<\|not-a-token\|>' is not a token"):
        apply_adapter(recipe, model, AutoTokenizer.from_pretrained(str(llama_base)))
    del ct

