"""``model.adapter``: train a small adapter (LoRA, DoRA, QLoRA) on frozen pretrained weights.

Kept beside schema.py so the model section stays readable. The checks here need no network
and no model; the ones that need the model's module names (``target_modules``), PEFT or
bitsandbytes run in the preflight of ``clustertune run`` (clustertune.models.adapters).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from clustertune.recipe.section import Section

ALL_LINEAR = "all-linear"
# Settings that only say what to write at the end: a resume may change them.
OUTPUT_ONLY = ("save_merged",)


class AdapterSection(Section):
    type: Literal["lora", "dora", "qlora"] = "lora"
    """``lora`` (low-rank matrices beside each targeted linear layer), ``dora`` (LoRA plus a
    trained magnitude per output, weight-decomposed) or ``qlora`` (LoRA on a base loaded in
    4-bit NF4 through bitsandbytes, the ``qlora`` extra: ``clustertune doctor`` prints how to
    install it here)."""

    rank: int = Field(default=8, ge=1)
    """Rank ``r`` of the low-rank update: trainable parameters grow linearly with it."""

    alpha: float = Field(default=16.0, gt=0.0)
    """Scale of the update (``alpha / rank`` multiplies it)."""

    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Dropout on the adapter's input."""

    target_modules: str | list[str] = ALL_LINEAR
    """Layers that get an adapter: ``all-linear`` (every linear layer but the output head), a
    list of module names (``[q_proj, v_proj]``; a name matches a module whose path ends with
    it), or one regular expression matched against full module paths."""

    modules_to_save: list[str] = Field(default_factory=list)
    """Modules trained in full beside the adapter and saved with it (e.g. ``[lm_head]``, or a
    classification head; the head of ``sequence_classification`` is added by itself)."""

    trainable_token_indices: list[int | str] = Field(default_factory=list)
    """Rows of the input embedding (and of a tied output layer) trained beside the adapter:
    token ids, or tokens as strings (``"<|im_start|>"``), e.g. the turn markers a chat template
    adds. Only these rows change; the rest of the embedding stays frozen."""

    save_merged: bool = False
    """Also write the base with the adapter merged in, as a plain ``save_pretrained`` directory
    with the tokenizer (``model-merged/`` in the run directory), beside the adapter in ``model/``."""

    def settings(self) -> dict[str, Any]:
        """What the trained weights depend on (checked at resume): all but the output switches."""
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in OUTPUT_ONLY}


def adapter_problems(recipe: Any) -> list[tuple[str, str]]:
    """Adapter settings that contradict the rest of the recipe: (key, message with the fix)."""
    a = recipe.model.adapter
    if a is None:
        return []
    out: list[tuple[str, str]] = []
    t = recipe.train
    if recipe.task == "rlhf":
        out.append(("model.adapter", "not used by task rlhf: train the adapter in a causal_lm or sft run and "
                    "start from it with rl.policy: run:<run-id>"))
    elif recipe.model.config is not None:
        out.append(("model.adapter", "an adapter trains on top of pretrained weights, but model.config builds "
                    "a fresh, random model: set model.name_or_path (a hub name or a save_pretrained directory), "
                    "or drop model.adapter to train every weight"))
    if a.type == "qlora" and t.effective_offload != "none":
        out.append(("train.offload", "qlora's 4-bit base is not offloaded here: use train.offload=none "
                    "(the 4-bit base is already about a quarter of a 16-bit copy)"))
    if a.type == "qlora" and t.precision == "fp16":
        out.append(("train.precision", "qlora computes in bf16 or fp32: use train.precision=bf16 (or auto)"))
    return out
