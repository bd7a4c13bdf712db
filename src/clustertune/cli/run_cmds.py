"""``run``, ``validate`` and ``recipes``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from clustertune.errors import UserError
from clustertune.recipe.load import load_recipe, resolve_recipe_path, shipped_recipes


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_extra_args": False})
    def run(
        recipe: Optional[str] = typer.Argument(None, help="Recipe file or shipped name (`clustertune recipes`)."),
        overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides, e.g. train.lr=3e-4"),
        resume: Optional[str] = typer.Option(None, "--resume", help="Continue this run id from its last checkpoint."),
        runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run directories live."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
    ) -> None:
        """Run a recipe (or --resume RUN_ID); prints where the model and metrics are."""
        from clustertune.api import run as api_run

        if resume is not None and recipe is not None:
            # `clustertune run --resume ID` only; a recipe beside it is ambiguous.
            raise UserError("--resume takes only the run id: the run keeps its resolved recipe")
        if resume is None and recipe is None:
            raise UserError("give a recipe: a YAML file or a shipped name (`clustertune recipes` lists them)")
        r = api_run(recipe, overrides or [], resume=resume, runs_root_dir=runs_root,
                    show_progress=progress, command=["clustertune", *sys.argv[1:]])
        print(f"run {r.id} {r.state.value}")
        print(f"  model:   {r.paths.model}")
        print(f"  metrics: {r.paths.metrics}")

    @app.command()
    def validate(
        recipe: str = typer.Argument(..., help="Recipe file or shipped name."),
        overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides."),
    ) -> None:
        """Check a recipe without running it and without network; every problem at once."""
        r = load_recipe(recipe, overrides or [])
        src = r.model.name_or_path or f"{r.model.config} (fresh)"
        if r.rl is not None:
            src = f"{r.rl.algorithm} policy {r.rl.policy}"
        data = r.data.dataset or ", ".join(r.data.train_files)
        print(f"ok: {resolve_recipe_path(recipe)}: {r.task}, model {src}, data {data}")

    @app.command()
    def recipes() -> None:
        """List the shipped recipes (run one with `clustertune run NAME`)."""
        table = Table("name", "task", "description", box=None)
        for name, path in shipped_recipes().items():
            try:
                r = load_recipe(path)
                table.add_row(name, r.task, r.description)
            except UserError as exc:  # a broken shipped recipe is a bug, but still list it
                table.add_row(name, "?", f"INVALID: {exc}")
        Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200).print(table)
