"""``run``, ``validate`` and ``recipes``."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from clustertune.cli.completion import complete_override, complete_recipe, complete_shipped
from clustertune.errors import UserError
from clustertune.recipe.load import load_recipe, resolve_recipe_path, shipped_recipe, shipped_recipes
from clustertune.recipe.schema import Recipe
from clustertune.runs.metrics_file import read_metrics
from clustertune.tasks import find_task
from clustertune.runs.report import final_lines, generation_change
from clustertune.runs.state import RunState
from clustertune.recipe.keys import explain
from clustertune import api


def run(
    recipe: Optional[str] = typer.Argument(None, help="Recipe file or shipped name (`clustertune recipes`).",
                                           autocompletion=complete_recipe),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides, e.g. train.lr=3e-4", autocompletion=complete_override),
    resume: Optional[str] = typer.Option(None, "--resume",
                                         help="Continue this run id (or `last`, the newest run) from its last checkpoint."),
    runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run directories live."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the launch plan (and sbatch script) and, on SLURM or SSH, what the cluster says of it (sbatch --test-only; once a day a short probe step on a node); train nothing."),
    trust_checkpoint: bool = typer.Option(
        False, "--trust-checkpoint",
        help="With --resume: sign the run's newest checkpoint with your key when it is unsigned or signed with "
             "another key (you vouch for its files), instead of refusing it."),
) -> None:
    """Run a recipe (or --resume RUN_ID); prints where the model and metrics are."""
    if resume is not None and not resume.strip():
        raise UserError("--resume needs a run id (`clustertune runs` lists them)")
    if resume is None and recipe is None:
        raise UserError("give a recipe: a YAML file or a shipped name (`clustertune recipes` lists them)")
    _run_cmd(recipe, overrides or [], resume, runs_root, dry_run, progress, trust_checkpoint)

def validate(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name.", autocompletion=complete_recipe),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides.", autocompletion=complete_override),
    explain: bool = typer.Option(False, "--explain", help="Also list every key the recipe sets, with its doc."),
    runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run directories live (for run:<run> models)."),
    on: Optional[str] = typer.Option(
        None, "--on", metavar="CLUSTER",
        help="Also ask the cluster: `slurm` (partition, limits, GPU types, sbatch --test-only, a compute node's "
             "environment, memory per GPU) or an SSH cluster's name (each host's GPUs, memory, disk, env)."),
    refresh: bool = typer.Option(False, "--refresh", help="With --on slurm: probe a compute node again instead of "
                                                          "using the answer kept for a day."),
    as_json: bool = typer.Option(False, "--json", help="With --on: the findings as JSON."),
) -> None:
    """Check a recipe as `run` would before it starts, without a GPU and without network; every
    problem at once (README: "What clustertune checks before it runs"). With --on CLUSTER, then ask
    the cluster whether the run would run there (README: "Before the queue"); exit 2 on a problem."""
    if on is not None:
        _validate_on(recipe, overrides or [], on, runs_root, refresh, as_json)
        return
    if refresh or as_json:
        raise UserError("--refresh and --json go with --on CLUSTER")
    checked = api.validate(recipe, overrides or [], runs_root_dir=runs_root)
    r = checked.recipe
    src = r.model.name_or_path or f"{r.model.config} (fresh)"
    if r.rl is not None:
        src = f"{r.rl.algorithm} policy {r.rl.policy}"
    data = r.data.dataset or ", ".join(r.data.train_files)
    print(f"ok: {resolve_recipe_path(recipe)}: {r.task}, model {src}, data {data}")
    if checked.not_checked:  # what needs the network (or a run not trained yet), in one line
        print(f"not checked offline: {'; '.join(checked.not_checked)}")
    if explain:
        _explain(r)


def _validate_on(recipe: str, overrides: list[str], target: str, runs_root: Path | None, refresh: bool,
                 as_json: bool) -> None:
    report = api.validate_on(recipe, overrides, target, runs_root_dir=runs_root, refresh=refresh)
    if as_json:
        print(json.dumps(report.to_json(), indent=2, default=str))
        if report.problems:
            raise typer.Exit(2)
        return
    where = f"cluster {report.facts['cluster']}" if "cluster" in report.facts else f"cluster {report.target}"
    print(f"{resolve_recipe_path(recipe)} on {where}:")
    print("\n".join(report.lines()))
    if report.problems:
        raise api.cluster_check.ClusterCheckError(
            f"{len(report.problems)} problem(s) above would stop the run on {report.target}; each names the key to "
            "change")
    print(f"ok: nothing found that would stop it on {report.target}")


def _explain(r: Recipe) -> None:
    """The keys set to something other than their default: value, default, doc."""
    for doc, value in explain(r):
        print(f"\n{doc.key} = {json.dumps(value)}  (default {json.dumps(doc.default)})")
        for line in textwrap.wrap(doc.doc, 96, initial_indent="    ", subsequent_indent="    "):
            print(line)

def recipes(name: Optional[str] = typer.Argument(None, help="Print this shipped recipe (and its path).",
                                                  autocompletion=complete_shipped)) -> None:
    """List the shipped recipes, or print one: `clustertune recipes NAME > mine.yaml` to start from it."""
    if name is not None:
        path = shipped_recipe(name)
        print(f"# {path}")
        print(path.read_text(encoding="utf-8"), end="")
        return
    table = Table("name", "task", "description", box=None)
    for name, path in shipped_recipes().items():
        try:
            r = load_recipe(path)
            table.add_row(name, r.task, r.description)
        except UserError as exc:  # a broken shipped recipe is a bug, but still list it
            table.add_row(name, "?", f"INVALID: {exc}")
    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)


def _run_cmd(recipe: str | None, overrides: list[str], resume: str | None, runs_root: Path | None,
             dry_run: bool, progress: bool, trust_checkpoint: bool = False) -> None:
    """Where and how it runs is decided by the library; this prints the outcome."""
    if resume is not None:
        # `--resume ID launch.procs_per_node=1`: typer puts the first override in `recipe`; the
        # API holds the rule (launch.* keys only) for every caller.
        source, overrides = None, [o for o in [recipe, *overrides] if o]
    else:
        source = recipe
    decided = api.decide(source, overrides, resume=resume, runs_root_dir=runs_root, trust_checkpoint=trust_checkpoint,
                         show_progress=progress, dry=dry_run)
    if dry_run:  # the same decision a run starts from, described
        print(api.describe(decided))
        return
    if decided.cluster_report is not None:  # it passed (a problem stopped it in the decision)
        print(decided.cluster_report.summary(), file=sys.stderr, flush=True)
    r = api.start(decided, command=["clustertune", *sys.argv[1:]], show_progress=progress,
                  announce=lambda text: print(text, file=sys.stderr, flush=True))
    if r.state is RunState.PENDING:
        print(f"run {r.id} submitted (SLURM job {r.attempts[-1].job_id}); follow it with `clustertune status {r.id}`")
        return
    print(f"run {r.id} {r.state.value}" + (f": {r.info.reason}" if r.state is not RunState.COMPLETED and r.info.reason else ""))
    if (r.info.remote or {}).get("keep_on_cluster"):
        print("\n".join(api.kept_result_lines(r)))  # nothing came back: where it is, and how to fetch it
    else:
        print(f"  model:   {r.paths.model}")
        print(f"  metrics: {r.paths.metrics}")
        task = find_task(r.info.task)
        if task is not None and task.generation_eval and (line := generation_change(read_metrics(r.paths.metrics))):
            print(line)  # the held-out generation check, before and after
        if r.state is RunState.COMPLETED:
            print("\n".join(final_lines(r)))  # the headline figure, then what to do with the model
    if r.state is not RunState.COMPLETED:
        raise typer.Exit(1)
