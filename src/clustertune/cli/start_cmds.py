"""``init`` (a commented starter recipe) and ``schema`` (every recipe key, its type, default and doc)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Optional

import typer

from clustertune.cli.completion import complete_key
from clustertune.errors import UserError
from clustertune.recipe.keys import all_keys, keys_under, recipe_json_schema
from clustertune.recipe.starters import write_starter


def init(
    path: Path = typer.Argument(Path("recipe.yaml"), help="File to write (a directory gets recipe.yaml)."),
    task: str = typer.Option("causal_lm", "--task", "-t",
                             help="causal_lm, classification (sequence_classification), sft, rlhf (GRPO) or dpo."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a commented starter recipe for a task; it validates as written."""

    target = write_starter(task, path, force=force)
    print(f"wrote {target}")
    print(f"  check it: clustertune validate {target}")
    print(f"  run it:   clustertune run {target}")


def schema(
    key: Optional[str] = typer.Argument(None, help="A section (`train`) or a key (`train.lr`); default: all.",
                                        autocompletion=complete_key),
    as_json: bool = typer.Option(False, "--json", help="The keys as a JSON list (key, type, default, doc)."),
    json_schema: bool = typer.Option(False, "--json-schema",
                                     help="A JSON Schema of recipe files, for editors (YAML language server)."),
) -> None:
    """Every recipe key with its type, default and doc (from the schema itself)."""

    if json_schema:
        if key is not None or as_json:
            raise UserError("--json-schema describes the whole recipe: give it alone")
        print(json.dumps(recipe_json_schema(), indent=2))
        return
    docs = keys_under(key) if key else all_keys()
    if as_json:
        print(json.dumps([d.to_json() for d in docs], indent=2))
        return
    for d in docs:
        if d.section:
            print(f"\n{d.key}  ({d.type})")
        else:
            default = "required" if d.required else f"default {json.dumps(d.default)}"
            print(f"  {d.key}  {d.type}, {default}")
        for line in textwrap.wrap(d.doc, 96, initial_indent="      ", subsequent_indent="      "):
            print(line)
