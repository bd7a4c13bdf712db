"""The shapes a task's data is prepared into, and what each means for the cache.

A recipe's task declares its shape (:mod:`clustertune.recipe.task_traits`); preparation, the
fingerprint and the loader follow the shape, never the task's name:

- ``packed_text``: every text concatenated and cut into blocks of ``data.block_size`` tokens
  (``run_clm.py``'s grouping), one sample per block;
- ``labelled_text``: one sample per example, truncated and padded to ``data.max_length``, with
  its class id (the label set is inferred from the data and recorded in the manifest);
- ``chats``: one sample per conversation or prompt/completion pair, rendered through a chat
  template, the loss on the answer tokens only (packed into rows when ``data.sft.packing``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clustertune.errors import DataError
from clustertune.recipe.schema import DataSection, Recipe
from clustertune.recipe.task_traits import DataShape


@dataclass(frozen=True)
class Shape:
    name: DataShape
    packed: bool
    """Texts concatenated into blocks: no example boundaries survive."""
    labelled: bool
    """One class label per example, from ``data.label_column``."""
    templated: bool
    """Rendered through a chat template (part of the fingerprint), loss on the answers."""

    @property
    def needs_text_column(self) -> bool:
        """Whether the raw examples must carry ``data.text_column`` (conversations carry messages)."""
        return not self.templated

    def processing(self, d: DataSection) -> dict[str, Any]:
        """What decides this shape's bytes beyond the source and the tokenizer."""
        if self.packed:
            return {"block_size": d.block_size, "packing": "concat-all-drop-remainder", "special_tokens": True}
        if self.templated:
            # Format, columns, masking rule (loss_on), packing, too_long and the generation prompts;
            # the template's text joins the inputs where the tokenizer is known.
            return {"max_length": d.max_length, "sft": d.sft.model_dump(mode="json"), "sft_format": 2}
        return {"max_length": d.max_length, "truncation": "right", "padding": "max_length"}


SHAPES: dict[DataShape, Shape] = {
    "packed_text": Shape("packed_text", packed=True, labelled=False, templated=False),
    "labelled_text": Shape("labelled_text", packed=False, labelled=True, templated=False),
    "chats": Shape("chats", packed=False, labelled=False, templated=True),
}


def shape_of(recipe: Recipe) -> Shape:
    """The shape ``recipe``'s data is prepared into; a DataError for a task that prepares none."""
    name = recipe.traits.data
    if name is None:
        raise DataError(f"task {recipe.task} prepares no data: its trainer loads its own")
    return SHAPES[name]
