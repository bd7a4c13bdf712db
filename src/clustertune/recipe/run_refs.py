"""How a recipe names a model that an earlier run made: ``run:<run>`` (its final model) or
``run:<run>@step-N`` (its checkpoint of step N), in ``model.name_or_path`` and the RL section's
model keys. This module only reads the spelling; the one place that turns such a name into a run
and what it holds is :func:`clustertune.models.run_models.resolve_run_model`.
"""

from __future__ import annotations

RUN_PREFIX = "run:"


def is_run_ref(value: str | None) -> bool:
    """Whether ``value`` is written as a run reference (``run:...``), whatever follows."""
    return bool(value) and str(value).startswith(RUN_PREFIX)


def run_part(value: str | None) -> str:
    """What follows ``run:`` (a run id, prefix or name, maybe ``@step-N``); '' for anything else."""
    return str(value)[len(RUN_PREFIX):] if is_run_ref(value) else ""


def names_checkpoint(value: str | None) -> bool:
    """A run reference to one of the run's checkpoints (``run:<run>@step-N``)."""
    return is_run_ref(value) and "@" in run_part(value)


def run_ref(ref: str) -> str:
    """``ref`` (``RUN`` or ``RUN@step-N``) as a recipe writes it."""
    return RUN_PREFIX + ref
