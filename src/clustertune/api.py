"""The Python API the CLI calls: load a recipe, run it (or resume a run), look runs up.

>>> import clustertune as ct
>>> recipe = ct.load_recipe("quickstart", ["train.max_steps=20"])
>>> run = ct.run(recipe)
>>> run.state, run.paths.model
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.data.cache import PreparedDataset, log_to_stderr, prepare
from clustertune.errors import RunError, UserError
from clustertune.models.adapters import check_adapter, check_resume_recipe
from clustertune.models.build import check_sequence_fits, resolve_config
from clustertune.recipe.load import dump_recipe, load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.run import Run
from clustertune.runs.state import RESUMABLE, RunState
from clustertune.runs.store import get_run, runs_root
from clustertune.train import checkpoint as ckpt
from clustertune.train.entry import mixed_precision
from clustertune.train.metrics import check_trackers
from clustertune.train.strategies.zero import check_strategy

log = logging.getLogger("clustertune")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is now (rich's live display swaps it while a bar is shown)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


@dataclass
class Checked:
    """What preflight learnt: the prepared data and the model config it checked (neither for
    RL runs, whose trainers load their own prompts and models)."""

    prepared: PreparedDataset | None
    config: Any


def preflight(recipe: Recipe) -> Checked:
    """Checks that need data or a model config, and the data preparation itself (a cache hit
    when the same data was prepared before), done before any run directory exists."""
    check_trackers(list(recipe.tracking.trackers))
    check_strategy(recipe, mixed_precision(recipe))
    if recipe.task == "rlhf":  # TRL's trainers load their own prompts/pairs; nothing to prepare here
        from clustertune.train.rl import preflight_rl

        preflight_rl(recipe)
        return Checked(prepared=None, config=None)
    config = resolve_config(recipe, None)
    check_sequence_fits(recipe, config)
    check_adapter(recipe, config)  # target modules exist, PEFT can wrap, bitsandbytes for QLoRA
    with log_to_stderr():
        prepared = prepare(recipe)
    return Checked(prepared=prepared, config=config)


def _check_same_data(run: Run, prepared: PreparedDataset) -> None:
    """A resumed run must train on the data it started with."""
    p = run.paths.data
    if p.is_file():
        import json

        before = json.loads(p.read_text(encoding="utf-8")).get("fingerprint")
        if before != prepared.fingerprint:
            raise RunError(
                f"run {run.id} trained on prepared data {before}, but its recipe's data now gives "
                f"{prepared.fingerprint} (the source files or the tokenizer changed); start a new run instead of --resume"
            )


def devices_of(recipe: Recipe) -> int:
    """How many devices (training processes) a run of ``recipe`` spans."""
    return 1  # the local backend runs one process


def _attach_log(run: Run) -> list[logging.Handler]:
    log.setLevel(logging.DEBUG)
    fh = logging.FileHandler(run.paths.log, encoding="utf-8")
    fh.setLevel(logging.DEBUG)
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    sh = _StderrHandler()
    sh.setLevel(logging.INFO)
    sh.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(fh)
    log.addHandler(sh)
    log.propagate = False
    return [fh, sh]


def _resume_target(run: Run) -> Path | None:
    """Latest complete checkpoint of ``run``, verified; None when it has none."""
    if run.state is RunState.COMPLETED:
        raise RunError(f"run {run.id} already COMPLETED; start a new run instead of --resume")
    if run.state is RunState.RUNNING:
        att = run.attempts[-1] if run.attempts else {}
        raise RunError(f"run {run.id} is still RUNNING (pid {att.get('pid')} on {att.get('host')}); it cannot be resumed twice")
    if run.state not in RESUMABLE and run.state is not RunState.CREATED:
        raise RunError(f"run {run.id} is {run.state.value}; only failed, cancelled or preempted runs resume")
    found = ckpt.list_checkpoints(run.paths)
    if not found:
        return None
    ckpt.verify_checkpoint(found[-1])  # a corrupt one stops here, before anything changes
    return found[-1]


def resolve_base_model(recipe: Recipe, runs_root_dir: str | os.PathLike[str] | None = None,
                       show_progress: bool = True) -> Recipe:
    """SFT from ``model.name_or_path: run:<run-id>``: the recipe with that run's final model
    directory in its place (so the resolved recipe names what was trained). A missing run named
    like a shipped recipe (``run:quickstart``) is trained first, once."""
    from clustertune.recipe.load import shipped_recipes
    from clustertune.recipe.rl_schema import RUN_PREFIX
    from clustertune.train.rl.sources import resolve_model

    ref = recipe.model.name_or_path or ""
    if recipe.task != "sft" or not ref.startswith(RUN_PREFIX):
        return recipe
    root = str(runs_root(runs_root_dir or recipe.tracking.runs_root))
    try:
        path = resolve_model(ref, "model.name_or_path", root)
    except RunError:
        name = ref[len(RUN_PREFIX):]
        if name not in shipped_recipes():
            raise
        log.info("model.name_or_path: no completed %r run under %s yet; training it first (`clustertune run %s`)",
                 name, root, name)
        run(name, runs_root_dir=root, show_progress=show_progress)
        path = resolve_model(ref, "model.name_or_path", root)
    return recipe.model_copy(update={"model": recipe.model.model_copy(update={"name_or_path": path})})


def run(
    source: Recipe | str | os.PathLike[str] | dict[str, Any] | None = None,
    overrides: list[str] | None = None,
    *,
    resume: str | None = None,
    runs_root_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    command: list[str] | None = None,
) -> Run:
    """Run a recipe (a Recipe, a YAML path, a shipped name or a dict) or resume a run by id.

    Returns the finished :class:`Run`. User errors raise :class:`UserError` subclasses before
    anything is written when they can be found up front; a failure during training leaves the
    run FAILED with the reason (and traceback) in run.json.
    """
    from clustertune.data.staging import write_run_data
    from clustertune.train.entry import execute

    resume_from: Path | None = None
    if resume is not None:
        if source is not None or overrides:
            raise UserError("--resume takes only the run id: the run keeps its resolved recipe")
        existing = get_run(resume, runs_root_dir)
        resume_from = _resume_target(existing)
        recipe = load_recipe(existing.paths.recipe)
        if resume_from is not None:
            check_resume_recipe(resume_from, recipe)  # the same base and adapter settings
    elif isinstance(source, Recipe):
        recipe = source if not overrides else load_recipe(source.to_plain(), overrides)
    elif source is None:
        raise UserError("give a recipe (a YAML file or a shipped name; `clustertune recipes` lists them)")
    else:
        recipe = load_recipe(source, overrides)
    if resume is None:
        recipe = resolve_base_model(recipe, runs_root_dir, show_progress)

    from clustertune.launch.submit import launch, needs_launcher

    if needs_launcher(recipe):  # several processes or a scheduler: through the launcher
        return launch(None if resume else recipe, resume=resume, runs_root_dir=runs_root_dir, command=command)
    checked = preflight(recipe)
    if resume is not None:
        the_run = existing
        if checked.prepared is not None:
            _check_same_data(the_run, checked.prepared)
    else:
        root = runs_root(runs_root_dir or recipe.tracking.runs_root)
        the_run = Run.create(root, recipe.name, recipe.task, dump_recipe(recipe), command or list(sys.argv))
    handlers = _attach_log(the_run)
    try:
        the_run.start_attempt(resumed_from=resume_from.name if resume_from else None)
        if resume is not None and resume_from is None:
            log.info("run %s has no checkpoint yet: training starts again from step 0", the_run.id)
        log.info("run %s: %s (%s)", the_run.id, recipe.name, the_run.paths.root)
        if checked.prepared is not None:
            p = checked.prepared
            log.info("data: %s, %s in %.2fs (%s, %.1f MB)", p.fingerprint, "cache hit" if p.hit else "prepared",
                     p.seconds, p.dir, p.total_bytes / 1e6)
            write_run_data(p, the_run.paths)  # what the nodes read: never raw data
        execute(recipe, the_run.paths, resume_from, show_progress)
        the_run.transition(RunState.COMPLETED)
        log.info("done. model: %s  metrics: %s", the_run.paths.model, the_run.paths.metrics)
    except KeyboardInterrupt:
        the_run.transition(RunState.CANCELLED, reason="interrupted (Ctrl-C / SIGINT)")
        raise
    except UserError as exc:
        the_run.transition(RunState.FAILED, reason=str(exc))
        log.error("run %s failed: %s", the_run.id, exc)
        raise
    except BaseException as exc:
        the_run.transition(RunState.FAILED, reason=f"{type(exc).__name__}: {exc}", traceback_text=traceback.format_exc())
        log.error("run %s failed: %s: %s", the_run.id, type(exc).__name__, exc)
        raise
    finally:
        for h in handlers:
            log.removeHandler(h)
            h.close()
    return the_run
