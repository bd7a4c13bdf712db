"""What each task's recipe declares about its data and its model: the schema's part of a task.

The layers below the tasks (data, models, runs) read these traits instead of testing a task's
name: the shape its data is prepared into and the head its model has. What a task *does* (its
loss weights, evaluation, reports, preflight) lives in :mod:`clustertune.tasks`, one module per
task. Adding a task: a module there, its name in :data:`clustertune.recipe.schema.Task`, a line
here, its schema fields and tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DataShape = Literal["packed_text", "labelled_text", "chats", "pairs"]
ModelHead = Literal["causal_lm", "classifier"]


@dataclass(frozen=True)
class TaskTraits:
    data: DataShape | None
    """The shape its data is prepared into (:attr:`packed`, :attr:`labelled`, :attr:`templated`
    say what each means); None: its trainer loads its own data (TRL's prompts and preference
    pairs), nothing is prepared."""

    head: ModelHead
    """``causal_lm``: a language-model head (the model writes text); ``classifier``: one label per text."""

    trainer: Literal["loop", "trl"] = "loop"
    """``loop``: clustertune's training loop; ``trl``: one of TRL's trainers (its own loop,
    data and metrics: rewards, KL), fed into the run by callbacks."""

    # What each shape means for preparing, fingerprinting and loading the data:

    @property
    def packed(self) -> bool:
        """``packed_text``: every text concatenated and cut into blocks of ``data.block_size``
        tokens (``run_clm.py``'s grouping), one sample per block: no example boundaries survive."""
        return self.data == "packed_text"

    @property
    def labelled(self) -> bool:
        """``labelled_text``: one sample per example, cut and padded to ``data.max_length``, with
        its class id from ``data.label_column`` (the label set is read from the data and recorded
        in the manifest)."""
        return self.data == "labelled_text"

    @property
    def templated(self) -> bool:
        """``chats``: one sample per conversation or prompt/completion pair, rendered through a
        chat template (part of the fingerprint), the loss on the answer tokens only (packed into
        rows when ``data.sft.packing``); the examples carry messages, not ``data.text_column``."""
        return self.data == "chats"

    @property
    def fixed_shapes(self) -> bool:
        """Every training batch has one shape (blocks of ``data.block_size``, labelled texts padded
        to ``data.max_length``): what CUDA graphs replay. Chats and pairs are cut to the longest
        row of each batch."""
        return self.packed or self.labelled


TASK_TRAITS: dict[str, TaskTraits] = {
    "causal_lm": TaskTraits(data="packed_text", head="causal_lm"),
    "sequence_classification": TaskTraits(data="labelled_text", head="classifier"),
    "sft": TaskTraits(data="chats", head="causal_lm"),
    "rlhf": TaskTraits(data=None, head="causal_lm", trainer="trl"),
    # A scalar head: the sequence classifier's, with one output (the manifest's label set has one).
    "reward_model": TaskTraits(data="pairs", head="classifier"),
}


def traits_of(task: str) -> TaskTraits | None:
    """A task's traits; None for a run that is not a recipe's (a user's own command)."""
    return TASK_TRAITS.get(task)
