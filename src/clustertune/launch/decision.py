"""The one decision behind a launch, made before anything changes: what runs (a recipe, or a
user's command under its launch section), on which backend, under which run id and directory,
with which plan, where its data is prepared and what each local path it names becomes on the
nodes. :class:`Decision` is frozen; the dry run renders it
(:func:`~clustertune.launch.submit.describe_launch`) and the start executes it
(:func:`~clustertune.launch.submit.start_launch`) without working any of it out again.

This module stays free of torch and transformers: deciding where a job goes imports nothing that
the ranks pay for again.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import LaunchError, RunError, UserError
from clustertune.launch.backends import job_for, launcher
from clustertune.launch.base import Resuming
from clustertune.launch.command import check_command, check_launch, load_launch, read_command
from clustertune.launch.files import Placed, check_exist, data_on_nodes, decide as decide_files
from clustertune.launch.local import visible_gpus
from clustertune.launch.plan import LaunchPlan, build_plan, secret_looking_env
from clustertune.recipe.launch_checks import gpus_requested
from clustertune.recipe.load import load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import new_run_id
from clustertune.runs.sealed import trust_command
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, runs_root

log = logging.getLogger("clustertune")


@dataclass(frozen=True)
class Decision:
    """A launch decided: everything :func:`~clustertune.launch.submit.start_launch` does is read
    from here. A new run's id and directory are chosen (the directory is not made yet), so the
    plan a dry run prints is the plan the start submits."""

    recipe: Recipe
    backend: str  # a name in the backend registry; "inprocess" for one rank in this process
    root: Path  # the runs root the run is made (or was found) under
    run_id: str
    plan: LaunchPlan
    prepares_here: bool  # this machine prepares the run's data (else the job, or the backend's check)
    # What each local path the recipe names becomes on the nodes: for a new run as decided
    # (nothing copied yet), for a resumed one as its first launch recorded it in run.json.
    placed: tuple[Placed, ...]
    cache: Path  # the data cache root, which also holds the store of the copies sent to nodes
    user_command: list[str] | None = None  # a user's own command instead of the trainer
    resuming: Resuming | None = None
    dry: bool = False  # decided for a dry run: described only (a ``run:`` base stays as named)
    missing_passthrough: tuple[str, ...] = ()  # launch.env_passthrough names unset here (dry runs only)
    # What the libraries warned while the launch was decided (the preflight, a base model written
    # out or merged): written into the run's log once it exists, never to the terminal.
    library_warnings: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    # What the cluster said of the run before anything was queued (a SLURM or SSH run whose
    # launch.preflight is on): the api's ClusterReport, whose lines the dry run shows.
    cluster_report: Any = field(default=None, compare=False, repr=False)

    @property
    def run_dir(self) -> Path:
        return self.root / self.run_id


def needs_launcher(recipe: Recipe, env: dict[str, str] | None = None) -> bool:
    """Whether this recipe runs through a launcher (torchrun, SLURM) rather than in-process:
    a scheduler, several processes asked for, or (unset) a host with several GPUs to use."""
    ln = recipe.launch
    if ln.backend != "local":
        return True
    return (ln.procs_per_node or (0 if recipe.train.device == "cpu" else visible_gpus(env))) > 1


def planned_world_size(recipe: Recipe) -> int | None:
    """The training processes a run of ``recipe`` starts, where that is known before it is
    submitted: nodes x ``launch.procs_per_node``; unset, this host's GPUs for a local run (one
    process on CPU), the GPUs asked of SLURM per node (else 1). None for SSH hosts, whose GPUs are
    counted there. (A DeepSpeed JSON's ``train_batch_size`` is checked against it.)"""
    ln = recipe.launch
    if ln.procs_per_node:
        return ln.nodes * ln.procs_per_node
    if ln.backend == "local":
        return 1 if recipe.train.device == "cpu" else max(visible_gpus(), 1)
    if ln.backend == "slurm":
        return ln.nodes * (gpus_requested(ln) or 1)
    return None


def missing_passthrough(plan: LaunchPlan) -> list[str]:
    return [n for n in plan.env_passthrough if n not in os.environ]


def plan_for(recipe: Recipe, run_id: str, run_dir: Path, user_command: list[str] | None = None, *,
             need_passthrough: bool = True) -> LaunchPlan:
    """The plan; an unset ``env_passthrough`` variable is an error where the job would start
    (``need_passthrough``), a warning in a dry run (public models need no HF_TOKEN to look at)."""
    if recipe.launch.backend == "ssh":
        # Each host runs the node command inside its own copy of the run directory, with the
        # env's bin first on PATH: the same command on every host.
        plan = build_plan(recipe, run_id, ".", "python", user_command or ())
    else:
        plan = build_plan(recipe, run_id, str(run_dir), sys.executable, user_command or ())
    bad = secret_looking_env(plan)
    if bad:
        raise LaunchError(
            f"launch.env: {', '.join(bad)} look(s) like secrets, which would be written into the job script; "
            f"list the name(s) in launch.env_passthrough instead and set them in your environment"
        )
    missing = missing_passthrough(plan)
    if missing and need_passthrough:
        raise LaunchError(f"launch.env_passthrough: {', '.join(missing)} not set in this environment; export it "
                          "first, or drop it from launch.env_passthrough if the job does not need it")
    return plan


def prepares_data_here(recipe: Recipe, backend_default: bool | None) -> bool:
    """Whether the start prepares the data on this machine (launch.prepare_data, else the
    backend's default; None: the backend's check does it itself)."""
    if backend_default is None:
        return False
    return {"submitter": True, "job": False}.get(recipe.launch.prepare_data, backend_default)


def backend_for(recipe: Recipe, user_command: list[str] | None = None) -> str:
    """The registry name of the backend that runs ``recipe``: its ``launch.backend``, except that
    a recipe's one rank on this machine trains in this process (a user's command never does)."""
    if user_command is None and not needs_launcher(recipe):
        return "inprocess"
    return recipe.launch.backend


def decision_for(recipe: Recipe, backend: str, root: Path, *, user_command: list[str] | None = None,
                 resuming: Resuming | None = None, dry: bool = False,
                 library_warnings: tuple[Any, ...] = ()) -> Decision:
    """The rest of a decision, once what runs, where and under which root are known: the run id
    (the resumed run's, or a new one), the plan, where the data is prepared and what each local
    path becomes on the nodes. Reads the recipe's files' sizes and nothing else."""
    from clustertune.data.cache import cache_root  # deferred: the data layer's imports (numpy)

    run_id = resuming.run.id if resuming is not None else new_run_id(recipe.name)
    run_dir = resuming.run.paths.root if resuming is not None else root / run_id
    plan = plan_for(recipe, run_id, run_dir, user_command, need_passthrough=not dry)
    here = user_command is None and prepares_data_here(recipe, launcher(backend).prepares_data_here)
    cache = cache_root(recipe)
    if resuming is not None:
        placed = tuple(Placed.from_json(d) for d in resuming.run.info.files)
    else:
        placed = tuple(decide_files(recipe, backend, run_dir, cache, data_on_nodes(recipe, here)))
    return Decision(recipe, backend, root, run_id, plan, here, placed, cache, user_command, resuming, dry,
                    tuple(missing_passthrough(plan)), library_warnings)


def check_resume_overrides(overrides: list[str]) -> None:
    """The one rule for what a resume may change: ``launch.*`` keys (a recipe file, or any other
    key, would change the run's resolved recipe)."""
    bad = [o for o in overrides if not o.strip().startswith("launch.")]
    if bad:
        raise UserError("--resume takes only the run id: the run keeps its resolved recipe; only launch.* keys "
                        f"may change ({', '.join(bad)})")


def decide_resume(run_id: str, overrides: list[str], *, runs_root_dir: str | os.PathLike[str] | None = None,
                  trust_checkpoint: bool = False, dry: bool = False) -> Decision:
    """A resumed run: its recipe (or a command's launch section) with ``overrides``, which may
    change only ``launch.*`` keys (e.g. another world size). The last attempt's end is asked of
    the run's backend first (not for a dry run: run.json stands); a resumed command's run runs
    the same command again as its next attempt (the script resumes from its own checkpoint)."""
    check_resume_overrides(overrides)  # before the run is looked up: the command line is wrong
    run = get_run(run_id, runs_root_dir)
    if run.paths.is_command and trust_checkpoint:
        raise UserError(f"--trust-checkpoint: run {run.id} is your own command's, whose checkpoints are its own")
    if not dry:  # how the last attempt ended, as its backend knows it (an SSH run's results come back here)
        try:
            job_for(run).state()
        except UserError as exc:  # no SLURM commands here, a host down: what run.json says stands
            log.warning("could not ask the %s backend how run %s's last attempt ended (%s); going on with what "
                        "run.json records", run.info.backend, run.id, exc)
    if trust_checkpoint and run.reload().state is RunState.COMPLETED:
        # What a finished run's unsigned checkpoint needs to be loaded is a signature, not a resume.
        found = run.paths.complete_checkpoints()
        if not found:
            raise RunError(f"run {run.id} already COMPLETED and has no checkpoint: nothing to resume or sign")
        raise RunError(f"run {run.id} already COMPLETED: there is nothing to resume, so --trust-checkpoint has no "
                       f"checkpoint to sign. To load one of its checkpoints ({run.paths.checkpoint_list()}), "
                       f"`{trust_command(found[-1])}` signs the newest with your key (another: its @step-N)")
    run.reload().check_resumable()
    resuming, root = Resuming(run, trust_checkpoint), run.paths.root.parent
    if run.paths.is_command:  # the same command again, as the next attempt
        recipe = load_launch(run.paths.launch_section, overrides)
        return decision_for(recipe, recipe.launch.backend, root, user_command=read_command(run.paths),
                            resuming=resuming, dry=dry)
    started_with = load_recipe(run.paths.recipe)
    recipe = load_recipe(run.paths.recipe, overrides)
    # A run that was launched stays with the launcher, even when resumed on one process.
    if needs_launcher(recipe) or needs_launcher(started_with):
        return decision_for(recipe, recipe.launch.backend, root, resuming=resuming, dry=dry)
    if overrides:
        raise UserError("--resume keeps the run's recipe; launch.* overrides need a multi-process run")
    return decision_for(recipe, "inprocess", root, resuming=resuming, dry=dry)


def decide_command(section: Recipe, user_command: list[str], *,
                   runs_root_dir: str | os.PathLike[str] | None = None, dry: bool = False) -> Decision:
    """A new run of a user's command under ``section`` (a recipe holding only its launch section):
    the checks that need no backend."""
    check_command(user_command, section.launch.runner)
    check_launch(section)
    check_exist(section)
    return decision_for(section, section.launch.backend, root_of(section, runs_root_dir), user_command=user_command,
                        dry=dry)


def decide_recipe(recipe: Recipe, *, runs_root_dir: str | os.PathLike[str] | None = None, dry: bool = False,
                  library_warnings: tuple[Any, ...] = ()) -> Decision:
    """A new run of a recipe that passed the preflight (:func:`clustertune.api.validate`), its
    ``run:`` base resolved already (:func:`~clustertune.launch.submit.resolve_base_model`; a dry
    run's stays as named). ``library_warnings``: what the libraries warned so far, for the run's log."""
    return decision_for(recipe, backend_for(recipe), root_of(recipe, runs_root_dir), dry=dry,
                        library_warnings=library_warnings)


def root_of(recipe: Recipe, runs_root_dir: str | os.PathLike[str] | None) -> Path:
    return runs_root(runs_root_dir or recipe.tracking.runs_root)
