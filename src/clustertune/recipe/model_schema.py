"""The recipe's ``model`` section: which model (a hub name, a local path, a run, or a config to
build from scratch), its config overrides, tokenizer, dtype, attention kernel and adapter."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, field_validator

from clustertune.recipe.adapter_schema import AdapterSection
from clustertune.recipe.section import Section


def _override_scalar(text: str) -> Any:
    """A value of the ``k=v`` string form as run_clm writes it: a number, true/false, none, else
    the text; the model's config then gives it the type it holds (models/build.py)."""
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        if math.isfinite(number):
            return number
    return {"true": True, "false": False, "none": None, "null": None}.get(text.lower(), text)


def config_overrides_from_text(text: str) -> dict[str, Any]:
    """run_clm's ``--config_overrides`` form, ``"n_embd=128,n_head=4"``, as a mapping."""
    out: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, eq, raw = part.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ValueError(f"{part!r} is not name=value; write config overrides as \"n_embd=128,n_head=4\" "
                             "(run_clm's --config_overrides) or as a mapping {n_embd: 128, n_head: 4}")
        if name in out:
            raise ValueError(f"{name!r} is given twice in {text!r}; keep one")
        out[name] = _override_scalar(raw.strip())
    return out


def _mapping_or_text(schema: dict[str, Any]) -> None:
    """Editors accept the ``k=v`` string form too (the validator below turns it into a mapping)."""
    for k in ("type", "additionalProperties"):
        schema.pop(k, None)
    schema["anyOf"] = [{"type": "object", "additionalProperties": True}, {"type": "string"}]


class ModelSection(Section):
    name_or_path: str | None = None
    """Pretrained weights: a Hugging Face Hub name (``gpt2``, ``bert-base-cased``), a local
    directory written by ``save_pretrained``, or ``run:<run-id>`` for the final model of an
    earlier clustertune run (``run:<run-id>@step-N``: its checkpoint of step N). Exactly one of
    ``name_or_path`` and ``config``."""

    revision: str | None = None
    """Hub revision of ``name_or_path`` (a branch, tag or commit), as ``from_pretrained(...,
    revision=)`` takes it; default ``main``. Applies to its weights, config and tokenizer (when
    ``tokenizer`` is unset); the commit used is recorded in run.json (``model.commit``)."""

    trust_remote_code: bool = False
    """Run the modelling code a model ships beside its weights (a config.json whose
    ``auto_map`` names its own classes). Off: such a model is refused before anything runs,
    naming this key. Only turn it on for a model whose code you trust: it runs with your rights."""

    config: str | None = None
    """Build a fresh, randomly initialised model: a model type (``gpt2``, ``bert``, ``llama``),
    or a path to a ``config.json`` or a directory holding one."""

    config_overrides: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_mapping_or_text)
    """Config attributes to change before the model is built, e.g. ``{n_layer: 2, n_embd: 64}``,
    or as run_clm's ``--config_overrides`` string ``"n_embd=128,n_head=4"``. Each value takes the
    type the model's config holds for it (``128`` stays an int, ``resid_pdrop=0`` becomes a float,
    ``scale_attn_weights=false`` a bool); an attribute the config lacks is an error with a
    did-you-mean."""

    tokenizer: str | None = None
    """Tokenizer: a hub name, a local directory, or ``train`` to train a byte-level BPE on the
    training text. Defaults to ``name_or_path``; required with ``config``."""

    tokenizer_vocab_size: int = Field(default=4096, ge=256, le=1_000_000)
    """Vocabulary size when ``tokenizer: train``."""

    num_labels: int | None = Field(default=None, ge=2)
    """Number of classes for ``sequence_classification``; unset: inferred from the data (the
    label names, or the largest integer label + 1)."""

    ignore_mismatched_sizes: bool = False
    """Pretrained weights whose shape no longer fits the model (``config_overrides`` that change
    a width) are re-initialised instead of refused. A classification head with another
    ``num_labels`` is always re-initialised (and logged)."""

    low_cpu_mem_usage: bool = True
    """Load pretrained weights without first materialising a randomly initialised copy
    (transformers 5 always does this; the switch matters for transformers 4)."""

    attn_implementation: str | None = None
    """Attention kernel passed to transformers (``sdpa``, ``eager``, ``flash_attention_2``).
    Unset: transformers' default (``sdpa``), except when training on CPU in bf16 at up to 256
    positions, where ``eager`` is faster (the CPU's SDPA kernel is slow in bf16 at short
    sequences); the log says when that is chosen."""

    adapter: AdapterSection | None = None
    """Train an adapter (LoRA, DoRA, QLoRA through PEFT) on the frozen pretrained weights instead
    of every weight: checkpoints hold the adapter and its optimizer state only, and ``model/``
    is a PEFT adapter directory (``PeftModel.from_pretrained`` loads it onto the base)."""

    @field_validator("config_overrides", mode="before")
    @classmethod
    def _overrides_string(cls, value: Any) -> Any:
        return config_overrides_from_text(value) if isinstance(value, str) else value
