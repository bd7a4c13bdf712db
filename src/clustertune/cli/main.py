"""``clustertune``: the entry point. Parses, calls the library, prints; user errors exit 2."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from clustertune import __version__, startup
from clustertune.cli import (bench_cmds, cloud_cmds, cluster_cmds, data_cmds, eval_cmds, export_cmds, launch_cmds, perf_cmds,
                             run_cmds, runs_cmds, serve_cmds, start_cmds, sweep_cmds, use_cmds)
from clustertune.errors import UserError
from clustertune.process_exit import exit_now
from clustertune.recipe.keys import all_keys
from clustertune.recipe.trainer_names import PEER_NAMES, TRAINER_NAMES

# typer ships its own copy of click: catch that copy's exceptions, whichever it is.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")

app = typer.Typer(
    name="clustertune",
    help="Fine-tune and train Hugging Face transformers on a laptop, a GPU box, SSH servers or SLURM.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        print(f"clustertune {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for user errors too (anywhere on the line)."),
    version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True,
                                 help="Print clustertune's version and exit."),
) -> None:
    """One YAML recipe, every target."""


# Every command and command group, in the order `clustertune --help` lists them:
# (name, the function or typer group, typer's options for it).
COMMANDS: list[tuple[str, Callable[..., Any] | typer.Typer, dict[str, Any]]] = [
    ("run", run_cmds.run, {"context_settings": {"allow_extra_args": False}}),
    ("launch", launch_cmds.launch, {}),
    ("validate", run_cmds.validate, {}),
    ("init", start_cmds.init, {}),
    ("schema", start_cmds.schema, {}),
    ("recipes", run_cmds.recipes, {}),
    ("sweep", sweep_cmds.sweep, {}),
    ("sweeps", sweep_cmds.sweeps, {}),
    ("runs", runs_cmds.runs_app, {}),
    ("logs", runs_cmds.logs, {}),
    ("status", runs_cmds.status, {}),
    ("cancel", runs_cmds.cancel, {}),
    ("generate", use_cmds.generate, {}),
    ("chat", use_cmds.chat, {}),
    ("serve", serve_cmds.serve, {}),
    ("eval", eval_cmds.eval_, {}),
    ("estimate-memory", perf_cmds.estimate_memory, {}),
    ("doctor", perf_cmds.doctor, {}),
    ("prepare", data_cmds.prepare, {}),
    ("cache", data_cmds.cache_app, {}),
    ("stage", data_cmds.stage, {}),
    ("fetch", data_cmds.fetch, {}),
    ("export", export_cmds.export, {}),
    ("cluster", cluster_cmds.cluster_app, {}),
    ("cloud", cloud_cmds.cloud_app, {}),
    ("sync", cluster_cmds.sync, {}),
    ("exec", cluster_cmds.exec_, {}),
    ("bench", bench_cmds.bench, {}),
]
for _name, _target, _options in COMMANDS:
    if isinstance(_target, typer.Typer):
        app.add_typer(_target, name=_name, **_options)
    else:
        app.command(_name, **_options)(_target)


def _option_hint(option: str, args: list[str]) -> str | None:
    """``--max-steps 10`` typed as a script's flag: the recipe key it means, as key=value."""
    name = option.lstrip("-").replace("-", "_")
    keys = [d.key for d in all_keys() if d.key.rsplit(".", 1)[-1] == name]
    mapped = TRAINER_NAMES.get(name) or PEER_NAMES.get(name)
    key = keys[0] if keys else (mapped[0] if mapped else None)
    if key is None:
        return None
    given = next((a for a in args if a == option or a.startswith(option + "=")), option)
    i = args.index(given) if given in args else -1
    value = given.split("=", 1)[1] if "=" in given else (
        args[i + 1] if 0 <= i < len(args) - 1 and not args[i + 1].startswith("-") else "VALUE")
    return f"recipe keys go after the recipe as key=value: {key}={value}"


def main(argv: list[str] | None = None) -> int:
    args, command = launch_cmds.split_command(list(sys.argv[1:] if argv is None else argv))
    # --debug is read wherever it stands (`clustertune run x.yaml --debug`), before or after the
    # command's name; the user's own command after `--` keeps its own.
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    logging.getLogger("clustertune").setLevel(logging.DEBUG if debug else logging.INFO)
    try:
        # Without standalone mode, an Exit(code) raised by a command comes back as the return value.
        rc = app(args=args, prog_name="clustertune", standalone_mode=False, obj={"command": command})
    except UserError as exc:
        if debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except _ClickException as exc:  # usage errors: unknown option, missing argument (exit 2)
        exc.show()
        option = getattr(exc, "option_name", None)
        hint = _option_hint(option, args) if option else None
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return 130
    return rc if isinstance(rc, int) else 0


def run() -> NoReturn:
    """The ``clustertune`` console entry point: :func:`main`, then the end of the process without
    the interpreter's teardown (:mod:`clustertune.process_exit` says why). An exception that
    escapes :func:`main` (a bug) takes Python's ordinary exit, traceback and all. The collector
    is held while the command starts (:mod:`clustertune.startup`): training and serving release it."""
    startup.hold()
    exit_now(main())


if __name__ == "__main__":
    run()
