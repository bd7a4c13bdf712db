"""clustertune's training path against transformers' ``Trainer``, side by side.

Every variant trains the same GPT-2-shaped model (same config, same initial seed) on the same
token blocks with AdamW, a linear schedule and clipping, at the same batch and sequence
length. Each measurement runs in a fresh process (compile caches, Accelerate's process-wide
state and allocator high-water marks would otherwise leak between them). Throughput counts
the steady state only: from the end of step ``skip`` (compilation and warm-up done) to the end
of the last step, both points taken after a device sync.

Variants:
  clustertune         clustertune's loop with its default fast path, compile forced on
  clustertune-eager   the same loop with compile off
  trainer             ``Trainer`` defaults (bf16 on a GPU), the ``run_clm.py`` way
  trainer-compile     ``Trainer`` with ``torch_compile`` (and fused AdamW on a GPU)

and, when named in ``--variants``, ``clustertune-graphs`` and ``clustertune-autotune``: the
compiled loop with ``train.compile_mode`` ``reduce-overhead`` (CUDA graphs) and
``max-autotune-no-cudagraphs``.

The token blocks are random ids: throughput does not depend on the text, and the benchmark
needs neither the hub nor ``datasets``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from clustertune.data.prepare import Arrays
from clustertune.errors import UserError
from clustertune.models.heads import name_the_loss
from clustertune.recipe.load import dump_recipe, load_recipe
from clustertune.runs.metrics_file import read_metrics
from clustertune.runs.paths import RunPaths
from clustertune.train.bench_names import MODE_VARIANTS, VARIANTS
from clustertune.train.execute import make_strategy
from clustertune.train.fastpath import pad_vocab, vocab_multiple
from clustertune.train.loop import train_loop
from clustertune.train.precision import reset_accelerate_state
from clustertune.train.throughput import device_peak_flops, flops_per_token, mfu



class BenchError(UserError):
    """Bad benchmark options."""


@dataclass(frozen=True)
class BenchSpec:
    layers: int
    width: int
    heads: int
    seq: int
    vocab: int
    batch: int
    steps: int
    skip: int
    lr: float = 6e-4

    @classmethod
    def preset(cls, size: str) -> BenchSpec:
        import torch

        if size == "auto":
            size = "gpt2" if torch.cuda.is_available() else "tiny"
        if size == "gpt2":  # GPT-2 124M at its full context
            return cls(layers=12, width=768, heads=12, seq=1024, vocab=50257, batch=16, steps=60, skip=10)
        if size == "small":  # ~4M parameters: big enough on CPU for compute to outweigh per-step overhead
            return cls(layers=4, width=256, heads=4, seq=128, vocab=4096, batch=16, steps=40, skip=10)
        return cls(layers=2, width=64, heads=2, seq=64, vocab=512, batch=8, steps=12, skip=4)


def check_options(spec: BenchSpec, variants: list[str], batches: list[int]) -> None:
    known = (*VARIANTS, *MODE_VARIANTS)
    bad = [v for v in variants if v not in known]
    if bad:
        raise BenchError(f"--variants: unknown {', '.join(bad)}; choose from {', '.join(known)}")
    if not variants:
        raise BenchError(f"--variants: give at least one of {', '.join(VARIANTS)}")
    if any(b < 1 for b in batches) or not batches:
        raise BenchError("--batch: batch sizes must be positive integers, e.g. --batch 16,32")
    if spec.steps <= spec.skip:
        raise BenchError(f"--steps ({spec.steps}) must be larger than --skip ({spec.skip}): "
                         "the steps after --skip are the ones measured")
    if spec.skip < 1:
        raise BenchError("--skip: at least 1 warm-up step (the first step compiles)")
    if spec.width % spec.heads:
        raise BenchError(f"--width ({spec.width}) must be a multiple of --heads ({spec.heads})")


# -- one measurement, in this process ---------------------------------------------------------

def _config(spec: BenchSpec) -> Any:
    from transformers import GPT2Config

    return GPT2Config(vocab_size=spec.vocab, n_positions=spec.seq, n_embd=spec.width, n_layer=spec.layers,
                      n_head=spec.heads, bos_token_id=0, eos_token_id=0)


def _blocks(spec: BenchSpec, n: int) -> Any:
    import numpy as np

    return np.random.default_rng(0).integers(0, spec.vocab, size=(n, spec.seq), dtype=np.int64)


def _flops_per_token(spec: BenchSpec) -> float:
    import torch
    from transformers import GPT2LMHeadModel


    with torch.device("meta"):  # the unpadded model: the useful work is the same for every variant
        return flops_per_token(GPT2LMHeadModel(_config(spec)), spec.seq)


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure_clustertune(spec: BenchSpec, compiled: bool, workdir: Path, mode: str = "default") -> float:
    import numpy as np
    import torch
    from transformers import GPT2LMHeadModel

    recipe = load_recipe({
        "name": "bench",
        "model": {"config": "gpt2", "tokenizer": "train"},
        "data": {"dataset": "builtin:pydoc", "block_size": spec.seq},
        "train": {"batch_size": spec.batch, "max_steps": spec.steps, "log_every": spec.skip, "lr": spec.lr,
                  "warmup_steps": spec.skip, "lr_scheduler": "linear", "max_grad_norm": 1.0, "seed": 0,
                  "compile": compiled, "compile_mode": mode, "shuffle": False,
                  # Trainer's precision: bf16 on a GPU that has it, fp32 on CPU (where clustertune's
                  # auto may pick bf16, which would measure the precision, not the loop).
                  "precision": "auto" if torch.cuda.is_available() else "fp32"},
    })
    config = _config(spec)
    pad_vocab(config, vocab_multiple(recipe))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    name_the_loss(model, "causal_lm")  # as clustertune's runs build it: no graph break in the loss
    blocks = _blocks(spec, spec.batch * (spec.steps + 1))
    train = Arrays(input_ids=blocks.astype(np.int32))
    evals = Arrays(input_ids=blocks[: spec.batch].astype(np.int32))
    paths = RunPaths(workdir / "run")
    paths.root.mkdir(parents=True)
    strategy = make_strategy(recipe, paths)
    try:
        train_loop(recipe, model, train, evals, paths, strategy, dump_recipe(recipe), show_progress=False)
    finally:
        reset_accelerate_state()
    # Rows are written after the loss is read back (a device sync) at steps skip, 2*skip, ...
    rows = [r for r in read_metrics(paths.metrics) if r["kind"] == "train"]
    first = next(r for r in rows if r["step"] == spec.skip)
    last = rows[-1]
    return (last["step"] - first["step"]) * spec.batch * spec.seq / (last["time"] - first["time"])


def measure_trainer(spec: BenchSpec, compiled: bool, workdir: Path) -> float:
    import torch
    from transformers import GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    cuda = torch.cuda.is_available()
    blocks = torch.from_numpy(_blocks(spec, spec.batch * (spec.steps + 1)))

    class Blocks(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return len(blocks)

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"input_ids": blocks[i], "labels": blocks[i]}

    marks: dict[int, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step in (spec.skip, spec.steps):
                _sync()
                marks[state.global_step] = time.perf_counter()

    args = TrainingArguments(
        output_dir=str(workdir / "trainer"), per_device_train_batch_size=spec.batch, learning_rate=spec.lr,
        warmup_steps=spec.skip, lr_scheduler_type="linear", max_steps=spec.steps, max_grad_norm=1.0,
        optim="adamw_torch_fused" if compiled and cuda else "adamw_torch", torch_compile=compiled,
        bf16=cuda and torch.cuda.is_bf16_supported(), use_cpu=not cuda, seed=0, report_to=[],
        save_strategy="no", logging_steps=spec.skip, disable_tqdm=True, dataloader_drop_last=True,
        train_sampling_strategy="sequential",
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(_config(spec))
    name_the_loss(model, "causal_lm")  # the same model on both sides: the comparison is of the loops
    Trainer(model=model, args=args, train_dataset=Blocks(), callbacks=[Clock()]).train()
    return (spec.steps - spec.skip) * spec.batch * spec.seq / (marks[spec.steps] - marks[spec.skip])


def measure(variant: str, spec: BenchSpec) -> dict[str, Any]:
    import torch


    with tempfile.TemporaryDirectory() as d:
        if variant.startswith("clustertune"):
            tok_s = measure_clustertune(spec, variant != "clustertune-eager", Path(d),
                                        MODE_VARIANTS.get(variant, "default"))
        else:
            tok_s = measure_trainer(spec, variant == "trainer-compile", Path(d))
    cuda = torch.cuda.is_available()
    return {
        "variant": variant, "batch": spec.batch, "tokens_per_s": tok_s,
        "mfu": mfu(tok_s, _flops_per_token(spec), device_peak_flops()),
        "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None,
        "device": torch.cuda.get_device_name() if cuda else f"CPU ({torch.get_num_threads()} threads)",
    }


# -- side by side ------------------------------------------------------------------------------

def run_side_by_side(spec: BenchSpec, variants: list[str], batches: list[int], repeats: int = 1,
                     echo: Any = print) -> list[dict[str, Any]]:
    """Each (variant, batch) in a fresh process, ``repeats`` times in alternating order (a load
    that drifts during the run then hits every variant alike); one row each, the median run."""
    check_options(spec, variants, batches)
    if repeats < 1:
        raise BenchError("--repeats: at least 1")
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for i in range(repeats):
        for batch in batches:
            for variant in variants if i % 2 == 0 else list(reversed(variants)):
                s = replace(spec, batch=batch)
                cmd = [sys.executable, "-m", "clustertune.train.bench", variant, json.dumps(asdict(s))]
                env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    raise RuntimeError(f"benchmark {variant} at batch {batch} failed:\n{out.stderr[-4000:]}")
                row = json.loads(out.stdout.strip().splitlines()[-1])
                echo(f"  run {i + 1}: {variant:<18} batch {batch:<4} {row['tokens_per_s']:>12,.0f} tokens/s")
                runs.setdefault((variant, batch), []).append(row)
    results = []
    for batch in batches:
        for variant in variants:
            rows = sorted(runs[(variant, batch)], key=lambda r: r["tokens_per_s"])
            results.append(rows[len(rows) // 2])
    return results


def report(spec: BenchSpec, results: list[dict[str, Any]]) -> list[str]:
    """The table and the ratios, as lines of text."""
    import torch
    from transformers import GPT2LMHeadModel

    with torch.device("meta"):
        n = sum(p.numel() for p in GPT2LMHeadModel(_config(spec)).parameters())
    lines = [f"model: GPT-2 shape, {spec.layers} layers, width {spec.width}, ~{n / 1e6:.1f}M parameters, "
             f"sequence {spec.seq}, {spec.steps} steps ({spec.skip} not counted); device: {results[0]['device']}",
             f"{'variant':<18} {'batch':>5} {'tokens/s':>12} {'MFU':>7} {'peak GB':>8}"]
    for r in results:
        m = f"{r['mfu'] * 100:6.1f}%" if r["mfu"] is not None else "      -"
        mem = f"{r['peak_mem_gb']:8.2f}" if r["peak_mem_gb"] is not None else "       -"
        lines.append(f"{r['variant']:<18} {r['batch']:>5} {r['tokens_per_s']:>12,.0f} {m} {mem}")

    def best(variant: str, batch: int | None = None) -> dict[str, Any] | None:
        rows = [r for r in results if r["variant"] == variant and (batch is None or r["batch"] == batch)]
        return max(rows, key=lambda r: r["tokens_per_s"]) if rows else None

    def ratio(label: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> None:
        if a and b:
            lines.append(f"ratio {label}: {a['tokens_per_s'] / b['tokens_per_s']:.2f}x "
                         f"(batch {a['batch']} vs {b['batch']})")

    for batch in sorted({r["batch"] for r in results}):
        ratio(f"clustertune / Trainer default, batch {batch}", best("clustertune", batch), best("trainer", batch))
        ratio(f"clustertune / Trainer+compile, batch {batch}", best("clustertune", batch),
              best("trainer-compile", batch))
        ratio(f"compiled / eager (clustertune), batch {batch}", best("clustertune", batch),
              best("clustertune-eager", batch))
        for variant, mode in MODE_VARIANTS.items():
            ratio(f"{mode} / default compile (clustertune), batch {batch}", best(variant, batch),
                  best("clustertune", batch))
    if len({r["batch"] for r in results}) > 1:
        trainers = [r for r in (best("trainer"), best("trainer-compile")) if r]
        ratio("clustertune best / Trainer best (each at its best batch)", best("clustertune"),
              max(trainers, key=lambda r: r["tokens_per_s"]) if trainers else None)
    return lines


def _one() -> None:
    """``python -m clustertune.train.bench VARIANT SPEC_JSON``: one measurement, JSON on stdout."""
    variant, spec = sys.argv[1], BenchSpec(**json.loads(sys.argv[2]))
    import logging

    logging.getLogger("clustertune").setLevel(logging.WARNING)
    print(json.dumps(measure(variant, spec)))


if __name__ == "__main__":
    _one()
