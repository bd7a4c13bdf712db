"""The CLI's commands: module-level functions, listed once in cli/main.py."""

from __future__ import annotations

import sys

import typer

from clustertune.cli.main import COMMANDS, app


def test_every_command_is_a_module_level_function_listed_once() -> None:
    names = [name for name, _, _ in COMMANDS]
    assert len(names) == len(set(names))
    for name, target, _ in COMMANDS:
        if isinstance(target, typer.Typer):
            continue
        module = sys.modules[target.__module__]
        assert getattr(module, target.__name__) is target, f"{name} is not importable from {module.__name__}"
    registered = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert sorted(registered) == sorted(names)
