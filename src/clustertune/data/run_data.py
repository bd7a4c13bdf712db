"""A run's data step, written once for every place it happens.

Where the data of a run is prepared depends on the backend (the submitting host for a local,
SSH or in-process run; the job's first step on SLURM), but what happens is the same: the
recipe's data is prepared into the content-addressed cache (a cache hit when any run prepared
it before, and the check of every example when not), then recorded in the run directory
(``data.json`` and ``tokenizer/``), which is all a rank reads. A task whose trainer loads its
own data (TRL's prompts and preference pairs) has nothing to prepare. A run that already holds
its data (a resume, a requeued job) keeps it: the data a run started with is the data it ends on.
"""

from __future__ import annotations

from clustertune.data.cache import PreparedDataset, prepare
from clustertune.data.staging import write_run_data
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths


def prepare_for_run(recipe: Recipe) -> PreparedDataset | None:
    """The recipe's data prepared into the cache (and so checked), or None when its task's
    trainer loads its own. Called before a new run's directory exists, bad data leaves none."""
    if recipe.traits.data is None:
        return None
    return prepare(recipe)


def holds_data(paths: RunPaths) -> bool:
    """Whether the run directory already records its data (an earlier attempt's data step)."""
    return paths.data.is_file() and paths.has_tokenizer


def data_step(recipe: Recipe, paths: RunPaths, prepared: PreparedDataset | None = None) -> PreparedDataset | None:
    """The run's data step: prepared and recorded in the run directory. Returns what it
    recorded; None when the run holds its data already or its task has none to prepare.

    ``prepared``: prepared already by the caller's check, in this attempt. It is recorded even
    where the run held its data, so the record names where the cache has it now (the in-process
    check prepares at every attempt, after a resume's fingerprint was found unchanged)."""
    if prepared is None:
        if holds_data(paths):
            return None
        prepared = prepare_for_run(recipe)
    if prepared is None:
        return None
    write_run_data(prepared, paths)
    return prepared
