"""LoRA, DoRA and QLoRA in one process: only the adapter trains, checkpoints hold it alone,
``model/`` is a PEFT adapter directory and a merged copy loads with transformers alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.adapter_fixtures import lora_recipe
from tests.conftest import read_jsonl, with_

pytestmark = pytest.mark.slow


def run(recipe: dict[str, Any], root: Path, overrides: list[str] | None = None) -> Any:
    import clustertune as ct

    r = ct.run(ct.load_recipe(recipe, overrides or []), runs_root_dir=root, show_progress=False)
    assert r.state.value == "COMPLETED", r.info.get("reason")
    return r


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"}


def final_eval(run_dir: Path) -> float:
    return float(json.loads((run_dir / "summary.json").read_text())["final_eval"]["eval_loss"])


def eval_loss(model: Any, run_dir: Path) -> float:
    """Mean loss of ``model`` over the run's evaluation blocks, computed here without clustertune's loop."""
    import clustertune as ct
    from clustertune.data.staging import open_run_data
    from clustertune.runs.paths import RunPaths

    recipe = ct.load_recipe(run_dir / "recipe.yaml")
    _, blocks = open_run_data(recipe, RunPaths(run_dir), 0, None)
    ids = torch.from_numpy(blocks.input_ids.astype("int64"))
    with torch.no_grad():
        return float(model.eval()(input_ids=ids, labels=ids).loss)


def test_lora_trains_the_adapter_alone_and_saves_a_peft_directory_and_a_merged_model(
        llama_base: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    before = load_file(str(llama_base / "model.safetensors"))
    r = run(lora_recipe(llama_base, save_merged=True), tmp_path, ["train.save_every=6"])
    got = losses(r.paths.root)
    assert got[12] < got[4] - 0.03  # it learns

    # The checkpoint holds the adapter's weights and their optimizer state only.
    ckpt = r.paths.checkpoint(6)
    weights = load_file(str(ckpt / "model.safetensors"))
    assert weights and all(".lora_A." in k or ".lora_B." in k for k in weights), sorted(weights)[:5]
    n_lora = sum(t.numel() for t in weights.values())
    # 2 layers x (4 attention projections 64->64, 3 MLP projections 64<->128) at rank 4
    assert n_lora == 2 * (4 * 4 * (64 + 64) + 3 * 4 * (64 + 128))
    opt = torch.load(ckpt / "optimizer.pt", weights_only=False)
    assert sum(v.numel() for s in opt["state"].values() for k, v in s.items() if k != "step") == 2 * n_lora
    state = json.loads((ckpt / "state.json").read_text())
    assert set(state["adapter"]["base"]) == {"content_xxh3"}
    assert state["adapter"]["settings"]["rank"] == 4 and state["adapter"]["settings"]["type"] == "lora"

    # model/ is a PEFT adapter directory: onto the untouched base it gives the run's eval loss.
    assert (r.paths.model / "adapter_config.json").is_file() and not (r.paths.model / "config.json").exists()
    base = AutoModelForCausalLM.from_pretrained(str(llama_base))
    assert all(torch.equal(base.state_dict()[k], v) for k, v in before.items())
    tuned = PeftModel.from_pretrained(base, str(r.paths.model))
    assert abs(eval_loss(tuned, r.paths.root) - final_eval(r.paths.root)) < 1e-4
    # The merged copy is a plain save_pretrained directory with the tokenizer.
    merged = AutoModelForCausalLM.from_pretrained(str(r.paths.merged_model))
    assert (r.paths.merged_model / "tokenizer.json").is_file()
    assert abs(eval_loss(merged, r.paths.root) - final_eval(r.paths.root)) < 1e-4


def test_dora_trains_magnitudes_and_saves_modules_and_token_rows(llama_base: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    r = run(lora_recipe(llama_base, type="dora", target_modules=["q_proj", "v_proj"], modules_to_save=["lm_head"],
                        trainable_token_indices=[0, 1, "Ġthe"]), tmp_path, ["train.save_every=6"])
    names = set(load_file(str(r.paths.checkpoint(6) / "model.safetensors")))
    assert any("lora_magnitude_vector" in n for n in names)
    assert any("lm_head.modules_to_save" in n for n in names)
    assert any("trainable_tokens_delta" in n for n in names)
    assert not any(n.endswith("k_proj.weight") or "mlp" in n for n in names)
    tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(llama_base)), str(r.paths.model))
    assert abs(eval_loss(tuned, r.paths.root) - final_eval(r.paths.root)) < 1e-4


def test_qlora_loads_the_base_in_4bit_and_trains(llama_base: Path, tmp_path: Path) -> None:
    import bitsandbytes as bnb

    import clustertune as ct
    from clustertune.models.build import build_model, resolve_config
    from transformers import AutoTokenizer

    recipe = ct.load_recipe(lora_recipe(llama_base, type="qlora"))
    tok = AutoTokenizer.from_pretrained(str(llama_base))
    model = build_model(recipe, resolve_config(recipe, tok), tok)
    four_bit = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(four_bit) == 14  # every projection of both layers; the output head stays 16/32-bit
    assert {p.dtype for p in model.parameters() if p.requires_grad} == {torch.float32}
    r = run(lora_recipe(llama_base, type="qlora"), tmp_path)
    got = losses(r.paths.root)
    assert got[12] < got[4] - 0.03
    assert (r.paths.model / "adapter_config.json").is_file()


def test_lora_with_activation_checkpointing_gives_the_same_steps(llama_base: Path, tmp_path: Path) -> None:
    import clustertune as ct
    from clustertune.models.build import build_model, resolve_config
    from transformers import AutoTokenizer

    # Without input gradients, reentrant checkpointing would leave the adapter without gradients:
    # the model is built with its embedding output requiring them (whatever transformers does later).
    recipe = ct.load_recipe(with_(lora_recipe(llama_base), train={"gradient_checkpointing": True}))
    tok = AutoTokenizer.from_pretrained(str(llama_base))
    model = build_model(recipe, resolve_config(recipe, tok), tok)
    assert model.get_input_embeddings()(torch.tensor([[1, 2]])).requires_grad
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.train()
    model(input_ids=torch.tensor([[1, 2, 3, 4]]), labels=torch.tensor([[1, 2, 3, 4]])).loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters()
               if p.requires_grad and "lora_B" in n)  # A gets none while B is 0

    plain = losses(run(lora_recipe(llama_base), tmp_path / "plain").paths.root)
    ckpt = losses(run(with_(lora_recipe(llama_base), train={"gradient_checkpointing": True}),
                      tmp_path / "ckpt").paths.root)
    assert max(abs(plain[s] - ckpt[s]) for s in plain) < 1e-5
    assert ckpt[12] < ckpt[4] - 0.03
