"""Evaluation perplexity: clustertune against a minimal Trainer script written the run_clm.py
way (text files through datasets' text loader with line breaks kept, datasets.map tokenizing,
texts concatenated and cut into blocks, Trainer.train then Trainer.evaluate), on the same files,
the same tokenizer, the same initial weights, the same blocks and hyperparameters, for several
seeds.

Two figures per seed for the peer: the loss Trainer.evaluate reports, and the true per-token mean
next-token loss of its trained model (the same loop used for clustertune's model). With
transformers 5, Trainer's eval loss for a causal LM is scaled by (block-1)/block: it divides by
every label of a block while the model predicts block-1 of them, so its perplexity reads low.
clustertune reports the true per-token mean.

    python benchmarks/parity_run_clm.py [--seeds 3] [--steps 150] [--lr 1e-3]

Last line: ratio=<clustertune eval perplexity / peer's true eval perplexity, mean over seeds>.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

BLOCK, BATCH, WARMUP = 128, 8, 10


def write_corpus(out: Path) -> tuple[Path, Path]:
    """Python's reference documentation as two .txt files (line breaks, blank lines and all)."""
    from clustertune.data.builtin import pydoc_paragraphs

    paras = pydoc_paragraphs()
    cut = len(paras) * 19 // 20
    train, val = out / "train.txt", out / "validation.txt"
    train.write_text("\n\n".join(paras[:cut]) + "\n", encoding="utf-8")
    val.write_text("\n\n".join(paras[cut:]) + "\n", encoding="utf-8")
    return train, val


def initial_model(out: Path, train: Path, seed: int) -> None:
    """One tokenizer and one randomly initialised GPT-2 (2 layers, width 64), dropout off."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(train.read_text(encoding="utf-8").splitlines(keepends=True), 1024, classification=False,
                    model_max_length=BLOCK)
    config = GPT2Config(vocab_size=len(tok), n_positions=BLOCK, n_embd=64, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).save_pretrained(str(out))
    tok.save_pretrained(str(out))


def run_clm_way(init: Path, train: Path, val: Path, out: Path, seed: int, steps: int, lr: float) -> tuple[float, object, object]:
    """The peer: (Trainer's reported eval loss, trained model, evaluation blocks)."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, default_data_collator, set_seed

    raw = datasets.load_dataset("text", data_files={"train": str(train), "validation": str(val)}, keep_linebreaks=True)
    tok = AutoTokenizer.from_pretrained(str(init))
    tokenized = raw.map(lambda b: tok(b["text"]), batched=True, remove_columns=["text"])

    def group(batch: dict) -> dict:
        ids = [t for row in batch["input_ids"] for t in row]
        n = len(ids) // BLOCK * BLOCK
        blocks = [ids[i : i + BLOCK] for i in range(0, n, BLOCK)]
        return {"input_ids": blocks, "labels": [b[:] for b in blocks]}

    # One map batch per split: the whole text concatenated once (clustertune's blocks exactly).
    lm = tokenized.map(group, batched=True, batch_size=None, remove_columns=tokenized["train"].column_names)
    set_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(str(init))
    args = TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=BATCH, per_device_eval_batch_size=BATCH, learning_rate=lr,
        warmup_steps=WARMUP, lr_scheduler_type="linear", max_steps=steps, weight_decay=0.0, max_grad_norm=1.0,
        optim="adamw_torch", train_sampling_strategy="sequential", use_cpu=True, seed=seed, report_to=[],
        save_strategy="no", logging_steps=50, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=lm["train"], eval_dataset=lm["validation"],
                      data_collator=default_data_collator)
    trainer.train()
    reported = trainer.evaluate()["eval_loss"]
    return reported, model, torch.tensor(lm["validation"]["input_ids"])


@torch.no_grad()
def true_loss(model: torch.nn.Module, blocks: torch.Tensor) -> float:
    """Mean next-token loss over every predicted token of every block."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(blocks), 16):
        b = blocks[i : i + 16]
        logits = model(input_ids=b).logits[:, :-1].float()
        total += float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), b[:, 1:].reshape(-1),
                                                         reduction="sum"))
        count += b[:, 1:].numel()
    return total / count


def clustertune_way(init: Path, train: Path, val: Path, runs: Path, seed: int, steps: int, lr: float) -> tuple[float, object]:
    import clustertune as ct
    from transformers import AutoModelForCausalLM

    recipe = ct.load_recipe({
        "name": "parity", "task": "causal_lm", "model": {"name_or_path": str(init)},
        "data": {"train_files": [str(train)], "validation_files": [str(val)], "block_size": BLOCK},
        "train": {"batch_size": BATCH, "lr": lr, "warmup_steps": WARMUP, "lr_scheduler": "linear", "max_steps": steps,
                  "weight_decay": 0.0, "max_grad_norm": 1.0, "shuffle": False, "seed": seed, "log_every": 50,
                  "device": "cpu", "precision": "fp32"},  # the peer's precision on CPU
        "tracking": {"runs_root": str(runs)},
    })
    run = ct.run(recipe, show_progress=False)
    summary = json.loads(run.paths.summary.read_text())
    return summary["final_eval"]["eval_loss"], AutoModelForCausalLM.from_pretrained(str(run.paths.model))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = ap.parse_args()
    if a.smoke:
        a.seeds, a.steps = 1, 4
    torch.set_num_threads(1)
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["CLUSTERTUNE_CACHE"] = str(root / "cache")
        train, val = write_corpus(root)
        print(f"{'seed':>4} {'clustertune ppl':>16} {'peer true ppl':>14} {'peer reported ppl':>18} "
              f"{'reported/true loss':>19} {'ours/peer ppl':>14}")
        for seed in range(a.seeds):
            init = root / f"init-{seed}"
            initial_model(init, train, seed)
            reported, peer, blocks = run_clm_way(init, train, val, root / f"trainer-{seed}", seed, a.steps, a.lr)
            ours_loss, ours = clustertune_way(init, train, val, root / "runs", seed, a.steps, a.lr)
            peer_true = true_loss(peer, blocks)
            assert abs(true_loss(ours, blocks) - ours_loss) < 1e-3 * ours_loss, "clustertune's eval is not the true mean"
            ratio = math.exp(ours_loss) / math.exp(peer_true)
            ratios.append(ratio)
            print(f"{seed:>4} {math.exp(ours_loss):>16.2f} {math.exp(peer_true):>14.2f} {math.exp(reported):>18.2f} "
                  f"{reported / peer_true:>19.4f} {ratio:>14.4f}", flush=True)
    print(f"(block {BLOCK}: (block-1)/block = {(BLOCK - 1) / BLOCK:.4f}; python {sys.version.split()[0]})")
    print(f"ratio={sum(ratios) / len(ratios):.4f}")


if __name__ == "__main__":
    main()
