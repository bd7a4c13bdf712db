"""Launching a recipe on several processes or nodes: the run directory, the tokenizer (made
once, here, so every rank uses the same one), the plan, then the backend.

This module and what it imports stay free of torch and transformers (unless a tokenizer must
be trained or fetched here): a launch should not pay for imports the ranks pay again.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from clustertune.errors import LaunchError, RunError, UserError
from clustertune.launch.plan import LaunchPlan, build_plan, secret_looking_env
from clustertune.recipe.load import dump_recipe, load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run
from clustertune.runs.state import RESUMABLE, RunState
from clustertune.runs.store import get_run, runs_root

def needs_launcher(recipe: Recipe, env: dict[str, str] | None = None) -> bool:
    """Whether this recipe runs through a launcher (torchrun, SLURM) rather than in-process:
    a scheduler, several processes asked for, or (unset) a host with several GPUs to use."""
    from clustertune.launch.local import visible_gpus

    ln = recipe.launch
    if ln.backend != "local":
        return True
    return (ln.procs_per_node or visible_gpus(env)) > 1


def plan_for(recipe: Recipe, run_id: str, run_dir: Path) -> LaunchPlan:
    if recipe.launch.backend == "ssh":
        # Each host runs the node command inside its own copy of the run directory, with the
        # env's bin first on PATH: the same command on every host.
        plan = build_plan(recipe, run_id, ".", "python")
    else:
        plan = build_plan(recipe, run_id, str(run_dir), sys.executable)
    bad = secret_looking_env(plan)
    if bad:
        raise LaunchError(
            f"launch.env: {', '.join(bad)} look(s) like secrets, which would be written into the job script; "
            f"list the name(s) in launch.env_passthrough instead and set them in your environment"
        )
    missing = [n for n in plan.env_passthrough if n not in os.environ]
    if missing:
        raise LaunchError(f"launch.env_passthrough: {', '.join(missing)} not set in this environment; export it first")
    return plan


def prepare_run_data(recipe: Recipe, paths: RunPaths) -> None:
    """Prepare the recipe's data once, before any rank starts (a cache hit when it was prepared
    before), and record it in the run directory with the tokenizer every rank will use."""
    if paths.data.is_file() and paths.has_tokenizer:
        return  # a resumed or requeued run keeps the data it started with
    if recipe.task == "rlhf":
        return  # TRL's trainers load their own prompts and preference pairs on the ranks
    from clustertune.data.cache import prepare
    from clustertune.data.staging import write_run_data

    write_run_data(prepare(recipe), paths)


def dry_run_text(recipe: Recipe, root: Path) -> str:
    """The plan (and the sbatch script) a launch would use, for a run directory not yet made."""
    from clustertune.runs.run import new_run_id

    run_id = new_run_id(recipe.name)
    plan = plan_for(recipe, run_id, root / run_id)
    out = ["# launch plan", plan.to_json()]
    if plan.backend == "slurm":
        from clustertune.launch.slurm import render_sbatch

        out += ["# sbatch script", render_sbatch(plan)]
    elif plan.backend == "ssh":
        from clustertune.launch.ssh import dry_run_lines

        out += dry_run_lines(plan, recipe.launch)
    elif not needs_launcher(recipe):
        out += ["# runs in this process (one rank, no launcher): set launch.procs_per_node or launch.backend"]
    else:
        from clustertune.launch.local import local_procs
        from clustertune.launch.plan import node_command

        argv = node_command(plan, 0, ["127.0.0.1"], 0, run_id, local_procs(plan))
        out += ["# command", " ".join(argv)]
    return "\n".join(out)


def _relaunch_target(run: Run) -> None:
    if run.state is RunState.COMPLETED:
        raise RunError(f"run {run.id} already COMPLETED; start a new run instead of --resume")
    if run.state not in RESUMABLE and run.state is not RunState.CREATED:
        raise RunError(f"run {run.id} is {run.state.value}; only failed, cancelled or preempted runs resume")


def launch(recipe: Recipe | None, *, resume: str | None = None, overrides: list[str] | None = None,
           runs_root_dir: str | os.PathLike[str] | None = None, command: list[str] | None = None,
           announce: Callable[[str], None] | None = None) -> Run:
    """Create (or resume) a run and start it through its backend.

    Local: waits for the ranks and returns the finished run. SLURM: returns once submitted
    (the run is PENDING; `clustertune status RUN_ID` follows it). On resume, ``overrides`` may
    change only ``launch.*`` keys (e.g. another world size); the data position carries over.
    """
    if resume is not None:
        run = get_run(resume, runs_root_dir)
        _relaunch_target(run)
        bad = [o for o in overrides or [] if not o.strip().startswith("launch.")]
        if bad:
            raise UserError(f"--resume keeps the run's recipe; only launch.* keys may change ({', '.join(bad)})")
        recipe = load_recipe(run.paths.recipe, overrides or [])
        if run.info.backend == "ssh" and run.info.remote is not None:
            from clustertune.launch.ssh import before_resume

            before_resume(run)
        run.paths.recipe.write_text(dump_recipe(recipe), encoding="utf-8")
        run.set_backend(recipe.launch.backend)
    else:
        assert recipe is not None
        # Problems found without heavy imports fail here, before any run directory exists;
        # the ranks check the model and data themselves (their errors land in run.json).
        from clustertune.train.metrics import check_trackers

        check_trackers(list(recipe.tracking.trackers))
        early = plan_for(recipe, "", Path("."))
        if recipe.launch.backend == "local":
            from clustertune.launch.local import local_procs

            local_procs(early)
        elif recipe.launch.backend == "ssh":
            from clustertune.launch.ssh import check_nodes, find_cluster

            check_nodes(recipe.launch, len(find_cluster(str(recipe.launch.cluster)).hosts))
        elif shutil.which("sbatch") is None:
            raise LaunchError(
                "launch.backend=slurm: `sbatch` is not on PATH; run on a SLURM login node "
                "(or install the SLURM client commands), or use launch.backend=local"
            )
        root = runs_root(runs_root_dir or recipe.tracking.runs_root)
        run = Run.create(root, recipe.name, recipe.task, dump_recipe(recipe), command or list(sys.argv),
                         backend=recipe.launch.backend)
    plan = plan_for(recipe, run.id, run.paths.root)
    try:
        if plan.backend != "slurm":  # on SLURM the data is the job's first step
            prepare_run_data(recipe, run.paths)
    except UserError as exc:
        run.transition(RunState.FAILED, reason=str(exc))
        raise
    if plan.backend == "slurm":
        from clustertune.launch.slurm import submit

        submit(plan, run)
        return run
    if plan.backend == "ssh":
        from clustertune.launch import ssh

        job = ssh.submit(plan, run, recipe.launch)
        try:
            if announce is not None:
                procs = ssh.describe_procs(job.remote.get("procs_per_node") or [plan.procs_per_node or 1])
                announce(f"run {run.id}: {plan.nodes} host(s) of cluster {recipe.launch.cluster} x "
                         f"{procs} process(es); Ctrl-C leaves it running there")
                for line in job.follow():
                    announce(line)
            job.wait()
        except KeyboardInterrupt:
            if announce is not None:
                announce(f"run {run.id} goes on on the cluster: `clustertune logs {run.id} --follow`, "
                         f"`clustertune cancel {run.id}`")
            raise
        return run.reload()
    from clustertune.launch.local import run_torchrun

    if announce is not None:
        announce(f"run {run.id}: {plan.procs_per_node or 'one per GPU'} processes through torchrun; "
                 f"follow with `clustertune logs {run.id} --follow`")
    run_torchrun(plan, run)
    return run
