"""Strategy switches in recipes, the DeepSpeed config they imply, a user's JSON merged over
it, and the bad inputs: each names the key and the fix."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch

from clustertune.errors import RecipeError, UserError
from clustertune.extras import install_hint
from clustertune.recipe.load import load_recipe
from clustertune.train.fastpath import compile_kwargs, compile_with_fallback, pad_vocab, vocab_multiple
from clustertune.train.strategies.base import OutOfMemory, explain_out_of_memory, next_strategy
from clustertune.recipe.ds_config import DeepSpeedConfigError, build_config, merge_user_config
from clustertune.train.strategies.zero import DeepSpeedMissing, check_strategy, deepspeed_config
from tests.helpers import TINY_CAUSAL, TINY_CLS, with_


def recipe(**train: object):
    return load_recipe(with_(TINY_CAUSAL, train=train))


@pytest.mark.parametrize(
    ("train", "key", "words"),
    [
        ({"strategy": "zero"}, "train.strategy", "'ddp', 'fsdp' or 'deepspeed'"),
        ({"strategy": "deepspeed", "zero_stage": 4}, "train.zero_stage", "1, 2 or 3"),
        ({"offload": "optimizer"}, "train.offload", "needs train.strategy=deepspeed or fsdp"),
        ({"zero_stage": 3}, "train.zero_stage", "only used with train.strategy=deepspeed"),
        ({"strategy": "deepspeed", "offload": "params"}, "train.offload", "needs train.zero_stage=3"),
        ({"strategy": "deepspeed", "deepspeed_preset": "zero2-offload", "zero_stage": 3}, "train.zero_stage",
         "contradicts deepspeed_preset 'zero2-offload'"),
        ({"strategy": "fsdp", "deepspeed_config": "ds.json"}, "train.deepspeed_config", "only used with"),
    ],
)
def test_bad_strategy_switches_name_the_key(train: dict, key: str, words: str) -> None:
    with pytest.raises(RecipeError) as err:
        recipe(**train)
    assert f"{key}: " in str(err.value) and words in str(err.value)


@pytest.mark.parametrize(
    ("train", "words"),
    [
        ({"compile_mode": "reduce-overhead", "strategy": "fsdp"},
         "reduce-overhead replays CUDA graphs, which need parameters that stay in place, and strategy fsdp gathers "
         "them into new memory each step: use max-autotune-no-cudagraphs, or strategy ddp"),
        ({"compile_mode": "max-autotune", "strategy": "deepspeed"}, "strategy deepspeed gathers them"),
        ({"compile_mode": "max-autotune-no-cudagraphs", "compile": False},
         "max-autotune-no-cudagraphs with train.compile: false compiles nothing; drop one of them"),
        ({"compile_mode": "max_autotune"}, "'default', 'max-autotune-no-cudagraphs', 'reduce-overhead' or 'max-autotune'"),
    ],
)
def test_a_compile_mode_the_run_cannot_use_is_refused_with_the_fix(train: dict, words: str) -> None:
    with pytest.raises(RecipeError) as err:
        recipe(**train)
    assert "train.compile_mode: " in str(err.value) and words in str(err.value), str(err.value)


def test_cuda_graphs_only_where_every_batch_has_one_shape() -> None:
    from tests.sft_fixtures import sft_recipe

    sft = sft_recipe(Path("/data/base"), Path("/data/train.jsonl"))
    with pytest.raises(RecipeError, match="task sft cuts each batch to its longest row: use max-autotune-no-cudagraphs"):
        load_recipe(with_(sft, train={"compile_mode": "reduce-overhead"}))
    # What is accepted: graphs of causal LM blocks and padded labelled texts under DDP; autotuning alone anywhere.
    assert recipe(compile_mode="reduce-overhead").train.compile_mode == "reduce-overhead"
    assert load_recipe(with_(TINY_CLS, train={"compile_mode": "max-autotune"})).train.compile_mode == "max-autotune"
    tuned = load_recipe(with_(sft, train={"compile_mode": "max-autotune-no-cudagraphs", "strategy": "fsdp"}))
    assert tuned.train.compile_mode == "max-autotune-no-cudagraphs"
    assert compile_kwargs("default") == {} and compile_kwargs("reduce-overhead") == {"mode": "reduce-overhead"}


def test_presets_set_stage_and_offload_and_survive_a_round_trip() -> None:
    r = recipe(strategy="deepspeed", deepspeed_preset="zero3-offload")
    assert (r.train.effective_zero_stage, r.train.effective_offload) == (3, "params")
    again = load_recipe(r.to_plain())  # the resolved recipe the nodes read back
    assert (again.train.effective_zero_stage, again.train.effective_offload) == (3, "params")
    cfg, _ = build_config(again.train, 4, "bf16")
    zero = cfg["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_param"]["device"] == "cpu"
    assert zero["offload_optimizer"]["device"] == "cpu"
    assert cfg["optimizer"]["params"]["torch_adam"] is False  # offloaded steps use DeepSpeed's CPU Adam
    assert cfg["bf16"]["enabled"] is True and cfg["fp16"]["enabled"] is False


def test_config_follows_the_recipe() -> None:
    r = recipe(strategy="deepspeed", batch_size=4, gradient_accumulation_steps=3, lr=1e-3, max_grad_norm=0.5)
    cfg, origin = build_config(r.train, 2, "no")
    assert cfg["train_batch_size"] == 4 * 3 * 2 and cfg["train_micro_batch_size_per_gpu"] == 4
    assert cfg["zero_optimization"] == {"stage": 2} and cfg["gradient_clipping"] == 0.5
    assert cfg["optimizer"]["params"]["lr"] == 1e-3 and cfg["optimizer"]["params"]["torch_adam"] is True
    assert origin["optimizer.params.lr"] == "train.lr"
    cfg_nw, origin_nw = build_config(r.train, None, "no")
    assert "train_batch_size" not in cfg_nw and "train_batch_size" not in origin_nw


def test_user_json_is_merged_and_contradictions_are_named_key_by_key(tmp_path: Path) -> None:
    r = recipe(strategy="deepspeed", zero_stage=2, lr=1e-3)
    agree = tmp_path / "agree.json"
    agree.write_text(json.dumps({"zero_optimization": {"stage": 2, "overlap_comm": True,
                                                       "reduce_bucket_size": "auto"},
                                 "optimizer": {"params": {"lr": "auto"}}, "communication_data_type": "fp32"}))
    merged = deepspeed_config(load_recipe(with_(TINY_CAUSAL, train={**r.train.model_dump(exclude_unset=True),
                                                                    "deepspeed_config": str(agree)})), 2, "no")
    assert merged["zero_optimization"]["overlap_comm"] is True and merged["zero_optimization"]["stage"] == 2
    assert merged["communication_data_type"] == "fp32" and merged["optimizer"]["params"]["lr"] == 1e-3

    built, origin = build_config(r.train, 2, "no")
    clash = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
             "train_micro_batch_size_per_gpu": 16, "optimizer": {"params": {"lr": 1e-3}}}
    with pytest.raises(DeepSpeedConfigError) as err:
        merge_user_config(built, origin, clash, "ds.json")
    text = str(err.value)
    assert "zero_optimization.stage: 3 in ds.json, but 2 from train.zero_stage" in text
    assert "train_micro_batch_size_per_gpu: 16 in ds.json, but 8 from train.batch_size" in text
    assert "optimizer.params.lr" not in text  # the same value is no contradiction


@pytest.mark.parametrize(("content", "words"), [(None, "does not exist"), ("{nope", "not valid JSON"),
                                                  ("[1, 2]", "must hold a JSON object")])
def test_unreadable_user_json_names_the_key(tmp_path: Path, content: str | None, words: str) -> None:
    path = tmp_path / "ds.json"
    if content is not None:
        path.write_text(content)
    r = recipe(strategy="deepspeed", deepspeed_config=str(path))
    with pytest.raises(DeepSpeedConfigError, match=f"train.deepspeed_config: .*{words}"):
        check_strategy(r, "no")


def test_missing_deepspeed_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import deepspeed` fail as it does where it is absent.
    monkeypatch.setitem(sys.modules, "deepspeed", None)
    with pytest.raises(DeepSpeedMissing) as err:
        check_strategy(recipe(strategy="deepspeed"), "no")
    assert isinstance(err.value, UserError)
    # how to install it into this install (clustertune is on no index: not `pip install 'clustertune[...]'`)
    assert f"`{install_hint('deepspeed')}`" in str(err.value) and "train.strategy" in str(err.value)
    check_strategy(recipe(strategy="fsdp"), "no")  # other strategies do not need it


@pytest.mark.parametrize(("train", "here", "after", "advice"), [
    ({}, "ddp", "fsdp", "train.strategy=fsdp"),
    ({"strategy": "deepspeed", "zero_stage": 2}, "zero2", "zero3", "train.zero_stage=3"),
    ({"strategy": "deepspeed", "zero_stage": 3}, "zero3", "zero3+offload", "train.deepspeed_preset=zero3-offload"),
])
def test_out_of_memory_names_batch_sequence_the_estimate_and_the_next_strategy(
        train: dict, here: str, after: str, advice: str) -> None:
    from transformers import GPT2Config

    from clustertune.train import memory

    r = recipe(batch_size=32, **train)
    config = GPT2Config(vocab_size=50304, n_positions=1024, bos_token_id=0, eos_token_id=0)  # GPT-2 124M
    # The real error type torch raises, through the code path the training run takes.
    with pytest.raises(OutOfMemory) as err:
        with explain_out_of_memory(r, config, 4, True, 1024):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    msg = str(err.value)
    assert isinstance(err.value.__cause__, torch.OutOfMemoryError)
    assert "train.batch_size=32" in msg and "sequence length 1024" in msg and "Tried to allocate 2.00 GiB" in msg
    est = {e.strategy: e for e in memory.estimate_all(r, config, 4, True, [here, after])}
    assert est[after].device_total < est[here].device_total  # the advice goes down the ladder
    assert f"puts {here} over 4 device(s) at {est[here].device_total / memory.GiB:.2f} GiB per device" in msg
    assert f"{after} would need {est[after].device_total / memory.GiB:.2f} GiB per device" in msg
    assert advice in msg
    with pytest.raises(ValueError):  # other errors pass through as they are
        with explain_out_of_memory(r, config, 4, True, 1024):
            raise ValueError("not memory")
    ladder = [next_strategy(recipe(strategy="deepspeed", zero_stage=s).train) for s in (1, 2, 3)]
    assert ladder == ["train.zero_stage=2", "train.zero_stage=3", "train.deepspeed_preset=zero3-offload"]


def test_vocab_is_padded_for_fresh_models_only() -> None:
    from transformers import GPT2Config

    assert vocab_multiple(recipe()) == (64 if torch.cuda.is_available() else 1)
    r = recipe(pad_vocab_multiple=64)
    assert vocab_multiple(r) == 64
    config = GPT2Config(vocab_size=50257)
    pad_vocab(config, vocab_multiple(r))
    assert config.vocab_size == 50304
    pretrained = load_recipe(with_(TINY_CAUSAL, model={"config": None, "name_or_path": "/some/dir",
                                                        "tokenizer": None}, train={"pad_vocab_multiple": 64}))
    assert vocab_multiple(pretrained) == 1


@pytest.fixture
def inductor_without_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A real inductor failure: the C++ compiler it needs for CPU kernels is not there. A fresh
    kernel cache, so no kernel compiled earlier on this machine is reused instead. (The config's
    own patch: monkeypatch's undo of a setattr on its ``cpp`` section deletes the key.)"""
    import torch._inductor.config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    with torch._inductor.config.patch({"cpp.cxx": (None, "/nonexistent/bin/g++"), "fx_graph_cache": False}):
        yield


@pytest.mark.usefixtures("inductor_without_compiler")
def test_compile_failure_falls_back_to_eager_with_a_message(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    import torch._dynamo

    # A run in this process (api.run) stops the clustertune logger propagating; caplog listens at the root.
    monkeypatch.setattr(logging.getLogger("clustertune"), "propagate", True)

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)
    want = model(x)
    compile_with_fallback(model)
    with caplog.at_level("WARNING", logger="clustertune"):
        got = model(x)
        again = model(x)
    assert torch.allclose(got, want) and torch.allclose(again, want)
    failed = {id(r): r.getMessage() for r in caplog.records if "torch.compile failed" in r.getMessage()}
    assert len(failed) == 1  # said once, not at every call
    (msg,) = failed.values()
    assert "eager mode" in msg and "train.compile=false" in msg
    assert set(model.state_dict()) == {"0.weight", "0.bias", "2.weight", "2.bias"}  # names unchanged
    torch._dynamo.reset()


def test_a_mode_that_fails_to_compile_falls_back_to_default_then_works(monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture,
                                                                      tmp_path: Path) -> None:
    # A real failure of autotuning alone: no matrix-multiply backend it may choose from. The
    # default mode never autotunes, so it compiles the same model.
    import torch._dynamo
    import torch._inductor.config

    monkeypatch.setattr(logging.getLogger("clustertune"), "propagate", True)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)
    want = model(x)
    with torch._inductor.config.patch({"max_autotune_gemm_backends": "NONE", "fx_graph_cache": False}):
        compile_with_fallback(model, mode="max-autotune-no-cudagraphs")
        with caplog.at_level("WARNING", logger="clustertune"):
            got = model(x)
            again = model(x)
    assert torch.allclose(got, want, atol=1e-6) and torch.allclose(again, want, atol=1e-6)
    said = [r.getMessage() for r in caplog.records if "torch.compile" in r.getMessage()]
    assert len(said) == 1, said
    assert "torch.compile in mode max-autotune-no-cudagraphs failed" in said[0]
    assert said[0].endswith("compiling in mode default instead")
    torch._dynamo.reset()


@pytest.mark.usefixtures("inductor_without_compiler")
def test_a_regional_compile_that_fails_puts_every_block_back_to_eager(monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    # As above, the model compiled block by block (FSDP's way).
    import torch._dynamo
    from transformers import GPT2Config, GPT2LMHeadModel

    monkeypatch.setattr(logging.getLogger("clustertune"), "propagate", True)

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=16, n_head=2, n_positions=16, vocab_size=64,
                                       bos_token_id=0, eos_token_id=0)).eval()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    want = model(input_ids=ids).logits
    compile_with_fallback(model, regional=True)
    assert model.transformer.h[0]._compiled_call_impl is not None  # the blocks, not the whole model
    with caplog.at_level("WARNING", logger="clustertune"):
        got = model(input_ids=ids).logits
        again = model(input_ids=ids).logits
    assert torch.allclose(got, want) and torch.allclose(again, want)
    assert len([r for r in caplog.records if "torch.compile failed" in r.getMessage()]) == 1
    assert [n for n, m in model.named_modules() if m._compiled_call_impl is not None] == []
    torch._dynamo.reset()


def test_fsdp_refuses_a_model_that_names_no_blocks_to_shard() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.errors import ModelError
    from clustertune.train.strategies.accel import shard_model

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16))
    model._no_split_modules = []  # a custom model that does not say what its blocks are
    with pytest.raises(ModelError, match=r"train.strategy: fsdp .*GPT2LMHeadModel names none.*train.strategy=ddp"):
        shard_model(model, offload=False)
