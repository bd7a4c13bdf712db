"""Parity with the peer: clustertune's loop and transformers' Trainer, given the same initial
weights, the same blocks in the same order, the same optimizer, schedule, batch and clipping,
end at evaluation losses within 2% of each other.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import clustertune as ct
from clustertune.data.builtin import pydoc_paragraphs
from clustertune.data.prepare import prepare_split
from clustertune.data.sources import load_raw
from clustertune.models.tokenizer import train_bpe

STEPS, BATCH, LR, WARMUP, SEED, BLOCK = 60, 8, 3e-3, 5, 42, 64


def _initial_model(out: Path) -> None:
    """Tokenizer and randomly initialised tiny GPT-2 (dropout off), saved for both trainers."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = train_bpe(pydoc_paragraphs(), 512, classification=False, model_max_length=BLOCK)
    config = GPT2Config(vocab_size=len(tok), n_positions=BLOCK, n_embd=64, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(SEED)
    GPT2LMHeadModel(config).save_pretrained(str(out))
    tok.save_pretrained(str(out))


@torch.no_grad()
def _eval_loss(model: torch.nn.Module, blocks: torch.Tensor) -> float:
    """Mean next-token loss over every evaluation block, the same code for both models."""
    model.eval()
    total = 0.0
    for i in range(0, len(blocks), 16):
        b = blocks[i : i + 16]
        total += float(model(input_ids=b, labels=b).loss) * len(b)
    return total / len(blocks)


@pytest.mark.slow
def test_eval_loss_matches_transformers_trainer(tmp_path: Path, runs_root: Path) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, set_seed

    init = tmp_path / "init"
    _initial_model(init)
    recipe = ct.load_recipe({
        "name": "parity",
        "task": "causal_lm",
        "model": {"name_or_path": str(init)},
        "data": {"dataset": "builtin:pydoc", "block_size": BLOCK},
        "train": {"batch_size": BATCH, "lr": LR, "warmup_steps": WARMUP, "lr_scheduler": "linear",
                  "max_steps": STEPS, "weight_decay": 0.0, "max_grad_norm": 1.0, "shuffle": False,
                  "log_every": 10, "seed": SEED, "cpu_threads": 1},
    })
    run = ct.run(recipe, show_progress=False)
    ours = AutoModelForCausalLM.from_pretrained(str(run.paths.model))

    # The same blocks, prepared by the same code, fed to Trainer in the same (sequential) order.
    tok = AutoTokenizer.from_pretrained(str(init))
    raw = load_raw(recipe.data, SEED)
    train_blocks = prepare_split(recipe, raw.train, tok, "train").input_ids.astype("int64")
    eval_blocks = torch.from_numpy(prepare_split(recipe, raw.validation, tok, "validation").input_ids.astype("int64"))
    train_ds = Dataset.from_dict({"input_ids": train_blocks.tolist(), "labels": train_blocks.tolist()})

    torch.set_num_threads(1)
    set_seed(SEED)
    peer = AutoModelForCausalLM.from_pretrained(str(init))
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=BATCH, learning_rate=LR,
        warmup_steps=WARMUP, lr_scheduler_type="linear", max_steps=STEPS, weight_decay=0.0, max_grad_norm=1.0,
        adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, optim="adamw_torch",
        train_sampling_strategy="sequential", dataloader_drop_last=True, use_cpu=True, seed=SEED,
        report_to=[], save_strategy="no", logging_steps=10, disable_tqdm=True,
    )
    Trainer(model=peer, args=args, train_dataset=train_ds).train()

    before = _eval_loss(AutoModelForCausalLM.from_pretrained(str(init)), eval_blocks)
    loss_ours, loss_peer = _eval_loss(ours, eval_blocks), _eval_loss(peer, eval_blocks)
    assert loss_ours < before - 0.5  # it actually trained (about 6.2 -> 5.3 here)
    assert abs(loss_ours - loss_peer) / loss_peer <= 0.02, (loss_ours, loss_peer)
    # clustertune's own evaluation (every block, weighted by batch) agrees with the plain loop above.
    summary_loss = json.loads(run.paths.summary.read_text())["final_eval"]["eval_loss"]
    assert summary_loss == pytest.approx(loss_ours, rel=1e-4)
