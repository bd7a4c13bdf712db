"""A tiny pretrained base for the adapter tests: a Llama-shaped model (2 layers, width 64) saved
with save_pretrained beside a byte-level BPE trained on the builtin corpus, and recipes on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import TINY_CAUSAL, with_

LLAMA = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
         "num_key_value_heads": 2, "max_position_embeddings": 64, "tie_word_embeddings": False}


def make_base(where: Path, seed: int = 0, **config: Any) -> Path:
    """Write a tiny Llama and its tokenizer to ``where`` (the "pretrained" base)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs(), 512, classification=False, model_max_length=64)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      **{**LLAMA, **config})
    LlamaForCausalLM(cfg).save_pretrained(str(where))
    tok.save_pretrained(str(where))
    return where


@pytest.fixture(scope="session")
def llama_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_base(tmp_path_factory.mktemp("llama-base") / "base")


def lora_recipe(base: Path, **adapter: Any) -> dict[str, Any]:
    """TINY_CAUSAL's data and training on ``base`` with an adapter (LoRA unless ``type`` says)."""
    recipe = with_(TINY_CAUSAL, name="tinylora", train={"lr": 3e-2, "eval_at_start": False})
    recipe["model"] = {"name_or_path": str(base), "adapter": {"rank": 4, "alpha": 8, **adapter}}
    return recipe
