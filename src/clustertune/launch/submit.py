"""Starting what was decided (:mod:`clustertune.launch.decision`), whatever runs it (this
process, torchrun, SLURM, SSH hosts): the backend's checks, the data where this machine prepares
it, the run directory with its recipe and files, then the backend's submit. Also the dry run's
text, and a ``run:`` base model resolved (trained first when it is a shipped recipe's).

This module and what it imports stay free of torch and transformers (unless a tokenizer must
be trained or fetched here): a launch should not pay for imports the ranks pay again.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, NamedTuple

from clustertune.errors import RunError, UserError
from clustertune.launch.backends import launcher
from clustertune.launch.base import Announce, Launcher
from clustertune.launch.command import create_run, write_launch
from clustertune.launch.decision import Decision, decide_recipe, root_of
from clustertune.launch.files import describe, for_nodes, link_into, stored_copies
from clustertune.launch.plan import SITE_DEFAULT_KEYS, LaunchPlan
from clustertune.models.local import checkpoint_refs
from clustertune.models.run_models import resolve_run_model
from clustertune.recipe.load import dump_recipe, load_recipe, shipped_recipes
from clustertune.recipe.run_refs import is_run_ref, run_part
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run, check_runs_root
from clustertune.runs.state import RunState
from clustertune.tasks import task_of
from clustertune.runs.library_logs import LibraryLogs, libraries_quiet, run_log_handler

log = logging.getLogger("clustertune")


def plan_json_for_people(plan: LaunchPlan) -> str:
    """The plan as JSON, with the SLURM options left unset shown as the site's defaults."""
    d = plan.to_dict()
    if plan.backend == "slurm":
        d["slurm"] = {k: ("site default" if k in SITE_DEFAULT_KEYS else "not asked for") if v is None else v
                      for k, v in d["slurm"].items()}
    else:
        d.pop("slurm")
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def describe_launch(decision: Decision) -> str:
    """What :func:`start_launch` would do with ``decision``, for people: the plan (for a new run,
    a run directory not yet made), where each file the recipe names is read, and the backend's
    own part (the sbatch script, the hosts' commands). Renders the decision; decides nothing."""
    out = [f"# warning: launch.env_passthrough: {n} is not set in this environment; a launch would refuse "
           "to start until it is exported (or dropped from the recipe)" for n in decision.missing_passthrough]
    out += ["# launch plan", plan_json_for_people(decision.plan)]
    out += describe(list(decision.placed), decision.backend)
    if decision.cluster_report is not None:  # what the cluster said (a problem stops the launch itself)
        report = decision.cluster_report
        out += [f"# asked {report.target} before the queue ({len(report.problems)} problem(s); "
                "launch.preflight=false skips this):", *(f"#{line}" for line in report.lines())]
    out += launcher(decision.backend).describe(decision.plan, decision.recipe)
    return "\n".join(out)


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
    root = str(root_of(recipe, runs_root_dir))
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
        start_launch(decide_recipe(load_recipe(name), runs_root_dir=root), show_progress=show_progress)
        found = resolve_run_model(ref, key, root)
    assert found is not None
    # Imported only here: merging an adapter run's model imports torch and PEFT (and what they warn).
    from clustertune.models.adapters import plain_model

    with libraries_quiet(library_warnings):
        return task.with_base(recipe, str(plain_model(found)))


def start_launch(decision: Decision, *, command: list[str] | None = None, announce: Announce | None = None,
                 show_progress: bool = True, wait: bool = True) -> Run:
    """Do what ``decision`` says (:func:`clustertune.api.decide` makes it after its preflight), in
    the same order for every backend: the backend's checks of the decided plan (nothing written
    yet; a bad input leaves no run directory), the data where this machine prepares it, the
    copies the nodes read, the run directory (its recipe written once, naming them), then the
    backend's submit. One rank on this machine trains in this process; several go through
    torchrun and are waited for; SLURM returns once submitted (the run is PENDING; `clustertune
    status RUN_ID` follows it). A resumed run's checkpoint not signed with this user's key is
    refused before anything changes, unless the decision trusts it. ``wait=False``: an SSH run
    returns once its hosts started it."""
    opened = open_run(decision, command)
    # The job works on this same Run: a local or SSH run comes back finished, a SLURM one PENDING.
    return opened.backend.submit(decision.plan, opened.run, opened.recipe, announce, show_progress, wait=wait).run


class Opened(NamedTuple):
    run: Run
    recipe: Recipe  # what the nodes read (local paths replaced by the copies they get)
    backend: Launcher  # the one whose check passed: its submit goes on from what the check found


def open_run(decision: Decision, command: list[str] | None = None) -> Opened:
    """Everything :func:`start_launch` does before the backend's submit: the backend's checks,
    the data where this machine prepares it, the nodes' copies, the run directory (a sweep
    opens each trial's run so, then submits them all as one SLURM array)."""
    if decision.dry:
        raise UserError("this decision was made for a dry run (its run: base not resolved): decide again "
                        "without dry=True to start it")
    recipe, resuming, plan = decision.recipe, decision.resuming, decision.plan
    backend = launcher(decision.backend)
    if resuming is None:
        check_runs_root(decision.root)  # before any data is prepared
    backend.check(recipe, plan, resuming)  # the in-process backend keeps its libraries' warnings itself
    # Deferred: the data layer imports numpy, which a dry run and the SLURM backend never need here.
    from clustertune.data.run_data import data_step, prepare_for_run

    # From here until the backend takes over, the libraries' warnings (and those held since the
    # preflight) go to the run's log once it exists, never to the terminal.
    libraries = LibraryLogs().hold(list(decision.library_warnings)).start()
    to_log = None
    try:
        if resuming is None:
            # The data is prepared, and so checked, and the nodes' copies made before the run's
            # directory exists: bad data or a file edited mid-copy leaves none.
            prepared = prepare_for_run(recipe) if decision.prepares_here else None
            placed = stored_copies(decision.placed, decision.run_dir, decision.cache)
            recipe = for_nodes(recipe, placed)
        else:  # the run's recipe names the copies its first launch made
            prepared, placed = None, list(decision.placed)
        run = _record(decision, recipe, command)
        to_log = run_log_handler(run.paths.log)
        libraries.attach(to_log)
        try:
            if resuming is None and placed:
                run.set_files([p.to_json() for p in placed])
            link_into(run, placed, decision.backend, decision.cache, new=resuming is None)
            if decision.prepares_here:
                data_step(recipe, run.paths, prepared)  # else: the job's first step, or the backend's check did
        except UserError as exc:
            run.transition(RunState.FAILED, reason=str(exc))
            raise
    finally:
        libraries.stop()
        if to_log is not None:
            to_log.close()
    return Opened(run, recipe, backend)


def _record(decision: Decision, recipe: Recipe, command: list[str] | None) -> Run:
    """The run directory with ``recipe`` (what the nodes read) written once: a new one (named as
    its plan), or the resumed one with its (launch section) overrides."""
    argv = command or list(sys.argv)
    if decision.resuming is None:
        if decision.user_command is not None:
            return create_run(recipe, decision.user_command, decision.root, argv, decision.run_id)
        return Run.create(decision.root, recipe.name, recipe.task, dump_recipe(recipe), argv,
                          backend=recipe.launch.backend, run_id=decision.run_id)
    run = decision.resuming.run
    if run.paths.is_command:
        write_launch(run.paths, recipe)
    else:
        run.paths.recipe.write_text(dump_recipe(recipe), encoding="utf-8")
    run.set_backend(recipe.launch.backend)
    return run
