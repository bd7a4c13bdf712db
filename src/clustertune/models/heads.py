"""The heads a task's model has (:mod:`clustertune.recipe.task_traits`): which transformers
auto class builds it and which PEFT task type wraps it."""

from __future__ import annotations

from typing import Any

from clustertune.recipe.task_traits import ModelHead, traits_of

PEFT_TASK_TYPES: dict[ModelHead, str] = {"causal_lm": "CAUSAL_LM", "classifier": "SEQ_CLS"}


def head_of(task: str) -> ModelHead:
    """The head of ``task``'s model (a language-model head for anything that is not a recipe's)."""
    traits = traits_of(task)
    return traits.head if traits is not None else "causal_lm"


def auto_class(head: ModelHead) -> Any:
    """transformers' auto class for models with this head."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    return AutoModelForSequenceClassification if head == "classifier" else AutoModelForCausalLM


def name_the_loss(model: Any, head: ModelHead) -> None:
    """Name a language model's loss where its class name does not (GPT-2's ``GPT2LMHeadModel``).

    transformers derives the loss from the class name and, finding none, warns at every first
    forward that ``loss_type=None`` is unrecognized before using the causal-LM loss anyway. The
    warning is noise in every run's log, and under ``torch.compile`` a graph break in the loss.
    Naming the loss it falls back to changes nothing else."""
    if head == "causal_lm" and getattr(model, "loss_type", "") is None:
        model.loss_type = "ForCausalLM"
