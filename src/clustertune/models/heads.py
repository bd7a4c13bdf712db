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
