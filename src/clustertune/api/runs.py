"""Runs through the one door: deciding, describing and starting a run (a recipe's, or a user's
own command on every rank), validating a recipe, and following, trusting and removing runs.
Python callers and the CLI reach these as ``clustertune.api.NAME`` (:mod:`clustertune.api`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from clustertune.api.cluster_check import ClusterReport, check_decision, target_overrides
from clustertune.api.preflight import Where, check
from clustertune.errors import RecipeError, UserError
from clustertune.launch.command import load_launch
from clustertune.launch.decision import Decision, decide_command as decide_new_command, decide_recipe, decide_resume
from clustertune.launch.submit import describe_launch, resolve_base_model, start_launch
from clustertune.recipe.checked import Checked
from clustertune.recipe.launch_checks import gpus_requested
from clustertune.recipe.load import load_recipe
from clustertune.recipe.local_paths import absolute_paths
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run
from clustertune.runs.library_logs import libraries_quiet

Source = Recipe | str | os.PathLike[str] | dict[str, Any]
Announce = Callable[[str], None]


def devices_of(recipe: Recipe) -> int:
    """How many devices (training processes) a run of ``recipe`` spans: nodes x ranks per node,
    a node's ranks being ``procs_per_node``, else the GPUs the launch section asks for, else 1."""
    ln = recipe.launch
    return ln.nodes * (ln.procs_per_node or gpus_requested(ln) or 1)


def _recipe(source: Source | None, overrides: list[str] | None) -> Recipe:
    if isinstance(source, Recipe):
        # From the keys set explicitly, so the recipe keeps knowing which ones the caller set.
        return source if not overrides else load_recipe(source.explicit_plain(), overrides)
    if source is None:
        raise UserError("give a recipe (a YAML file or a shipped name; `clustertune recipes` lists them)")
    return load_recipe(source, overrides)


def decide(
    source: Source | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    trust_checkpoint: bool = False,
    show_progress: bool = True,
    dry: bool = False,
    refresh: bool = False,
) -> Decision:
    """The one decision behind :func:`run` and :func:`dry_run`, before anything changes: a new
    recipe passes the preflight first (every problem at once, nothing written; :func:`validate`),
    then, on SLURM or SSH, the cluster's own answers (:mod:`clustertune.api.cluster_check`: a
    problem stops a run here; a dry run shows them). A resume keeps the run's recipe, and
    ``overrides`` may change ``launch.*`` keys only (another world size, another partition).
    :func:`describe` shows it, :func:`start` does it. ``dry``: the decision a dry run describes
    (nothing is trained or written). ``refresh``: probe a compute node again, not from the day's
    answer."""
    if trust_checkpoint and (resume is None or dry):  # the rule, for the CLI and Python callers alike
        raise UserError("--trust-checkpoint goes with --resume RUN_ID (it signs the checkpoint that run resumes from; "
                        "from Python: trust_checkpoint=True with resume=RUN_ID), not with a new run or a dry run")
    if resume is not None:
        if source is not None:
            raise UserError("--resume takes only the run id: the run keeps its resolved recipe")
        return decide_resume(resume, list(overrides or []), runs_root_dir=runs_root_dir,
                             trust_checkpoint=trust_checkpoint, dry=dry)
    held: list[Any] = []  # the libraries' warnings until the run's log exists
    checked = validate(source, overrides, runs_root_dir=runs_root_dir, library_warnings=held)
    recipe = checked.recipe if dry else resolve_base_model(checked.recipe, runs_root_dir, show_progress,
                                                           library_warnings=held)  # a dry run's base stays as named
    return asked_cluster(decide_recipe(recipe, runs_root_dir=runs_root_dir, dry=dry, library_warnings=tuple(held)),
                         refresh)


def asked_cluster(decision: Decision, refresh: bool = False) -> Decision:
    """``decision`` with the cluster's answers (SLURM and SSH launches whose launch.preflight is
    on); a problem stops a launch here, before anything is written or queued, and a dry run shows it."""
    report = check_decision(decision, refresh)
    if report is None:
        return decision
    if not decision.dry:
        report.raise_problems()
    return replace(decision, cluster_report=report)


def decide_command(
    user_command: list[str] | None,
    source: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    dry: bool = False,
) -> Decision:
    """The decision behind :func:`launch_command`: a user's own command on every rank, with the
    launch section of ``source`` (a YAML file, its ``launch.files`` read beside it) and
    ``launch.*`` ``overrides``; or, with ``resume``, the run's own command again. ``dry``: the
    decision a dry run describes, which is always a new launch's."""
    if resume is not None:
        if dry:
            raise UserError("--dry-run shows a new launch; drop --resume")
        if source is not None or user_command:
            raise UserError("--resume runs the run's own command again; give only launch.* keys beside it")
        return decide_resume(resume, list(overrides or []), runs_root_dir=runs_root_dir)
    if not user_command:
        raise UserError("give the command to run after `--`, e.g. "
                        "`clustertune launch launch.procs_per_node=2 -- python train.py`")
    section = load_launch(None if source is None else str(source), list(overrides or []), user_command)
    if source is not None:  # launch.files: relative paths start beside the YAML file, then here
        section = absolute_paths(section, Path(source).expanduser().parent)
    return asked_cluster(decide_new_command(section, user_command, runs_root_dir=runs_root_dir, dry=dry))


def describe(decision: Decision) -> str:
    """What :func:`start` would do with ``decision``: the plan (and the sbatch script or the
    hosts' commands); a new run's plan names a run directory not yet made."""
    return describe_launch(decision)


def start(decision: Decision, *, command: list[str] | None = None, announce: Announce | None = None,
          show_progress: bool = True, wait: bool = True) -> Run:
    """Do what :func:`decide` or :func:`decide_command` decided: the run (made, or the resumed
    one), its data, its backend's submit. Returns the finished :class:`Run` (a SLURM run: once
    submitted; an SSH command with ``wait=False``: once its hosts started it). A failure during
    training leaves the run FAILED with the reason (and traceback) in run.json. ``announce``:
    where the run goes and how to follow it, as lines for the user."""
    return start_launch(decision, command=command, announce=announce, show_progress=show_progress, wait=wait)


def run(
    source: Source | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    command: list[str] | None = None,
    trust_checkpoint: bool = False,
    announce: Announce | None = None,
) -> Run:
    """Run a recipe (a Recipe, a YAML path, a shipped name or a dict) or resume a run by id:
    :func:`decide`, then :func:`start`. User errors raise :class:`UserError` subclasses before
    anything is written when they can be found up front."""
    decided = decide(source, overrides, resume=resume, runs_root_dir=runs_root_dir,
                     trust_checkpoint=trust_checkpoint, show_progress=show_progress)
    return start(decided, command=command, announce=announce, show_progress=show_progress)


def launch_command(
    user_command: list[str] | None,
    source: str | os.PathLike[str] | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    command: list[str] | None = None,
    announce: Announce | None = None,
    wait: bool = True,
) -> Run:
    """Run a user's own command on every rank (``clustertune launch ... -- COMMAND``):
    :func:`decide_command`, then :func:`start`."""
    decided = decide_command(user_command, source, overrides, resume=resume, runs_root_dir=runs_root_dir)
    return start(decided, command=command, announce=announce, wait=wait)


def dry_run(
    source: Source | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    user_command: list[str] | None = None,
) -> str:
    """The plan (and the sbatch script or the command) that :func:`run` (or, given
    ``user_command``, :func:`launch_command`) would start, decided as they decide it; nothing
    starts, nothing is written."""
    if user_command is None:
        return describe(decide(source, overrides, resume=resume, runs_root_dir=runs_root_dir, dry=True))
    return describe(decide_command(user_command, None if source is None else str(source), overrides,
                                   resume=resume, runs_root_dir=runs_root_dir, dry=True))


def validate(source: Source | None, overrides: list[str] | None = None, *,
             runs_root_dir: str | os.PathLike[str] | None = None, need_base: bool = False,
             library_warnings: list[Any] | None = None) -> Checked:
    """The recipe, checked as ``run`` would check it before it starts, with no GPU, network or
    data (:mod:`clustertune.api.preflight`): every problem at once as one RecipeError; what
    could not be checked offline in ``not_checked``. ``need_base``: a ``run:<name>`` base must
    exist already (``run`` would train a shipped recipe's run first). What the libraries warn
    while the model is built (PEFT, bitsandbytes, transformers) never reaches the terminal: it is
    appended to ``library_warnings`` (a run writes it into its log), or dropped (``--debug``
    prints it)."""
    with libraries_quiet(library_warnings):
        return _validate(source, overrides, runs_root_dir, need_base)


def _validate(source: Source | None, overrides: list[str] | None, runs_root_dir: str | os.PathLike[str] | None,
              need_base: bool) -> Checked:
    where = Where.of(source, overrides)
    try:
        recipe = _recipe(source, overrides)
    except RecipeError as exc:
        if not isinstance(exc.partial, Recipe):
            raise
        try:  # the rest of the recipe, checked as well: every problem in one report
            check(exc.partial, where, runs_root_dir=runs_root_dir, need_base=need_base)
        except RecipeError as more:
            seen = [p.key for p in exc.problems]
            extra = [p for p in more.problems if not any(p.key == k or p.key.startswith(k + ".") for k in seen)]
            raise RecipeError(exc.problems + extra) from None
        raise
    return check(recipe, where, runs_root_dir=runs_root_dir, need_base=need_base)


def validate_on(source: Source | None, overrides: list[str] | None, target: str, *,
                runs_root_dir: str | os.PathLike[str] | None = None, refresh: bool = False) -> ClusterReport:
    """``clustertune validate RECIPE --on TARGET``: the recipe's own checks (every problem at once,
    as :func:`validate`), then the cluster's answers for a run of it on ``TARGET`` (``slurm``, or
    an SSH cluster's name), decided as ``run --dry-run`` decides it. Nothing is queued."""
    decision = decide(source, [*(overrides or []), *target_overrides(target)], runs_root_dir=runs_root_dir,
                      dry=True, refresh=refresh)
    return decision.cluster_report


def with_base(recipe: Recipe, runs_root_dir: str | os.PathLike[str] | None = None) -> Recipe:
    """``recipe`` with a ``run:<run>`` base replaced by that run's final model directory (and any
    ``run:<run>@step-N`` model by that checkpoint written out as a model), as ``run`` resolves it
    (what prepare and estimate-memory read: the base's tokenizer and config); a missing run is an
    error here (``run`` would train a shipped recipe's run first)."""
    return resolve_base_model(recipe, runs_root_dir, train_missing=False)


# -- removing runs ------------------------------------------------------------------------------


# -- following a run, whatever runs it ---------------------------------------------------------


__all__ = ["decide", "decide_command", "describe", "start", "validate", "validate_on", "with_base", "devices_of", "dry_run",
           "launch_command", "run"]
