"""SFT with LoRA on CPU: clustertune vs TRL's ``SFTTrainer``, same base, data, LoRA and steps.

    .venv/bin/python benchmarks/sft_cpu.py                 # 40 steps each side, 10 not timed
    .venv/bin/python benchmarks/sft_cpu.py --steps 20 --skip 5

Base: a GPT-2 of the quickstart's shape (4 layers, width 256, 128 positions) built from a
config with a 4,096-token BPE trained on the builtin corpus, saved once and loaded by both
sides (same initial weights). Data: ``builtin:pydoc-topics`` (chat rows), carved once into the
same train and held-out files for both. LoRA rank 16, alpha 32, every linear layer, AdamW at
3e-3 with a constant schedule, batch 16, max_length 128, one process, torch threads 2. Both
sides train in the same precision (``--precision``): bf16 autocast by default, which is what
TRL's ``SFTConfig`` turns on by itself on a CPU with bf16 instructions, or fp32.

Masking is the same on both sides: loss on the assistant's tokens and end marker only. TRL
1.12 finds them through ``{% generation %}`` markers, so it gets a marked copy of the ChatML
template that renders the same text (``benchmarks/sft_prepare.py`` checks that both sides
then produce identical ids and masks). Sides:

- ``trl``: ``SFTTrainer`` defaults for this (padded batches, ``assistant_only_loss=True``);
- ``trl-packed``: ``SFTTrainer`` with ``packing=True`` (its default best-fit packing, padding-free
  rows with position ids restarting per example; SDPA here, no FlashAttention). Before training,
  one of its packed batches is run the way its loss runs it and compared with its examples run
  one at a time: the printed max logit difference is ~0 only if no example attends to another;
- ``ours``: clustertune, one example per row, batches padded to their longest, in the shuffled
  order (``train.group_by_length: false``): padded against padded with ``trl``;
- ``ours-packed``: clustertune with ``data.sft.packing: true``;
- ``ours-grouped``: clustertune's defaults (``train.group_by_length`` unset: padded batches of
  rows of similar length). ``ours-grouped / trl`` is defaults against defaults, each tool as its
  users run it; TRL's own grouping is off by default and not a side.

Each side runs in a fresh process; throughput counts real (non-padding) tokens over the timed
steps; eval loss is the mean over held-out trained tokens after the last step. With
``--rounds N`` the four sides take turns N times (the order rotating each round), so load from
other work falls on all of them alike; the ratios are per round and their median. The last line
is ``ratio=<ours tokens/s / trl tokens/s>`` (the median over rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

LORA = {"rank": 16, "alpha": 32.0}


@dataclass(frozen=True)
class Shape:
    """What both sides train: the base built from a config, the data, the batch."""

    arch: str  # gpt2 | llama
    width: int
    layers: int
    heads: int
    vocab: int
    max_length: int
    batch: int
    data: str  # topics (short chats) | long (chats of a whole reference topic each)
    gpu: bool

    def config(self, tok: Any) -> Any:
        from transformers import GPT2Config, LlamaConfig

        ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
        if self.arch == "gpt2":
            return GPT2Config(vocab_size=len(tok), n_layer=self.layers, n_embd=self.width, n_head=self.heads,
                              n_positions=self.max_length, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **ids)
        return LlamaConfig(vocab_size=len(tok), hidden_size=self.width, num_hidden_layers=self.layers,
                           num_attention_heads=self.heads, num_key_value_heads=max(1, self.heads // 8),
                           intermediate_size=self.width * 11 // 4, max_position_embeddings=self.max_length,
                           tie_word_embeddings=False, **ids)


SHAPES = {
    # The quickstart's shape on CPU (the default).
    "cpu": Shape("gpt2", 256, 4, 4, 4096, 128, 16, "topics", gpu=False),
    # A Llama-shaped ~1B model (TinyLlama's widths, a 16k vocabulary) at sequence 2048 on one GPU.
    "gpu-1b": Shape("llama", 2048, 22, 32, 16384, 2048, 4, "long", gpu=True),
    # The gpu-1b path at a size a CPU runs in a minute: checks the script before a GPU is there.
    "gpu-rehearsal": Shape("llama", 64, 2, 4, 2048, 512, 2, "long", gpu=False),
}
# (side, peer): the goals are ours >= 1.5x TRL's default (padded) and ours-packed >= 1.0x TRL packing.
PAIRS = [("ours", "trl"), ("ours-packed", "trl"), ("ours-packed", "trl-packed"), ("ours-grouped", "ours"),
         ("ours-grouped", "trl")]


def setup(root: Path, shape: Shape) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from clustertune.data.builtin import pydoc_paragraphs, pydoc_topics
    from clustertune.data.sources import carve_validation
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs(), shape.vocab, classification=False, model_max_length=shape.max_length)
    AutoModelForCausalLM.from_config(shape.config(tok)).save_pretrained(root / "base")
    tok.save_pretrained(root / "base")
    rows = pydoc_topics() if shape.data == "topics" else long_chats()
    train, val = carve_validation(Dataset.from_list(rows), 0.1, 42)
    for name, ds in (("train", train), ("val", val)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ds.to_list()), encoding="utf-8")
    (root / "shape.json").write_text(json.dumps(asdict(shape)))


def long_chats() -> list[dict]:
    """Chats whose answer is a stretch of one reference topic: rows that fill a long sequence."""
    from pydoc_data.topics import topics

    rows = []
    for name in sorted(topics):
        text = topics[name]
        for k in range(0, len(text), 6000):
            rows.append({"messages": [{"role": "user", "content": f"Recite the reference on {name}, part {k // 6000 + 1}."},
                                      {"role": "assistant", "content": text[k:k + 6000]}]})
    return rows


def load_shape(root: Path) -> Shape:
    return Shape(**json.loads((root / "shape.json").read_text()))


def run_trl(root: Path, steps: int, skip: int, precision: str, packed: bool = False, threads: int = 2) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from sft_prepare import MARKED_CHATML

    shape = load_shape(root)
    if not shape.gpu:
        torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(str(root / "base"))
    tok.chat_template = MARKED_CHATML
    model = AutoModelForCausalLM.from_pretrained(str(root / "base"))
    rows = [json.loads(x) for x in (root / "train.jsonl").read_text().splitlines()]
    val = [json.loads(x) for x in (root / "val.jsonl").read_text().splitlines()]
    marks: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN003
            if state.global_step == skip:
                marks["start"] = time.perf_counter()

    args = SFTConfig(output_dir=str(root / "trl"), assistant_only_loss=True, max_length=shape.max_length,
                     max_steps=steps, per_device_train_batch_size=shape.batch, per_device_eval_batch_size=shape.batch,
                     learning_rate=3e-3, lr_scheduler_type="constant", use_cpu=not shape.gpu, report_to=[], logging_steps=10, save_strategy="no",
                     dataset_num_proc=1, seed=42, bf16=precision == "bf16", packing=packed)
    lora = LoraConfig(r=LORA["rank"], lora_alpha=LORA["alpha"], target_modules="all-linear", lora_dropout=0.0,
                      task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         eval_dataset=Dataset.from_list(val), processing_class=tok, peft_config=lora,
                         callbacks=[Clock()])
    lengths = [len(x) for x in trainer.train_dataset["input_ids"]]  # packed: real tokens per packed row
    isolated = packed_rows_isolated(trainer) if packed else None
    trainer.train()
    secs = time.perf_counter() - marks["start"]
    tokens = (steps - skip) * shape.batch * sum(lengths) / len(lengths)
    return {"side": "trl-packed" if packed else "trl", "tokens_per_s": tokens / secs, "mfu": _mfu(model, shape, tokens / secs),
            "eval_loss": trainer.evaluate()["eval_loss"], "isolated": isolated, "peak_mem_gb": _peak_gb()}


def _peak_gb() -> float | None:
    """Peak device memory of this process (this side alone: each side runs in its own), or None on CPU."""
    import torch

    return torch.cuda.max_memory_allocated() / 1e9 if torch.cuda.is_available() else None


def packed_rows_isolated(trainer: object) -> float:
    """How far the logits of one of TRL's packed training batches, run the way its loss runs it,
    are from those of its examples run one at a time (0 when no example attends to another)."""
    import torch

    model = trainer.model  # type: ignore[attr-defined]
    batch = {k: v.to(model.device) for k, v in next(iter(trainer.get_train_dataloader())).items()}  # type: ignore[attr-defined]
    model.train()
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        packed = model(**inputs).logits[0].float()
        starts = (batch["position_ids"][0] == 0).nonzero().flatten().tolist() + [batch["input_ids"].shape[1]]
        worst = 0.0
        for a, b in zip(starts, starts[1:]):
            alone = model(input_ids=batch["input_ids"][:, a:b]).logits[0].float()
            worst = max(worst, (alone - packed[a:b]).abs().max().item())
    return worst


def run_ours(root: Path, steps: int, skip: int, packed: bool, precision: str, grouped: bool = False,
             threads: int = 2) -> dict:
    import clustertune as ct

    shape = load_shape(root)
    recipe = {"name": "bench", "task": "sft", "model": {"name_or_path": str(root / "base"),
                                                        "adapter": {"type": "lora", "target_modules": "all-linear",
                                                                    **LORA}},
              "data": {"train_files": [str(root / "train.jsonl")], "validation_files": [str(root / "val.jsonl")],
                       "max_length": shape.max_length, "cache_dir": str(root / "cache"),
                       "sft": {"chat_template": "chatml", "packing": packed, "generation_samples": 0},
                       # the "long" shapes' answers are made to overrun the sequence: cutting them is by design
                       "truncation": "allow"},
              "train": {"batch_size": shape.batch, "lr": 3e-3, "lr_scheduler": "constant", "max_steps": steps,
                        "log_every": skip, "seed": 42, "max_grad_norm": 1.0, "precision": precision,
                        **({} if grouped else {"group_by_length": False}),
                        **({} if shape.gpu else {"cpu_threads": threads, "device": "cpu"})},
              "tracking": {"runs_root": str(root / "runs")}}
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    rows = [json.loads(x) for x in run.paths.metrics.read_text().splitlines()]
    timed = [r for r in rows if r["kind"] == "train" and r["step"] > skip]
    evals = [r for r in rows if r["kind"] == "eval"]
    # Each row's real tokens over its seconds (grouped batches differ in length from step to step).
    tok_s = sum(r["tokens"] for r in timed) / sum(r["tokens"] / r["tokens_per_s"] for r in timed)
    mfus = [r["mfu"] for r in timed if r.get("mfu") is not None]
    return {"side": "ours-packed" if packed else "ours-grouped" if grouped else "ours", "tokens_per_s": tok_s,
            "mfu": sum(mfus) / len(mfus) if mfus else None, "eval_loss": evals[-1]["eval_loss"], "peak_mem_gb": _peak_gb()}


def _mfu(model: Any, shape: Shape, tokens_per_s: float) -> float | None:
    """TRL's MFU by the formula clustertune's metrics use (None on a CPU: no known peak)."""
    from clustertune.train.throughput import device_peak_flops, flops_per_token, mfu

    return mfu(tokens_per_s, flops_per_token(model, shape.max_length), device_peak_flops()) if shape.gpu else None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--skip", type=int, default=10, help="warm-up steps not timed")
    p.add_argument("--rounds", type=int, default=1, help="the sides take turns this many times")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="bf16",
                   help="both sides (bf16: autocast, TRL's default on a CPU with bf16 instructions)")
    p.add_argument("--shape", choices=sorted(SHAPES), default="cpu",
                   help="cpu: the quickstart's shape; gpu-1b: ~1B Llama at 2048 on one GPU; gpu-rehearsal: its path, tiny, on CPU")
    p.add_argument("--sides", default="trl,trl-packed,ours,ours-packed", help="comma-separated: which sides run")
    p.add_argument("--threads", type=int, default=2, help="torch threads on each side, on a CPU (default 2: the machine's cores)")
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement; "
                   "one thread a side, as the test suite's other processes run")
    p.add_argument("--json", type=Path, default=None, help="also write each round's results here, as they come")
    p.add_argument("--side", choices=["trl", "trl-packed", "ours", "ours-packed", "ours-grouped"], help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.smoke:
        a.shape = "gpu-rehearsal" if a.shape == "gpu-1b" else a.shape
        # One thread: beside the suite's other worker, two spinning threads a side took three times the CPU.
        a.steps, a.skip, a.sides, a.threads = 3, 1, "ours,trl", 1
    if a.side:
        res = (run_trl(a.root, a.steps, a.skip, a.precision, a.side == "trl-packed", a.threads) if a.side.startswith("trl")
               else run_ours(a.root, a.steps, a.skip, a.side == "ours-packed", a.precision, a.side == "ours-grouped",
                             a.threads))
        print("RESULT " + json.dumps(res))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        setup(root, SHAPES[a.shape])
        sides = [x for x in a.sides.split(",") if x]
        pairs = [(x, y) for x, y in PAIRS if x in sides and y in sides]
        ratios: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
        rounds: list[dict[str, dict]] = []
        for k in range(a.rounds):
            order = sides[k % len(sides):] + sides[:k % len(sides)]
            out = {}
            for side in order:
                out[side] = run_side(side, root, a.steps, a.skip, a.precision, a.threads)
                if a.json:
                    a.json.write_text(json.dumps({"shape": a.shape, "rounds": [*rounds, out]}, indent=1) + "\n")
            rounds.append(out)
            print(f"round {k + 1} (order {', '.join(order)}; load {os.getloadavg()[0]:.2f})")
            for side in sides:
                r = out[side]
                iso = "" if r.get("isolated") is None else f"   packed rows vs one at a time: max |dlogit| {r['isolated']:.2e}"
                util = "" if r.get("mfu") is None else f"   MFU {100 * r['mfu']:.1f}%"
                print(f"  {side:12s} {r['tokens_per_s']:9,.0f} real tokens/s   eval loss {r['eval_loss']:.4f}{util}{iso}")
            for side, peer in pairs:
                ratios[(side, peer)].append(out[side]["tokens_per_s"] / out[peer]["tokens_per_s"])
                print(f"  {side} / {peer}: {ratios[(side, peer)][-1]:.2f}x tokens/s, eval loss "
                      f"{100 * (out[side]['eval_loss'] / out[peer]['eval_loss'] - 1):+.1f}%")
        for side, peer in pairs:
            print(f"{side} / {peer}, median of {a.rounds}: {statistics.median(ratios[(side, peer)]):.2f}x "
                  f"({', '.join(f'{x:.2f}' for x in ratios[(side, peer)])})")
        if ("ours", "trl") in ratios:
            print(f"ratio={statistics.median(ratios[('ours', 'trl')]):.2f}")


def run_side(side: str, root: Path, steps: int, skip: int, precision: str, threads: int) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--side", side, "--root", str(root), "--steps", str(steps),
                           "--skip", str(skip), "--precision", precision, "--threads", str(threads)],
                          capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        sys.exit(f"{side} failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[7:])


if __name__ == "__main__":
    main()
