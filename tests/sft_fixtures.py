"""Shared pieces of the SFT tests: a tiny base model with its tokenizer, chat data, recipes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# Markers of the built-in templates, registered as tokens of the tiny tokenizer (as a real base
# model's tokenizer has them), so token boundaries fall on the markers.
MARKERS = ["<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

CHATS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "Which keyword starts a loop?"}, {"role": "assistant", "content": "for"}],
    [{"role": "system", "content": "Answer in one word."},
     {"role": "user", "content": "What does def define?"}, {"role": "assistant", "content": "A function."},
     {"role": "user", "content": "And class?"}, {"role": "assistant", "content": "A class, with its methods."}],
    [{"role": "user", "content": "Count to three."}, {"role": "assistant", "content": "1, 2, 3"},
     {"role": "user", "content": "Backwards?"}, {"role": "assistant", "content": "3, 2, 1"},
     {"role": "user", "content": "Thanks!"}, {"role": "assistant", "content": "You're welcome (any time)."}],
]


def make_base(root: Path, markers: bool = True, n_positions: int = 128, chat_template: str | None = None) -> Path:
    """A tiny GPT-2 (2 layers, width 64) and a 512-token BPE trained on the builtin corpus."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs(), 512, classification=False, model_max_length=n_positions)
    if markers:
        tok.add_special_tokens({"additional_special_tokens": MARKERS})
    if chat_template:
        tok.chat_template = chat_template
    cfg = GPT2Config(vocab_size=len(tok), n_layer=2, n_embd=64, n_head=2, n_positions=n_positions,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    GPT2LMHeadModel(cfg).save_pretrained(root)
    tok.save_pretrained(root)
    return root


@pytest.fixture(scope="session")
def sft_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_base(tmp_path_factory.mktemp("sft-base"))


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def arithmetic_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Chat rows with a learnable answer: the number after the one asked about."""
    return [{"messages": [{"role": "user", "content": f"After {i}?"}, {"role": "assistant", "content": str(i + 1)}]}
            for i in range(start, start + n)]


def sft_recipe(base: Path, train: Path, runs_root: Path | None = None, **data: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "name": "tinysft", "task": "sft",
        "model": {"name_or_path": str(base)},
        "data": {"train_files": [str(train)], "max_length": 64, "validation_fraction": 0.1,
                 "sft": {"chat_template": "chatml", "generation_samples": 4, "max_new_tokens": 4}},
        "train": {"precision": "fp32", "batch_size": 4, "lr": 3e-3, "max_steps": 6, "log_every": 3, "cpu_threads": 1},
    }
    sft = data.pop("sft", {})
    r["data"].update(data)
    r["data"]["sft"].update(sft)
    if runs_root is not None:
        r["tracking"] = {"runs_root": str(runs_root)}
    return r


@pytest.fixture(scope="session")
def chat_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny base with the ChatML template saved in its tokenizer, as an SFT run saves its
    model; its weights drawn from a fixed seed, so what it writes is the same every session."""
    import torch

    from clustertune.data.templates import CHATML

    torch.manual_seed(0)
    return make_base(tmp_path_factory.mktemp("chat-base"), chat_template=CHATML)


@pytest.fixture(scope="session")
def plain_base(chat_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model and tokenizer without a chat template (a pretrained base, not chat-tuned)."""
    import shutil

    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("plain-base")
    for f in chat_base.iterdir():
        if f.is_file():
            shutil.copy2(f, out / f.name)
    (out / "chat_template.jinja").unlink(missing_ok=True)
    tok = AutoTokenizer.from_pretrained(str(out))
    assert not tok.chat_template, "the copy still has a chat template"
    return out
