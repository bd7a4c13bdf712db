"""LoRA, DoRA and QLoRA in one process: only the adapter trains, checkpoints hold it alone,
``model/`` is a PEFT adapter directory and a merged copy loads with transformers alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.adapter_fixtures import lora_recipe
from tests.helpers import read_jsonl, with_

pytestmark = pytest.mark.slow


def run(recipe: dict[str, Any], root: Path, overrides: list[str] | None = None) -> Any:
    import clustertune as ct

    r = ct.run(ct.load_recipe(recipe, overrides or []), runs_root_dir=root, show_progress=False)
    assert r.state.value == "COMPLETED", r.info.reason
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


@pytest.fixture(scope="module")
def lora_run(llama_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return run(lora_recipe(llama_base, save_merged=True), tmp_path_factory.mktemp("lora-runs"), ["train.save_every=6"])


def check_state_memory(run_dir: Path, key: str, world: int = 1, threshold: int | None = None) -> None:
    """Each rank's measured weights, gradients and optimizer state (the loop's state_memory row)
    within 10% of estimate-memory's figures for the run's recipe, adapter included."""
    import clustertune as ct
    from clustertune.models.build import resolve_config
    from clustertune.train import held_state, memory

    recipe = ct.load_recipe(run_dir / "recipe.yaml")
    shape = memory.model_shape(resolve_config(recipe, None), recipe.task, recipe)
    kw = {} if threshold is None else {"persistence_threshold": threshold}
    est = memory.estimate(shape, key, world, activations=0, **kw)
    (row,) = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "state_memory"]
    assert len(row["ranks"]) == world
    for rank, held in enumerate(row["ranks"]):
        for kind in held_state.KINDS:
            want, got = getattr(est, kind), held[kind]
            assert abs(got - want) <= 0.10 * want if want else got == 0, (run_dir.name, key, rank, kind, got, want)


def test_lora_trains_the_adapter_alone_and_saves_a_peft_directory_and_a_merged_model(
        llama_base: Path, lora_run: Any) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    before = load_file(str(llama_base / "model.safetensors"))
    r = lora_run
    check_state_memory(r.paths.root, "ddp")
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


def test_rl_policy_from_an_adapter_run_is_its_merged_model(lora_run: Any, tmp_path: Path) -> None:
    import shutil

    from transformers import AutoModelForCausalLM

    from clustertune.train.rl.sources import resolve_model

    ref = f"run:{lora_run.id}"
    assert resolve_model(ref, "rl.policy", str(lora_run.paths.root.parent)) == str(lora_run.paths.merged_model)
    # A run without save_merged: base + adapter are merged once, on first use, beside the adapter.
    copy = tmp_path / lora_run.id
    shutil.copytree(lora_run.paths.root, copy)
    shutil.rmtree(copy / "model-merged")
    path = resolve_model(ref, "rl.policy", str(tmp_path))
    assert path == str(copy / "model-merged")
    model = AutoModelForCausalLM.from_pretrained(path)
    assert abs(eval_loss(model, copy) - final_eval(copy)) < 1e-4
    # An RL recipe naming the run passes the RL preflight (policy architecture, tokenizer, rewards).
    import clustertune as ct
    from clustertune.train.rl import preflight_rl
    from tests.rl_fixtures import grpo_recipe

    preflight_rl(ct.load_recipe(grpo_recipe(ref, tmp_path)))


def test_dora_trains_magnitudes_and_saves_modules_and_token_rows(llama_base: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    r = run(lora_recipe(llama_base, type="dora", target_modules=["q_proj", "v_proj"], modules_to_save=["lm_head"],
                        trainable_token_indices=[0, 1, "Ġthe"]), tmp_path, ["train.save_every=6"])
    check_state_memory(r.paths.root, "ddp")
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
    check_state_memory(r.paths.root, "ddp")  # the 4-bit weights and their quantization state
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


def test_kill_9_then_resume_is_exact_and_refuses_other_adapter_settings_or_base(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    import yaml

    import clustertune as ct
    from clustertune.errors import CheckpointError
    from clustertune.runs.store import get_run
    from tests.adapter_fixtures import make_base
    from tests.helpers import cli, tree_snapshot

    base = make_base(tmp_path_factory.mktemp("base-to-change") / "base")
    recipe = with_(lora_recipe(base), train={"lr": 3e-2, "eval_at_start": False, "max_steps": 10, "save_every": 4,
                                             "log_every": 1})
    whole = run(recipe, tmp_path / "whole")

    root = tmp_path / "killed"
    path = tmp_path / "lora.yaml"
    path.write_text(yaml.safe_dump(ct.load_recipe(recipe).to_plain()))
    out = cli("run", str(path), env={"CLUSTERTUNE_FAULT_KILL_AT_STEP": "6", "CLUSTERTUNE_RUNS": str(root)})
    assert out.returncode != 0
    (killed_dir,) = [d for d in root.iterdir() if d.is_dir()]
    run_id = killed_dir.name
    assert [c.name for c in (killed_dir / "checkpoints").iterdir()] == ["step-00000004"]

    # Settings that shape the adapter must match the checkpoint's: named, and nothing changes.
    plain = yaml.safe_load((killed_dir / "recipe.yaml").read_text())
    good = (killed_dir / "recipe.yaml").read_text()
    plain["model"]["adapter"].update(rank=8, dropout=0.1, save_merged=True)  # save_merged only says what to write
    (killed_dir / "recipe.yaml").write_text(yaml.safe_dump(plain))
    get_run(run_id, root)  # reconciles the killed run to FAILED first (what any look at it does)
    before = tree_snapshot(killed_dir)
    with pytest.raises(CheckpointError, match=r"model\.adapter\.dropout: checkpoint 0\.0, now 0\.1; "
                                              r"model\.adapter\.rank: checkpoint 4, now 8\)"):
        ct.run(resume=run_id, runs_root_dir=root, show_progress=False)
    assert tree_snapshot(killed_dir) == before
    (killed_dir / "recipe.yaml").write_text(good)

    resumed = ct.run(resume=run_id, runs_root_dir=root, show_progress=False)
    assert resumed.state.value == "COMPLETED" and resumed.attempts[-1].resumed_from == "step-00000004"
    want, got = losses(whole.paths.root), losses(resumed.paths.root)
    assert sorted(got) == list(range(1, 11))
    assert max(abs(got[s] - want[s]) for s in want) < 1e-6  # exact: same data order, RNG and state
    assert abs(final_eval(resumed.paths.root) - final_eval(whole.paths.root)) < 1e-6

    # Another base at the same path (retrained, replaced): the run's checkpoints do not fit it.
    from clustertune.models.adapters import check_resume_recipe

    ckpt = resumed.paths.checkpoint(8)
    check_resume_recipe(ckpt, ct.load_recipe(resumed.paths.recipe))
    make_base(base, seed=1)
    with pytest.raises(CheckpointError, match="adapter of another base model"):
        check_resume_recipe(ckpt, ct.load_recipe(resumed.paths.recipe))


def test_cli_run_with_unmatched_target_modules_exits_2_and_writes_nothing(llama_base: Path, tmp_path: Path) -> None:
    import yaml

    from tests.helpers import cli

    path = tmp_path / "lora.yaml"
    path.write_text(yaml.safe_dump(lora_recipe(llama_base, target_modules=["c_attn"])))
    runs = tmp_path / "runs"
    out = cli("run", str(path), env={"CLUSTERTUNE_RUNS": str(runs)})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "model.adapter.target_modules" in out.stderr and "q_proj" in out.stderr
    assert "Traceback" not in out.stderr
    assert not runs.exists() or not any(runs.iterdir())


def test_lora_on_a_classifier_trains_and_saves_its_head(tmp_path: Path) -> None:
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe
    from tests.helpers import TINY_CLS

    base = tmp_path / "bert"
    tok = train_bpe(pydoc_paragraphs(), 512, classification=True, model_max_length=32)
    config = BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=64, num_labels=2, pad_token_id=tok.pad_token_id)
    BertForSequenceClassification(config).save_pretrained(str(base))
    tok.save_pretrained(str(base))
    recipe = with_(TINY_CLS, model={"name_or_path": str(base), "num_labels": 2, "tokenizer": None,
                                    "config": None, "config_overrides": {},
                                    "adapter": {"rank": 4, "save_merged": True}})
    r = run(recipe, tmp_path / "runs")
    # The fresh classification head trains in full beside the adapter (PEFT adds it by itself).
    names = set(load_file(str(r.paths.model / "adapter_model.safetensors")))
    assert {"base_model.model.classifier.weight", "base_model.model.classifier.bias"} <= names
    merged = AutoModelForSequenceClassification.from_pretrained(str(r.paths.merged_model))
    tuned = load_file(str(r.paths.model / "adapter_model.safetensors"))["base_model.model.classifier.weight"]
    assert torch.equal(merged.classifier.weight, tuned)
