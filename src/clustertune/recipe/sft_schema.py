"""The ``data.sft`` section: how chat and prompt/completion examples become training rows.

Only read for ``task: sft``. ``data.max_length`` caps the tokens of one example (and of one
packed row); the rest lives here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from clustertune.recipe.section import Section

SFT_FORMATS = ("auto", "messages", "conversations", "prompt_completion", "alpaca")
# The names other tools give these shapes, taken as the same.
FORMAT_NAMES = {"sharegpt": "conversations", "openai": "messages", "chat": "messages"}


class SFTSection(Section):
    format: Literal["auto", "messages", "conversations", "prompt_completion", "alpaca"] = "auto"
    """Shape of an example. ``messages`` (also ``openai``): a list of ``{role, content}`` turns
    (roles ``system``, ``user``, ``assistant``); ``conversations`` (also ``sharegpt``): ShareGPT's
    list of ``{from, value}`` turns (``human``/``gpt``/``system``), converted to messages;
    ``prompt_completion``: one prompt and one completion column, a single turn; ``alpaca``:
    ``instruction``, an optional ``input`` (added to the instruction after a blank line) and
    ``output``, a single turn. ``auto`` picks the one whose columns the data has."""

    @field_validator("format", mode="before")
    @classmethod
    def _peer_names(cls, value: Any) -> Any:
        return FORMAT_NAMES.get(value, value) if isinstance(value, str) else value

    messages_column: str = "messages"
    """Column holding the turns for ``format: messages``."""

    conversations_column: str = "conversations"
    """Column holding the turns for ``format: conversations``."""

    prompt_column: str = "prompt"
    """Column holding the user's prompt for ``format: prompt_completion``."""

    completion_column: str = "completion"
    """Column holding the answer for ``format: prompt_completion``."""

    instruction_column: str = "instruction"
    """Column holding the instruction for ``format: alpaca``."""

    input_column: str = "input"
    """Column holding the optional input for ``format: alpaca`` (empty or missing: none)."""

    output_column: str = "output"
    """Column holding the answer for ``format: alpaca``."""

    chat_template: str | None = None
    """Chat template: unset uses the tokenizer's own; ``chatml`` or ``llama3`` name a built-in
    one (for tokenizers without a template); anything else is a path to a Jinja file. The
    template used is saved into the run's tokenizer, so the trained model chats the way it was
    trained."""

    loss_on: Literal["assistant", "completion", "all"] = "assistant"
    """Which tokens carry the loss (the others get label -100): ``assistant`` (every assistant
    turn with its end-of-turn marker), ``completion`` (the last assistant turn only), ``all``
    (the whole rendered text)."""

    packing: bool = False
    """Put several examples into each row of ``data.max_length`` tokens (best-fit decreasing,
    deterministic). Each example keeps its own positions and attends only to itself. Off:
    one example per row, batches padded to the longest example in the batch."""

    too_long: Literal["truncate", "drop"] = "truncate"
    """Examples longer than ``data.max_length`` tokens: ``truncate`` keeps the first
    ``max_length`` tokens, ``drop`` leaves the example out. Examples left with no trained token
    are dropped either way; ``clustertune prepare`` reports both counts."""

    role_order: Literal["alternate", "any"] = "alternate"
    """Turn order every conversation must follow: ``alternate`` is user, assistant, user, ...
    after one optional leading system turn, as chat templates expect; ``any`` accepts any order
    and ``tool`` turns (function-calling data)."""

    generation_samples: int = Field(default=16, ge=0)
    """Held-out conversations whose last assistant turn is generated (greedy) at every
    evaluation and compared with the reference: exact match and contains-the-reference."""

    max_new_tokens: int = Field(default=32, ge=1)
    """Tokens generated per held-out prompt in the generation check."""
