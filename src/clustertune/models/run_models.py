"""A model that an earlier run made, as users name it: ``run:<run>`` (its final model) or
``run:<run>@step-N`` (its checkpoint of step N) in a recipe, and ``RUN`` or ``RUN@step-N`` on
the command line (``generate``, ``chat``, ``eval``, ``export``).

:func:`resolve_run_model` is the one place such a name is turned into a run and what it holds:
the preflight, the launcher (a base, an RL policy, reference, value or reward model), the
training side and the commands that use a trained model all go through it, so a name that one
of them takes, every other one takes too, and a wrong one gets the same message everywhere.
Nothing is loaded or written here: turning a checkpoint into a model directory happens above
(:mod:`clustertune.use.bases`), merging an adapter run's adapter into its base in
:func:`clustertune.models.adapters.plain_model`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from clustertune.errors import RunError
from clustertune.recipe.run_refs import is_run_ref, run_part, run_ref
from clustertune.runs.paths import checkpoint_ref, checkpoint_step, split_step
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run


@dataclass(frozen=True)
class RunModel:
    """The model a run reference names: the final model of ``run``, or (``step`` set) its
    complete checkpoint of that step. ``prefixed``: it was written ``run:...`` (in a recipe), so
    the references its messages suggest are written that way too."""

    run: Run
    step: int | None = None
    prefixed: bool = True

    def name(self, step: int | None = None) -> str:
        """This reference (or another checkpoint of the run) as the user writes it."""
        step = self.step if step is None else step
        ref = checkpoint_ref(self.run.id, step) if step is not None else self.run.id
        return run_ref(ref) if self.prefixed else ref

    @property
    def path(self) -> Path:
        """Where it is now, without writing anything: the final model directory (an adapter
        run's adapter directory), or the checkpoint written out as a model once a run named it,
        else the checkpoint's own directory."""
        paths = self.run.paths
        if self.step is None:
            return paths.model
        made = paths.checkpoint_model(self.step)
        return made if (made / "config.json").is_file() else paths.checkpoint(self.step)

    def checked(self) -> RunModel:
        """This model, once it is there: RunError saying what to do when it is not (a run
        still training, one that stopped before its end, a checkpoint it does not have)."""
        run, paths = self.run, self.run.paths
        if self.step is not None:
            if paths.checkpoint(self.step) not in paths.complete_checkpoints():
                raise RunError(f"run {run.id} has no complete checkpoint of step {self.step} (its checkpoints: "
                               f"{paths.checkpoint_list()}); `clustertune runs show {run.id}` lists them")
            return self
        if paths.has_final_model:
            return self
        found = paths.complete_checkpoints()
        newest = self.name(checkpoint_step(found[-1].name) or 0) if found else None
        if run.state in (RunState.PENDING, RunState.RUNNING):
            raise RunError(f"run {run.id} is {run.state.value}: its final model comes when it ends"
                           + (f"; its newest checkpoint is `{newest}`" if newest else ", and it has no checkpoint yet")
                           + f" (`clustertune status {run.id}` follows it)")
        hint = f"; its newest checkpoint is `{newest}`" if newest else ""
        raise RunError(f"run {run.id} is {run.state.value} and has no final model yet ({paths.model} is missing){hint}; "
                       f"finish it with `clustertune run --resume {run.id}` or name another run")


def resolve_run_model(ref: str, key: str | None = None, runs_root_dir: str | os.PathLike[str] | None = None,
                      prefixed: bool = True) -> RunModel | None:
    """The run model ``ref`` names, checked to be there; None for anything that is not a run
    reference (a hub name, a local directory).

    ``prefixed`` (a recipe's model keys): ``ref`` is a run reference only when it is written
    ``run:<run>`` or ``run:<run>@step-N``; else (the commands that use a trained model) ``ref`` is
    ``RUN`` or ``RUN@step-N`` itself. ``<run>`` is a run id, a unique prefix of one, ``last``, or a
    run's name (its newest run with a final model). Errors are RunErrors that start with ``key``
    (when given) and say what to do: list the runs, finish or resume the run, name a checkpoint
    it has."""
    if prefixed:
        if not is_run_ref(ref):
            return None
        ref = run_part(ref)
    try:
        if not ref:
            raise RunError("run: needs a run id after it, e.g. run:quickstart (`clustertune runs` lists them)")
        run_ref, step = split_step(ref)
        run = get_run(run_ref, runs_root_dir, by_name="refuse" if step is not None else "newest_model")
        return RunModel(run, step, prefixed).checked()
    except RunError as exc:
        if key is None:
            raise
        raise RunError(f"{key}: {exc}") from None
