"""The correctness checks (:mod:`clustertune.train.correctness`) run once per run on its first
batches, before the first step.

Which checks apply follows the recipe: trained tokens in every batch (SFT), packing's two checks where SFT rows are packed, the start near
ln(vocab) for a causal LM built from a config, the adapter's targets where there is an adapter,
single-token markers where a chat template is used (a warning only). The checks that run the
model do so only in a run of one process: under FSDP or ZeRO-3 a forward pass is a collective
that every rank must join. They leave no trace: the model goes back to training mode, and the
random generators are put back as they were, so a run with the checks trains the same numbers
as one without. A failed check stops the run with its message (:class:`PreflightError`).
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from clustertune.data.loader import eval_batches
from clustertune.errors import UserError
from clustertune.recipe.schema import Recipe
from clustertune.train import correctness as check

log = logging.getLogger("clustertune")

# Enough batches to see a first pass over a sample, few enough to cost less than a step.
BATCHES = 4
_MARKER = re.compile(r"<\|[A-Za-z0-9_]+\|>")


class PreflightError(UserError):
    """A check on the first batches failed: the run would train without learning."""


@dataclass
class Report:
    passed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def line(self) -> str | None:
        """What the checks found, for the log; None when none applied (nothing to say)."""
        parts = [f"{n} check{'s' if n != 1 else ''} passed" for n in [len(self.passed)] if n]
        parts += [f"{n} warning{'s' if n != 1 else ''}" for n in [len(self.warnings)] if n]
        return f"preflight: {', '.join(parts)}" if parts else None

    def record(self) -> dict[str, Any]:
        return {"passed": self.passed, "warnings": self.warnings, "failed": self.failed}


def run_checks(recipe: Recipe, model: torch.nn.Module, train_arrays: Any, tokenizer: Any, *, processes: int,
               device: torch.device, forward: Callable[..., Any], fresh_model: bool) -> Report:
    """The checks that apply to ``recipe``; raises :class:`PreflightError` when one fails."""
    report = Report()

    def note(name: str, problem: str | None, warn_only: bool = False) -> None:
        if problem is None:
            report.passed.append(name)
        elif warn_only:
            report.warnings.append(f"{name}: {problem}")
            log.warning("preflight: %s", problem)
        else:
            report.failed.append(f"{name}: {problem}")

    chats = recipe.traits.templated  # conversations: loss masks, packing, a chat template
    state = _random_state()
    was_training = model.training
    try:
        model.eval()
        # The strategy places the model on its device only when the loop prepares it, after these
        # checks: the batches go where the model's weights are now (the host, before that).
        batches = _first_batches(recipe, train_arrays, _weights_device(model, device))
        if batches and chats:
            note("trained tokens in every batch", check.trained_tokens_in_every_batch(batches))
        # The model runs here only when this process holds all of it: one process, and no weight
        # partitioned away at build time (ZeRO-3 builds empty placeholders) or left on meta.
        alone = processes == 1 and all(p.numel() > 0 and p.device.type != "meta" for p in model.parameters())
        packed = chats and recipe.data.sft.packing
        if packed and alone and batches:
            row = _packed_row(batches)
            if row is not None:
                note("packed loss equals unpacked", check.packed_equals_unpacked(model, row, forward))
                note("no attention across packed examples", check.no_attention_across_examples(model, row, forward))
        if fresh_model and alone and batches and recipe.traits.packed:
            with torch.no_grad():
                loss = float(forward(model, batches[0]).loss)
            note("first loss near ln(vocab)", check.starts_near_uniform(loss, int(model.config.vocab_size)))
        if recipe.model.adapter is not None:
            problem, count = check.adapter_trains_its_targets(model, recipe.model.adapter.target_modules)
            note(f"adapter trains its targets ({count:,} parameters)", problem)
        if chats:
            markers = sorted(set(_MARKER.findall(_template_text(tokenizer))))
            if markers:
                note("chat template markers are single tokens", check.template_tokens_are_single(tokenizer, markers),
                     warn_only=True)
    finally:
        model.train(was_training)
        _restore(state)
    if report.failed:
        raise PreflightError("the checks on the first batches failed, before the first step:\n  - "
                             + "\n  - ".join(report.failed)
                             + "\n(train.preflight=false skips these checks)")
    if report.line() is not None:
        log.info("%s", report.line())
    return report


def _weights_device(model: torch.nn.Module, fallback: torch.device) -> torch.device:
    """Where ``model``'s first real (not meta) parameter lives; ``fallback`` when none does."""
    for p in model.parameters():
        if p.device.type != "meta":
            return p.device
    return fallback


def _first_batches(recipe: Recipe, train_arrays: Any, device: torch.device) -> list[dict[str, torch.Tensor]]:
    if not hasattr(train_arrays, "__len__") or len(train_arrays) == 0:
        return []  # streamed data: read once, by the loop
    out = []
    for batch, _ in eval_batches(train_arrays, recipe.train.batch_size, 0, 1, device):
        out.append(batch)
        if len(out) == BATCHES:
            break
    return out


def _packed_row(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor] | None:
    """The first row that holds two examples or more, as a batch of one row."""
    for b in batches:
        if "position_ids" not in b:
            return None
        for r in range(b["input_ids"].shape[0]):
            if int((b["position_ids"][r] == 0).sum()) >= 2:
                return {k: b[k][r : r + 1] for k in ("input_ids", "labels", "position_ids")}
    return None


def _template_text(tokenizer: Any) -> str:
    t = getattr(tokenizer, "chat_template", None)
    if isinstance(t, dict):
        t = t.get("default")
    return t or ""


def _random_state() -> tuple[Any, ...]:
    return (random.getstate(), np.random.get_state(), torch.get_rng_state(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)


def _restore(state: tuple[Any, ...]) -> None:
    random.setstate(state[0])
    np.random.set_state(state[1])
    torch.set_rng_state(state[2])
    if state[3] is not None:
        torch.cuda.set_rng_state_all(state[3])


def fresh(recipe: Recipe) -> bool:
    """Whether the run's model starts from random weights (built from a config)."""
    return recipe.model.config is not None and not recipe.model.name_or_path



