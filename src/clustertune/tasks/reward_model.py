"""``task: reward_model``: a scalar score for a text, trained on preference pairs (the ``pairs``
data shape) with the Bradley-Terry loss, ``-log sigmoid(score(chosen) - score(rejected))``, as
TRL's reward trainer and the InstructGPT paper train one. The model is a sequence classifier with
one output; evaluations report the loss and the pairwise accuracy (how often the chosen text
scores higher) on held-out pairs. The trained run is a reward for GRPO and RLOO:
``rl.rewards: [{model: run:<id>}]`` scores each prompt + completion with it. The base may be
another run's language model (``model.name_or_path: run:<id>``), which gets a fresh head."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustertune.tasks.base import Task


@dataclass
class PairOutput:
    loss: Any
    logits: Any
    """Per pair (rejected score, chosen score): the chosen text won where index 1 is the larger."""


def bradley_terry(model: Any, batch: dict[str, Any], forward: Callable[[Any, dict[str, Any]], Any]) -> PairOutput:
    """Both texts of every pair scored in one forward call, the loss their margin's, over the real
    pairs only (an evaluation's padding pairs carry label -100)."""
    import torch.nn.functional as F

    ids, mask = batch["input_ids"], batch["attention_mask"]
    pairs = ids.shape[0]
    out = forward(model, {"input_ids": ids.flatten(0, 1), "attention_mask": mask.flatten(0, 1)})
    scores = out.logits.float().view(pairs, 2)  # (chosen, rejected)
    real = (batch["labels"] != -100).float()
    loss = -(F.logsigmoid(scores[:, 0] - scores[:, 1]) * real).sum() / real.sum().clamp(min=1.0)
    return PairOutput(loss=loss, logits=scores.flip(-1))


@dataclass(frozen=True)
class RewardModelTask(Task):
    @property
    def predicts_labels(self) -> bool:
        return False  # one score, no classes: nothing for train.metrics to read

    @property
    def counts_correct(self) -> bool:
        return True  # pairwise accuracy: the chosen text scored higher (labels are all 1)


REWARD_MODEL = RewardModelTask(name="reward_model", summary="reward model on preference pairs",
                               model_noun="A reward model", base_model_from_run=True, batch_loss=bradley_terry)
