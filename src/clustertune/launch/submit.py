"""Launching a recipe on several processes or nodes: the run directory, the tokenizer (made
once, here, so every rank uses the same one), the plan, then the backend.

This module and what it imports stay free of torch and transformers (unless a tokenizer must
be trained or fetched here): a launch should not pay for imports the ranks pay again.
"""

from __future__ import annotations

import json
import os
import logging
import sys
from pathlib import Path

from clustertune.errors import LaunchError, RunError, UserError
from clustertune.launch.base import Announce, launcher
from clustertune.launch.command import check_command, check_launch, create_run, load_launch, read_command, write_launch
from clustertune.launch.local import visible_gpus
from clustertune.launch.plan import SITE_DEFAULT_KEYS, LaunchPlan, build_plan, secret_looking_env
from clustertune.recipe.load import dump_recipe, load_recipe, shipped_recipes
from clustertune.recipe.rl_schema import RUN_PREFIX
from clustertune.recipe.schema import Recipe
from clustertune.remote.train_job import before_resume, vouch_for_kept_checkpoint
from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run, new_run_id
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, runs_root
from clustertune.train.ds_config import check_deepspeed_json
from clustertune.train.metrics import check_trackers
from clustertune.train.sealed import accept_for_resume
from clustertune.train.library_logs import LibraryLogs

log = logging.getLogger("clustertune")


def needs_launcher(recipe: Recipe, env: dict[str, str] | None = None) -> bool:
    """Whether this recipe runs through a launcher (torchrun, SLURM) rather than in-process:
    a scheduler, several processes asked for, or (unset) a host with several GPUs to use."""
    ln = recipe.launch
    if ln.backend != "local":
        return True
    return (ln.procs_per_node or (0 if recipe.train.device == "cpu" else visible_gpus(env))) > 1


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


def prepares_data_here(recipe: Recipe, backend_default: bool) -> bool:
    """Whether the data is prepared on this machine before the job starts (launch.prepare_data)."""
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


def prepare_run_data(recipe: Recipe, paths: RunPaths) -> None:
    """Prepare the recipe's data once, before any rank starts (a cache hit when it was prepared
    before), and record it in the run directory with the tokenizer every rank will use."""
    if paths.data.is_file() and paths.has_tokenizer:
        return  # a resumed or requeued run keeps the data it started with
    if recipe.task == "rlhf":
        return  # TRL's trainers load their own prompts and preference pairs on the ranks
    # Imported here: preparing pulls in the tokenizer stack, which SLURM runs (the data is the
    # job's first step) and --dry-run never need on this machine.
    from clustertune.data.cache import prepare
    # Deferred: importing it pulls in numpy, which this module's importers do not need.
    from clustertune.data.staging import write_run_data

    write_run_data(prepare(recipe), paths)


def dry_run_text(recipe: Recipe, root: Path, user_command: list[str] | None = None) -> str:
    """The plan (and the sbatch script) a launch would use, for a run directory not yet made."""
    if user_command is not None:
        check_command(user_command)
        check_launch(recipe)
    else:
        check_deepspeed_json(recipe)
    run_id = new_run_id(recipe.name)
    plan = plan_for(recipe, run_id, root / run_id, user_command, need_passthrough=False)
    out = [f"# warning: launch.env_passthrough: {n} is not set in this environment; a launch would refuse "
           "to start until it is exported (or dropped from the recipe)" for n in missing_passthrough(plan)]
    out += ["# launch plan", plan_json_for_people(plan)]
    if not needs_launcher(recipe) and user_command is None:
        out += ["# runs in this process (one rank, no launcher): set launch.procs_per_node or launch.backend"]
    else:
        out += launcher(plan.backend).describe(plan, recipe)
    return "\n".join(out)


def resolve_base_model(recipe: Recipe, runs_root_dir: str | os.PathLike[str] | None = None,
                       show_progress: bool = True) -> Recipe:
    """SFT from ``model.name_or_path: run:<run-id>``: the recipe with that run's final model
    directory in its place (so the resolved recipe names what was trained). A missing run named
    like a shipped recipe (``run:quickstart``) is trained first, once."""
    ref = recipe.model.name_or_path or ""
    if recipe.task != "sft" or not ref.startswith(RUN_PREFIX):
        return recipe
    # Imported only here: it imports torch, transformers' trainer and PEFT (and what they warn).
    from clustertune.train.rl.sources import resolve_model

    root = str(runs_root(runs_root_dir or recipe.tracking.runs_root))
    try:
        path = resolve_model(ref, "model.name_or_path", root)
    except RunError:
        name = ref[len(RUN_PREFIX):]
        if name not in shipped_recipes():
            raise
        log.info("model.name_or_path: no completed %r run under %s yet; training it first (`clustertune run %s`)",
                 name, root, name)
        launch(load_recipe(name), runs_root_dir=root, show_progress=show_progress)
        path = resolve_model(ref, "model.name_or_path", root)
    return recipe.model_copy(update={"model": recipe.model.model_copy(update={"name_or_path": path})})


def launch(recipe: Recipe | None, *, resume: str | None = None, overrides: list[str] | None = None,
           runs_root_dir: str | os.PathLike[str] | None = None, command: list[str] | None = None,
           announce: Announce | None = None, user_command: list[str] | None = None,
           show_progress: bool = True, trust_checkpoint: bool = False) -> Run:
    """Create (or resume) a run and start it through its backend.

    ``recipe`` (a new run) or ``resume`` (a run id) says what to launch; with ``user_command``,
    ``recipe`` holds only the ``launch`` section (:func:`clustertune.launch.command.load_launch`)
    and the command runs on every rank instead of the trainer. ``--resume`` of a command's run
    runs the same command again as a new attempt (the script resumes from its own checkpoint).

    One rank on this machine trains in this process; several processes go through torchrun
    and wait for the ranks. SLURM: returns once submitted
    (the run is PENDING; `clustertune status RUN_ID` follows it). On resume, ``overrides`` may
    change only ``launch.*`` keys (e.g. another world size); the data position carries over.
    A checkpoint that is not signed with this user's key is refused before anything changes;
    ``trust_checkpoint`` signs it instead (the user vouches for its files).
    """
    if trust_checkpoint and (resume is None or user_command is not None):
        raise UserError("--trust-checkpoint applies to `clustertune run --resume RUN_ID` (the checkpoint it resumes from)")
    if resume is not None:
        started = _resume(resume, overrides or [], runs_root_dir, command, announce, show_progress, trust_checkpoint)
    else:
        started = _new(recipe, overrides or [], runs_root_dir, command, announce, user_command, show_progress)
    if isinstance(started, Run):
        return started  # trained in this process, or a user's command already submitted
    recipe, run = started
    backend = launcher(recipe.launch.backend)
    plan = plan_for(recipe, run.id, run.paths.root)
    try:
        if prepares_data_here(recipe, backend.prepares_data_here):  # else: the job's first step
            prepare_run_data(recipe, run.paths)
    except UserError as exc:
        run.transition(RunState.FAILED, reason=str(exc))
        raise
    # The job works on this same Run: a local or SSH run comes back finished, a SLURM one PENDING.
    return backend.submit(plan, run, recipe, announce).run


def _resume(run_id: str, overrides: list[str], runs_root_dir: str | os.PathLike[str] | None,
            command: list[str] | None, announce: Announce | None, show_progress: bool,
            trust_checkpoint: bool) -> Run | tuple[Recipe, Run]:
    """A resumed run: trained here, or submitted again (a user's command), or the recipe and
    run for :func:`launch` to submit."""
    run = get_run(run_id, runs_root_dir)
    bad = [o for o in overrides if not o.strip().startswith("launch.")]
    if bad:
        raise UserError(f"--resume keeps the run's recipe; only launch.* keys may change ({', '.join(bad)})")
    if run.paths.is_command:
        if trust_checkpoint:
            raise UserError(f"--trust-checkpoint: run {run.id} is your own command's, whose checkpoints are its own")
        # The same command again, as the next attempt, under its launch section (+ overrides).
        run.check_resumable()
        user_command = read_command(run.paths)
        recipe = load_launch(run.paths.launch_section, overrides)
        write_launch(run.paths, recipe)
        run.set_backend(recipe.launch.backend)
        return launcher(recipe.launch.backend).submit(plan_for(recipe, run.id, run.paths.root, user_command),
                                                      run, recipe, announce).run
    started_with = load_recipe(run.paths.recipe)
    recipe = load_recipe(run.paths.recipe, overrides)
    # A run that was launched stays with the launcher, even when resumed on one process.
    if not (needs_launcher(recipe) or needs_launcher(started_with)):
        if overrides:
            raise UserError("--resume keeps the run's recipe; launch.* overrides need a multi-process run")
        return _in_process(recipe, run, runs_root_dir, show_progress, command, trust_checkpoint)
    run.check_resumable()
    if run.info.backend == "ssh" and run.info.remote is not None:
        before_resume(run)
        if run.info.remote.get("keep_on_cluster"):  # the checkpoints are on the hosts, not here
            vouch_for_kept_checkpoint(run, trust_checkpoint)
    # The signature only (state.json): every rank checks each file's digest before loading.
    accept_for_resume(run.paths, trust_checkpoint)
    run.paths.recipe.write_text(dump_recipe(recipe), encoding="utf-8")
    run.set_backend(recipe.launch.backend)
    return recipe, run


def _new(recipe: Recipe | None, overrides: list[str], runs_root_dir: str | os.PathLike[str] | None,
         command: list[str] | None, announce: Announce | None, user_command: list[str] | None,
         show_progress: bool) -> Run | tuple[Recipe, Run]:
    """A new run: trained here, or a user's command submitted, or the recipe and the run
    created for :func:`launch` to submit."""
    if user_command is not None:
        if recipe is None:  # launch.* overrides on the defaults
            recipe = load_launch(None, overrides, user_command)
        return _launch_command(recipe, user_command, runs_root_dir, command, announce)
    if recipe is None:
        raise UserError("give a recipe to launch, or --resume RUN_ID")
    if recipe.launch.runner != "torchrun":
        raise LaunchError("launch.runner=none applies to your own command (`clustertune launch ... -- COMMAND`); "
                          "a recipe always runs under torchrun")
    recipe = resolve_base_model(recipe, runs_root_dir, show_progress)
    if not needs_launcher(recipe):
        return _in_process(recipe, None, runs_root_dir, show_progress, command, False)
    # Problems found without heavy imports fail here, before any run directory exists;
    # the ranks check the model and data themselves (their errors land in run.json).
    check_trackers(list(recipe.tracking.trackers))
    check_deepspeed_json(recipe)
    launcher(recipe.launch.backend).check(recipe, plan_for(recipe, "", Path(".")))
    root = runs_root(runs_root_dir or recipe.tracking.runs_root)
    run = Run.create(root, recipe.name, recipe.task, dump_recipe(recipe), command or list(sys.argv),
                     backend=recipe.launch.backend)
    return recipe, run


def _launch_command(recipe: Recipe, user_command: list[str], runs_root_dir: str | os.PathLike[str] | None,
                    command: list[str] | None, announce: Announce | None) -> Run:
    """A new run of a user's command: checked before any run directory exists, then started
    like a recipe's (no data to prepare)."""
    check_command(user_command)
    check_launch(recipe)
    backend = launcher(recipe.launch.backend)
    backend.check(recipe, plan_for(recipe, "", Path("."), user_command))
    run = create_run(recipe, user_command, runs_root(runs_root_dir or recipe.tracking.runs_root), command or list(sys.argv))
    return backend.submit(plan_for(recipe, run.id, run.paths.root, user_command), run, recipe, announce).run


def _in_process(recipe: Recipe, existing: Run | None, runs_root_dir: str | os.PathLike[str] | None,
                show_progress: bool, command: list[str] | None, trust_checkpoint: bool) -> Run:
    libraries = LibraryLogs().start()  # first: some libraries warn as they are imported
    try:
        # Imported here: in-process training imports torch, which a launching process never needs.
        from clustertune.launch.inprocess import train_in_process

        return train_in_process(recipe, existing=existing, runs_root=runs_root(runs_root_dir or recipe.tracking.runs_root),
                                show_progress=show_progress, command=command or list(sys.argv),
                                trust_checkpoint=trust_checkpoint, libraries=libraries)
    finally:
        libraries.stop()
