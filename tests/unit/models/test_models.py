"""Tokenizers and models: trained on the spot, local directories, configs with overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustertune.errors import ModelError, RecipeError
from clustertune.models import build_model, check_sequence_fits, load_tokenizer, resolve_config, train_bpe
from clustertune.recipe import load_recipe
from tests.helpers import TINY_CAUSAL, TINY_CLS, with_

TEXTS = ["def f(x):\n    return x + 1", "The quick brown fox jumps over the lazy dog."] * 50


def test_trained_tokenizer_round_trips_and_is_deterministic(tmp_path: Path) -> None:
    tok = train_bpe(TEXTS, 300, classification=False, model_max_length=64)
    again = train_bpe(TEXTS, 300, classification=False, model_max_length=64)
    assert tok.backend_tokenizer.to_str() == again.backend_tokenizer.to_str()
    ids = tok("The quick brown fox")["input_ids"]
    assert tok.decode(ids) == "The quick brown fox"
    tok.save_pretrained(str(tmp_path / "tok"))
    loaded = load_tokenizer(str(tmp_path / "tok"))
    assert loaded("The quick brown fox")["input_ids"] == ids
    assert loaded.eos_token == "<|endoftext|>" and loaded.pad_token == "<pad>"


def test_fresh_config_takes_tokenizer_vocab_and_overrides() -> None:
    tok = train_bpe(TEXTS, 300, classification=False, model_max_length=64)
    r = load_recipe(TINY_CAUSAL)
    cfg = resolve_config(r, tok)
    assert (cfg.vocab_size, cfg.n_layer, cfg.n_embd) == (len(tok), 2, 64)
    assert cfg.eos_token_id == tok.eos_token_id
    model = build_model(r, cfg, tok)
    assert model.get_input_embeddings().num_embeddings == len(tok)


def test_unknown_override_attribute_is_an_error() -> None:
    r = load_recipe(TINY_CAUSAL, ["model.config_overrides.n_layers=3"])
    with pytest.raises(ModelError, match=r"gpt2 configs have no attribute 'n_layers' \(did you mean 'n_layer'\?\)"):
        resolve_config(r)


@pytest.mark.parametrize("override", [
    "model.config_overrides=n_embd=128,n_head=4,resid_pdrop=0,scale_attn_weights=false",  # as a shell passes it
    'model.config_overrides="n_embd=128, n_head=4, resid_pdrop=0, scale_attn_weights=false"',
])
def test_run_clm_string_form_of_config_overrides_takes_the_config_s_types(override: str) -> None:
    r = load_recipe(TINY_CAUSAL, [override])
    # Added to the recipe's own overrides, as {n_embd: 128, ...} would be (n_layer stays 2).
    assert r.model.config_overrides == {"n_layer": 2, "n_embd": 128, "n_head": 4, "n_positions": 64,
                                        "resid_pdrop": 0, "scale_attn_weights": False}
    cfg = resolve_config(r)
    assert (cfg.n_layer, cfg.n_embd, cfg.n_head) == (2, 128, 4) and type(cfg.n_embd) is int
    assert cfg.resid_pdrop == 0.0 and type(cfg.resid_pdrop) is float  # a float attribute stays a float
    assert cfg.scale_attn_weights is False


def test_config_overrides_text_in_a_recipe_file_and_its_errors() -> None:
    r = load_recipe(with_(TINY_CAUSAL, model={"config_overrides": "n_layer=1,layer_norm_epsilon=1e-6,n_inner=256"}))
    cfg = resolve_config(r)
    assert (cfg.n_layer, cfg.layer_norm_epsilon, cfg.n_inner) == (1, 1e-6, 256)
    # Quoted numbers take the config's type too; words where a number goes do not.
    cfg = resolve_config(load_recipe(with_(TINY_CAUSAL, model={"config_overrides": {"n_layer": "3"}})))
    assert cfg.n_layer == 3 and type(cfg.n_layer) is int
    with pytest.raises(ModelError, match=r"model.config_overrides.n_layer: 'two' does not fit .* holds int values"):
        resolve_config(load_recipe(TINY_CAUSAL, ["model.config_overrides=n_layer=two"]))
    with pytest.raises(ModelError, match=r"model.config_overrides.scale_attn_weights: 'maybe' does not fit"):
        resolve_config(load_recipe(TINY_CAUSAL, ["model.config_overrides=scale_attn_weights=maybe"]))
    with pytest.raises(ModelError, match=r"no attribute 'n_lyer' \(did you mean 'n_layer'\?\)"):
        resolve_config(load_recipe(TINY_CAUSAL, ["model.config_overrides=n_embd=128,n_lyer=4"]))
    with pytest.raises(ModelError, match=r"n_embd=0: sizes and counts must be at least 1"):
        resolve_config(load_recipe(TINY_CAUSAL, ["model.config_overrides=n_embd=0"]))
    with pytest.raises(RecipeError, match=r"model.config_overrides: 'n_embd128' is not name=value"):
        load_recipe(TINY_CAUSAL, ["model.config_overrides=n_embd128"])
    with pytest.raises(RecipeError, match=r"model.config_overrides: .*'n_head' is given twice"):
        load_recipe(with_(TINY_CAUSAL, model={"config_overrides": "n_head=2,n_head=4"}))


def test_block_size_larger_than_positions() -> None:
    r = load_recipe(TINY_CAUSAL, ["data.block_size=128"])
    with pytest.raises(ModelError, match=r"data.block_size: 128 is larger than the model's 64 positions; set data.block_size<=64"):
        check_sequence_fits(r, resolve_config(r))
    c = load_recipe(TINY_CLS, ["data.max_length=65"])
    with pytest.raises(ModelError, match="data.max_length: 65 is larger than the model's 64 positions"):
        check_sequence_fits(c, resolve_config(c))


def test_model_sources_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="model.config: 'gtp2' is neither a model type .* did you mean 'gpt2'"):
        resolve_config(load_recipe(TINY_CAUSAL, ["model.config=gtp2"]))
    missing = load_recipe(with_(TINY_CAUSAL, model={"config": None, "name_or_path": str(tmp_path / "nope")}))
    with pytest.raises(ModelError, match=r"model.name_or_path: directory '.*nope' does not exist"):
        resolve_config(missing)
    (tmp_path / "empty").mkdir()
    empty = load_recipe(with_(TINY_CAUSAL, model={"config": None, "name_or_path": str(tmp_path / "empty")}))
    with pytest.raises(ModelError, match="has no config.json"):
        resolve_config(empty)


def test_hub_name_offline_says_what_to_do() -> None:
    r = load_recipe("gpt2-wikitext2")
    with pytest.raises(ModelError) as ei:
        resolve_config(r)
    msg = str(ei.value)
    assert "model.name_or_path: cannot load 'gpt2'" in msg and "HF_HUB_OFFLINE=1" in msg
    assert "save_pretrained(DIR)" in msg and "model.name_or_path=DIR" in msg
    with pytest.raises(ModelError, match="model.tokenizer: cannot load 'bert-base-cased'"):
        load_tokenizer("bert-base-cased")


def test_pretrained_local_directory_loads_with_low_cpu_mem_usage(tmp_path: Path) -> None:
    tok = train_bpe(TEXTS, 300, classification=False, model_max_length=64)
    r = load_recipe(TINY_CAUSAL)
    model = build_model(r, resolve_config(r, tok), tok)
    model.save_pretrained(str(tmp_path / "m"))
    tok.save_pretrained(str(tmp_path / "m"))
    pre = load_recipe(with_(TINY_CAUSAL, model={"config": None, "tokenizer": None, "name_or_path": str(tmp_path / "m"),
                                                "low_cpu_mem_usage": True}))
    cfg = resolve_config(pre, load_tokenizer(str(tmp_path / "m")))
    loaded = build_model(pre, cfg, tok)
    import torch

    for (n, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), n
    # A rank that receives its shards from rank 0 builds only the structure: no memory, nothing
    # read from the directory, the same tensors in the same order and shapes.
    from clustertune.train import held_state

    empty = build_model(pre, cfg, tok, on_meta=True)
    assert held_state.materialised_bytes(empty) == 0
    assert held_state.materialised_bytes(loaded) >= 4 * sum(p.numel() for p in loaded.parameters())
    assert [(n, t.shape, t.dtype) for n, t in empty.state_dict().items()] == \
        [(n, t.shape, t.dtype) for n, t in loaded.state_dict().items()]
    assert empty.get_output_embeddings().weight is empty.get_input_embeddings().weight  # still tied


def test_only_multi_process_fsdp_without_adapter_loads_from_rank0() -> None:
    from clustertune.train.strategies.accel import loads_from_rank0

    fsdp = load_recipe(with_(TINY_CAUSAL, train={"strategy": "fsdp"}))
    assert loads_from_rank0(fsdp, {"WORLD_SIZE": "2"})
    assert not loads_from_rank0(fsdp, {})  # one process: it builds the model itself
    assert not loads_from_rank0(load_recipe(with_(TINY_CAUSAL, train={"strategy": "ddp"})), {"WORLD_SIZE": "2"})


def test_a_weight_load_says_first_what_it_reads_or_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from clustertune.models.build import weights_line

    local = tmp_path / "my-model"
    local.mkdir()
    (local / "model.safetensors").write_bytes(b"\0" * 2_500_000)
    assert weights_line(str(local)) == f"model: loading the weights of {local} (2.5 MB)"
    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    assert "downloading the weights of acme/tiny-lm from the Hugging Face Hub" in weights_line("acme/tiny-lm")
    # Once it is in the cache (the hub's own layout), the line says it loads from there.
    repo = cache / "models--acme--tiny-lm"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "model.safetensors").write_bytes(b"\0")
    assert weights_line("acme/tiny-lm") == "model: loading the weights of acme/tiny-lm from the Hugging Face cache"
    assert weights_line("/no/such/dir/../x y") == "model: loading the weights of /no/such/dir/../x y"


def test_the_rl_runs_other_models_say_what_they_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An RL run loads more than its policy (a reference, reward and value models): each load
    starts with the line a run's own model gets, named by the key it is for."""
    import logging

    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.train.rl.ppo import value_model

    folder = tmp_path / "backbone"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=32, vocab_size=64)).save_pretrained(folder)
    size = (folder / "model.safetensors").stat().st_size / 1e6
    with caplog.at_level(logging.INFO, logger="clustertune"):
        model = value_model(str(folder), pad_token_id=0)
    assert model.config.num_labels == 1
    assert [r.getMessage() for r in caplog.records if "weights" in r.getMessage()] == [
        f"rl value model: loading the weights of {folder} ({size:,.1f} MB)"]
