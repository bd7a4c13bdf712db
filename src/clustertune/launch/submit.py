"""Launching a run, whatever runs it (this process, torchrun, SLURM, SSH hosts): :func:`launch`
decides once, then the backend's checks, the run directory, the data and the tokenizer (made
once, here, so every rank uses the same one), the plan, and the backend's submit.

This module and what it imports stay free of torch and transformers (unless a tokenizer must
be trained or fetched here): a launch should not pay for imports the ranks pay again.
"""

from __future__ import annotations

import json
import os
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import LaunchError, RunError, UserError
from clustertune.launch.backends import job_for, launcher
from clustertune.launch.base import Announce, Launcher, Resuming
from clustertune.launch.files import check_exist, data_on_nodes, decide, describe, place
from clustertune.launch.command import check_command, check_launch, create_run, load_launch, read_command, write_launch
from clustertune.launch.local import visible_gpus
from clustertune.launch.plan import SITE_DEFAULT_KEYS, LaunchPlan, build_plan, secret_looking_env
from clustertune.models.local import checkpoint_refs
from clustertune.models.run_models import resolve_run_model
from clustertune.recipe.launch_checks import gpus_requested
from clustertune.recipe.load import dump_recipe, load_recipe, shipped_recipes
from clustertune.recipe.run_refs import is_run_ref, run_part
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run, check_runs_root, new_run_id
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, runs_root
from clustertune.tasks import task_of
from clustertune.runs.library_logs import LibraryLogs, libraries_quiet, run_log_handler
from clustertune.runs.sealed import trust_command

log = logging.getLogger("clustertune")


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
    """Whether :func:`launch` prepares the data on this machine once the run exists
    (launch.prepare_data, else the backend's default; None: the backend's check did already)."""
    if backend_default is None:
        return False
    return {"submitter": True, "job": False}.get(recipe.launch.prepare_data, backend_default)


def plan_json_for_people(plan: LaunchPlan) -> str:
    """The plan as JSON, with the SLURM options left unset shown as the site's defaults."""
    d = plan.to_dict()
    if plan.backend == "slurm":
        d["slurm"] = {k: ("site default" if k in SITE_DEFAULT_KEYS else "not asked for") if v is None else v
                      for k, v in d["slurm"].items()}
    else:
        d.pop("slurm")
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def describe_launch(decided: Decided) -> str:
    """What :func:`start_launch` would do with ``decided``, for people: the plan (for a new run,
    a run directory not yet made), where each file the recipe names is read, and the backend's
    own part (the sbatch script, the hosts' commands)."""
    recipe = decided.recipe
    run_id, run_dir = _where(decided)
    plan = plan_for(recipe, run_id, run_dir, decided.user_command, need_passthrough=False)
    out = [f"# warning: launch.env_passthrough: {n} is not set in this environment; a launch would refuse "
           "to start until it is exported (or dropped from the recipe)" for n in missing_passthrough(plan)]
    out += ["# launch plan", plan_json_for_people(plan)]
    from clustertune.data.cache import cache_root  # deferred: the data layer's imports (numpy)

    backend = launcher(decided.backend)
    here = _prepares_here(decided, backend)
    out += describe(decide(recipe, decided.backend, run_dir, cache_root(recipe), data_on_nodes(recipe, here)),
                    decided.backend)
    out += backend.describe(plan, recipe)
    return "\n".join(out)


def _where(decided: Decided) -> tuple[str, Path]:
    """The run id and directory of a decided launch: the resumed run's, or a new run's (not made
    yet: :func:`start_launch` makes it under that id)."""
    if decided.resuming is not None:
        return decided.resuming.run.id, decided.resuming.run.paths.root
    run_id = new_run_id(decided.recipe.name)
    return run_id, decided.root / run_id


def _prepares_here(decided: Decided, backend: Launcher) -> bool:
    """Whether this machine prepares the run's data (a user's command has none)."""
    return decided.user_command is None and prepares_data_here(decided.recipe, backend.prepares_data_here)


def resolve_base_model(recipe: Recipe, runs_root_dir: str | os.PathLike[str] | None = None,
                       show_progress: bool = True, train_missing: bool = True,
                       library_warnings: list[Any] | None = None) -> Recipe:
    """A task that starts from another run's model (the task's ``base_key``: ``model.name_or_path``,
    RL's ``rl.policy``) naming ``run:<run-id>``: the recipe with that run's final model directory
    in its place (an adapter run's merged into its base), so the resolved recipe names what was
    trained. A missing run named like a shipped recipe (``run:quickstart``) is trained first, once
    (``train_missing``; else the missing run is an error). A checkpoint ``run:<run>@step-N``
    named as any model (base, RL policy...) is written out as a model once and named by its
    directory (:mod:`clustertune.use.bases`). Every name goes through
    :func:`~clustertune.models.run_models.resolve_run_model`. What the libraries warn while a model
    is written out or merged goes to ``library_warnings`` (for the run's log), never the terminal."""
    root = str(_root(recipe, runs_root_dir))
    if checkpoint_refs(recipe):
        # Deferred: writing a checkpoint out builds its model (torch, transformers).
        from clustertune.use.bases import with_checkpoint_models

        with libraries_quiet(library_warnings):
            recipe = with_checkpoint_models(recipe, root)
    task = task_of(recipe.task)
    key, ref = task.base_key, task.base_ref(recipe) or ""
    if not task.base_model_from_run or not is_run_ref(ref):
        return recipe
    try:
        found = resolve_run_model(ref, key, root)
    except RunError:
        name = run_part(ref)
        if not train_missing or name not in shipped_recipes():
            raise
        log.info("%s: no completed %r run under %s yet; training it first (`clustertune run %s`)",
                 key, name, root, name)
        # A shipped recipe passes the preflight as shipped (every one is validated by the tests).
        start_launch(decide_recipe(load_recipe(name), runs_root_dir=root, show_progress=show_progress),
                     show_progress=show_progress)
        found = resolve_run_model(ref, key, root)
    assert found is not None
    # Imported only here: merging an adapter run's model imports torch and PEFT (and what they warn).
    from clustertune.models.adapters import plain_model

    with libraries_quiet(library_warnings):
        return task.with_base(recipe, str(plain_model(found)))


@dataclass(frozen=True)
class Decided:
    """A launch decided before anything changes: what runs (a recipe, or a user's command under
    its launch section), on which backend, under which runs root, and the run it resumes. The dry
    run describes one (:func:`describe_launch`); :func:`start_launch` does it."""

    recipe: Recipe
    backend: str  # a name in the backend registry; "inprocess" for one rank in this process
    root: Path  # the runs root the run is made (or was found) under
    user_command: list[str] | None = None  # a user's own command instead of the trainer
    resuming: Resuming | None = None
    # What the libraries warned while the launch was decided (the preflight, a base model written
    # out or merged): written into the run's log once it exists, never to the terminal.
    library_warnings: tuple[Any, ...] = field(default=(), compare=False, repr=False)


def start_launch(decided: Decided, *, command: list[str] | None = None, announce: Announce | None = None,
                 show_progress: bool = True, wait: bool = True) -> Run:
    """Do what :func:`decide_recipe`, :func:`decide_command` or :func:`decide_resume` decided
    (:func:`clustertune.api.decide` calls them after its preflight); the order is the same for every backend: the
    backend's checks (nothing written yet; a bad input leaves no run directory), the run directory,
    the data where this machine prepares it, then the backend's submit. One rank on this machine
    trains in this process; several go through torchrun and are waited for; SLURM returns once
    submitted (the run is PENDING; `clustertune status RUN_ID` follows it). A resumed run's
    checkpoint not signed with this user's key is refused before anything changes, unless the
    decision trusts it. ``wait=False``: an SSH run returns once its hosts started it.
    """
    recipe, resuming = decided.recipe, decided.resuming
    backend = launcher(decided.backend)
    if resuming is None:
        check_runs_root(decided.root)  # before any data is prepared
    run_id, run_dir = _where(decided)
    # One plan, checked by the backend before anything is written, then submitted.
    plan = plan_for(recipe, run_id, run_dir, decided.user_command)
    backend.check(recipe, plan, resuming)  # the in-process backend keeps its libraries' warnings itself
    here = _prepares_here(decided, backend)
    # Deferred: the data layer imports numpy, which a dry run and the SLURM backend never need here.
    from clustertune.data.run_data import data_step, prepare_for_run

    # From here until the backend takes over, the libraries' warnings (and those held since the
    # preflight) go to the run's log once it exists, never to the terminal.
    libraries = LibraryLogs().hold(list(decided.library_warnings)).start()
    to_log = None
    try:
        # A new run's data is prepared, and so checked, before its directory exists: bad data leaves none.
        prepared = prepare_for_run(recipe) if here and resuming is None else None
        run = _record(decided, command, run_id)
        to_log = run_log_handler(run.paths.log)
        libraries.attach(to_log)
        try:
            recipe = _place_files(recipe, run, decided.backend, here)
            if here:
                data_step(recipe, run.paths, prepared)  # else: the job's first step, or the backend's check did
        except UserError as exc:
            run.transition(RunState.FAILED, reason=str(exc))
            raise
    finally:
        libraries.stop()
        if to_log is not None:
            to_log.close()
    # The job works on this same Run: a local or SSH run comes back finished, a SLURM one PENDING.
    return backend.submit(plan, run, recipe, announce, show_progress, wait=wait).run


def _place_files(recipe: Recipe, run: Run, backend: str, here: bool) -> Recipe:
    """The local paths the recipe names, where the nodes read them (:mod:`clustertune.launch.files`);
    the run directory's recipe then names what the nodes read."""
    from clustertune.data.cache import cache_root  # deferred: the data layer's imports (numpy)

    placed = place(recipe, run, backend, cache_root(recipe), data_on_nodes(recipe, here))
    if placed is not recipe and not run.paths.is_command:
        run.paths.recipe.write_text(dump_recipe(placed), encoding="utf-8")
    return placed


def backend_for(recipe: Recipe, user_command: list[str] | None = None) -> str:
    """The registry name of the backend that runs ``recipe``: its ``launch.backend``, except that
    a recipe's one rank on this machine trains in this process (a user's command never does)."""
    if user_command is None and not needs_launcher(recipe):
        return "inprocess"
    return recipe.launch.backend


def check_resume_overrides(overrides: list[str]) -> None:
    """The one rule for what a resume may change: ``launch.*`` keys (a recipe file, or any other
    key, would change the run's resolved recipe)."""
    bad = [o for o in overrides if not o.strip().startswith("launch.")]
    if bad:
        raise UserError("--resume takes only the run id: the run keeps its resolved recipe; only launch.* keys "
                        f"may change ({', '.join(bad)})")


def decide_resume(run_id: str, overrides: list[str], *, runs_root_dir: str | os.PathLike[str] | None = None,
                  trust_checkpoint: bool = False, dry: bool = False) -> Decided:
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
        return Decided(recipe, recipe.launch.backend, root, read_command(run.paths), resuming)
    started_with = load_recipe(run.paths.recipe)
    recipe = load_recipe(run.paths.recipe, overrides)
    # A run that was launched stays with the launcher, even when resumed on one process.
    if needs_launcher(recipe) or needs_launcher(started_with):
        return Decided(recipe, recipe.launch.backend, root, None, resuming)
    if overrides:
        raise UserError("--resume keeps the run's recipe; launch.* overrides need a multi-process run")
    return Decided(recipe, "inprocess", root, None, resuming)


def decide_command(section: Recipe, user_command: list[str], *,
                   runs_root_dir: str | os.PathLike[str] | None = None) -> Decided:
    """A new run of a user's command under ``section`` (a recipe holding only its launch section):
    the checks that need no backend."""
    check_command(user_command, section.launch.runner)
    check_launch(section)
    check_exist(section)
    return Decided(section, section.launch.backend, _root(section, runs_root_dir), user_command)


def decide_recipe(recipe: Recipe, *, runs_root_dir: str | os.PathLike[str] | None = None,
                  show_progress: bool = True, dry: bool = False,
                  library_warnings: list[Any] | None = None) -> Decided:
    """A new run of a recipe that passed the preflight (:func:`clustertune.api.validate`). A
    ``run:<name>`` base is resolved here (trained first when it is a shipped recipe's run not
    trained yet), not for a dry run (``dry``: the base stays as named). ``library_warnings``: what
    the libraries warned so far (the preflight's), for the run's log."""
    held = list(library_warnings or [])
    if not dry:
        recipe = resolve_base_model(recipe, runs_root_dir, show_progress, library_warnings=held)
    return Decided(recipe, backend_for(recipe), _root(recipe, runs_root_dir), library_warnings=tuple(held))


def _root(recipe: Recipe, runs_root_dir: str | os.PathLike[str] | None) -> Path:
    return runs_root(runs_root_dir or recipe.tracking.runs_root)


def _record(decided: Decided, command: list[str] | None, run_id: str) -> Run:
    """The run directory: a new one (named ``run_id``, as its plan), or the resumed one with its
    (launch section) overrides."""
    recipe, resuming = decided.recipe, decided.resuming
    argv = command or list(sys.argv)
    if resuming is None:
        if decided.user_command is not None:
            return create_run(recipe, decided.user_command, decided.root, argv, run_id)
        return Run.create(decided.root, recipe.name, recipe.task, dump_recipe(recipe), argv,
                          backend=recipe.launch.backend, run_id=run_id)
    run = resuming.run
    if run.paths.is_command:
        write_launch(run.paths, recipe)
    else:
        run.paths.recipe.write_text(dump_recipe(recipe), encoding="utf-8")
    run.set_backend(recipe.launch.backend)
    return run
