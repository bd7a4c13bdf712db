"""Sweeps: one recipe, many runs. The space (Hydra's multirun syntax, :mod:`clustertune.recipe.sweep_space`)
is expanded into trials, every trial's recipe goes through the same preflight and decision as
``run`` (:func:`clustertune.api.decide`), and only when all of them pass does anything start:
one after another here (or ``parallel`` at once), on SSH hosts, or as one SLURM job array.

Each trial is an ordinary run (``runs``, ``logs``, ``generate``, ``run:<id>`` bases) whose
run.json names its sweep; the sweep's directory lists them (:mod:`clustertune.runs.sweeps`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clustertune.api.runs import decide
from clustertune.api.sweep_report import metric_text, plot_sweep, sweep_report, sweep_rows, trial_run
from clustertune.api.sweep_search import PRUNERS, probe_trials, search, search_in_waves
from clustertune.api.sweep_slots import Slot, gpu_shares, local_gpu_ids, ssh_host_groups, trial_slots
from clustertune.data.fingerprint import processing_identity, selection_identity
from clustertune.errors import LaunchError, RunError, UserError
from clustertune.launch.backends import job_for
from clustertune.launch.decision import Decision, decision_for
from clustertune.launch.submit import open_run
from clustertune.launch.sweep_array import check_array, render_array, shared_flags, submit_array
from clustertune.recipe.load import resolve_recipe_path, shipped_recipes
from clustertune.recipe.sweep_space import Space, grid, parse_space, random_trials, trial_overrides
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.sweeps import Sweep, SweepInfo, get_sweep, new_sweep_id

log = logging.getLogger("clustertune")
Announce = Callable[[str], None]


@dataclass(frozen=True)
class SweepDecision:
    """A sweep decided: its space, its trials (each one's run decided as ``run`` decides it) and
    where they go. :func:`describe_sweep` renders it; :func:`start_sweep` does it."""

    source: str
    name: str
    space: Space
    mode: Literal["grid", "random", "optuna"]
    trials: tuple[dict[str, str], ...]
    decisions: tuple[Decision, ...]
    backend: str
    max_concurrent: int | None = None
    parallel: int = 1
    metric: str = "eval_loss"
    direction: Literal["min", "max"] = "min"
    runs_root: str | None = None
    args: tuple[str, ...] = ()
    search: dict[str, Any] | None = None  # Optuna: trials, pruner, seed

    @property
    def data_groups(self) -> list[list[int]]:
        """Trials that read the same prepared data (one cache entry, prepared once)."""
        groups: dict[str, list[int]] = {}
        for i, d in enumerate(self.decisions):
            groups.setdefault(data_key(d), []).append(i)
        return list(groups.values())


def data_key(decision: Decision) -> str:
    """What a trial's prepared data depends on (the cache's own inputs but the trained
    tokenizer's digest, which the same tokenizer settings make the same)."""
    r = decision.recipe
    m = r.model
    parts = {"task": r.task, "data": r.data.model_dump(mode="json"), "processing": processing_identity(r),
             "selection": selection_identity(r, None),
             "tokenizer": [m.name_or_path, m.tokenizer, getattr(m, "tokenizer_vocab_size", None)]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _source_text(source: str | os.PathLike[str]) -> str:
    text = str(source)
    return text if text in shipped_recipes() else str(resolve_recipe_path(text))


def decide_sweep(source: str | os.PathLike[str], args: list[str], *, random_n: int | None = None, seed: int = 0,
                 max_concurrent: int | None = None, parallel: int = 1, metric: str = "eval_loss",
                 direction: Literal["min", "max"] = "min", runs_root_dir: str | os.PathLike[str] | None = None,
                 dry: bool = False, search: str | None = None, n_trials: int | None = None,
                 pruner: str = "median") -> SweepDecision:
    """Every trial of the sweep decided, or one UserError naming every trial that cannot run
    (its index and swept values, then its problems) and nothing written. A search (``search``
    ``"optuna"``, ``n_trials`` of them) is checked with every value of each key
    (:func:`clustertune.api.sweep_search.probe_trials`); its trials are decided as it asks for them."""
    space = parse_space(args)
    if not space.axes:
        raise UserError("a sweep needs at least one swept key: key=a,b,c, key=range(...) or key=choice(...) "
                        "(every key=value given is one fixed value)")
    if parallel < 1:
        raise UserError(f"--parallel {parallel}: at least 1 trial must run at a time")
    if direction not in ("min", "max"):
        raise UserError(f"--direction {direction!r}: min or max")
    searched = None
    if search is not None:
        if search != "optuna":
            raise UserError(f"--search {search!r}: the search there is is optuna")
        if n_trials is None or n_trials < 1:
            raise UserError("--search optuna --trials N: how many trials to run (at least 1)")
        if random_n is not None:
            raise UserError("--random N draws the trials itself; --search optuna asks the study for them: give one")
        if pruner not in PRUNERS:
            raise UserError(f"--pruner {pruner!r}: one of {', '.join(PRUNERS)}")
        searched = {"trials": n_trials, "pruner": pruner, "seed": seed}
        trials = probe_trials(space)
    else:
        trials = random_trials(space, random_n, seed) if random_n is not None else grid(space)
    decisions, failed = [], []
    base_backend: str | None = None
    for i, trial in enumerate(trials):
        try:
            d = decide(source, trial_overrides(space, trial), runs_root_dir=runs_root_dir, dry=dry, show_progress=False)
        except UserError as exc:
            failed.append((i, trial, exc))
            continue
        if base_backend is None:
            base_backend = d.recipe.launch.backend
            if base_backend == "slurm":  # before the other trials' preflight; a search's arrays are its waves
                check_array(wave_size(searched, max_concurrent) if searched else len(trials), max_concurrent)
        if d.recipe.launch.backend != base_backend:
            failed.append((i, trial, UserError(f"launch.backend is {d.recipe.launch.backend}, trial 0's is "
                                               f"{base_backend}: one sweep runs on one backend")))
            continue
        if parallel > 1 and d.backend == "inprocess":
            # Several at once: each in its own process (torchrun), never several in this one.
            d = decision_for(d.recipe, "local", d.root, dry=d.dry, library_warnings=d.library_warnings)
        decisions.append(d)
    if failed:
        raise UserError(_failures(failed, len(trials)))
    assert base_backend is not None
    if searched is not None and (base_backend == "ssh" or parallel > 1):
        raise UserError(f"--search optuna runs its trials here one at a time, or on SLURM in waves of arrays (this "
                        f"recipe's launch.backend is {base_backend}{', with --parallel' if parallel > 1 else ''}): on "
                        "SSH hosts sweep a grid or --random N")
    if searched is not None and base_backend == "slurm":
        max_concurrent = wave_size(searched, max_concurrent)
    if base_backend == "slurm":
        shared_flags([d.plan for d in decisions])
    elif max_concurrent is not None:
        raise UserError("--max-concurrent is the SLURM array's %C; here use --parallel N")
    if base_backend in ("inprocess", "local"):
        gpu_shares(local_gpu_ids(), parallel)  # more trials at once than GPUs: refused now
    elif parallel > 1:
        raise UserError(f"--parallel is for trials here; on {base_backend} "
                        + ("--max-concurrent C limits the array" if base_backend == "slurm"
                           else "the trials run one on each group of launch.nodes hosts"))
    name = decisions[0].recipe.name
    mode: Literal["grid", "random", "optuna"] = "optuna" if searched else "random" if random_n is not None else "grid"
    return SweepDecision(_source_text(source), name, space, mode, tuple(trials), tuple(decisions), base_backend,
                         max_concurrent, parallel, metric, direction, None if runs_root_dir is None else str(runs_root_dir),
                         tuple(args), searched)


DEFAULT_WAVE = 4  # a search's trials per SLURM array when --max-concurrent does not say


def wave_size(searched: dict[str, Any], max_concurrent: int | None) -> int:
    """How many trials a search on SLURM asks for, submits as one array and waits for at a time."""
    return min(int(searched["trials"]), max_concurrent or DEFAULT_WAVE)


def _label(trial: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in trial.items())


def _failures(failed: list[tuple[int, dict[str, str], UserError]], total: int) -> str:
    # The same problem in every trial (an unknown key, a bad fixed value) is told once, each
    # trial's own value of a swept key written as <swept>.
    def general(trial: dict[str, str], text: str) -> str:
        for k, v in trial.items():
            text = text.replace(f"{k}={v}", f"{k}=<swept>")
        return text

    texts = {general(trial, str(exc)) for _, trial, exc in failed}
    if len(failed) == total and len(texts) == 1:
        return f"every trial of the sweep fails the same check; nothing was submitted:\n{texts.pop()}"
    lines = [f"{len(failed)} of {total} trials cannot run; nothing was submitted:"]
    for i, trial, exc in failed:
        lines.append(f"trial {i} ({_label(trial)}):")
        lines += ["  " + line for line in str(exc).splitlines()]
    return "\n".join(lines)


def describe_sweep(sd: SweepDecision) -> str:
    """What :func:`start_sweep` would start: each trial with its overrides and run, where they
    run, and which trials share one prepared dataset."""
    where = {"inprocess": "here, one after another", "local": "here, one after another",
             "slurm": "as one SLURM job array", "ssh": "on the recipe's SSH hosts"}[sd.backend]
    if sd.backend == "ssh":
        groups = ssh_host_groups(sd.decisions[0])
        where += (f", {len(groups)} at a time (one on each group of {sd.decisions[0].plan.nodes} host(s))"
                  if len(groups) > 1 else ", one after another")
    if sd.parallel > 1:
        where = f"here, {sd.parallel} at a time"
    if sd.backend == "slurm":
        where += f" (--array=0-{len(sd.trials) - 1}" + (f"%{sd.max_concurrent}" if sd.max_concurrent else "") + ")"
    lines = [f"# sweep of {sd.source}: {len(sd.trials)} trials ({sd.mode}), {where}",
             f"# fixed: {' '.join(sd.space.fixed) or '(none)'}",
             f"# metric: {sd.metric} ({sd.direction})"]
    if sd.search is not None:
        if sd.backend == "slurm":
            where = (f"on SLURM in waves: {sd.max_concurrent} trials asked, submitted as one job array and told "
                     "before the next are asked")
        lines[0] = (f"# sweep of {sd.source}: {sd.search['trials']} trials asked of Optuna (TPE sampler, seed "
                    f"{sd.search['seed']}; {sd.search['pruner']} pruner on each trial's {sd.metric}), {where}")
        lines.append(f"# checked before it starts, each value of each key ({len(sd.trials)} recipes):")
        lines += [f"check {i}: {_label(trial)}" for i, trial in enumerate(sd.trials)]
        return "\n".join(lines)
    for i, (trial, d) in enumerate(zip(sd.trials, sd.decisions)):
        lines.append(f"trial {i}: {_label(trial)}  -> run {d.run_id}")
    for group in sd.data_groups:
        who = "trial " + ", ".join(map(str, group)) if len(group) < len(sd.trials) else "all trials"
        lines.append(f"# data: {who} read one prepared dataset, prepared once (a cache hit after the first)")
    if sd.backend == "slurm":
        flags = sorted([*shared_flags([d.plan for d in sd.decisions]), f"--job-name=ct-sweep-{sd.name}"])
        lines += ["# the array's batch script (each task runs its trial's own script, shown by `run --dry-run`)",
                  render_array("<sweep id>", flags, {i: d.plan.run_dir for i, d in enumerate(sd.decisions)})]
    return "\n".join(lines)


def _start_one(sweep: Sweep, index: int, decision: Decision, command: list[str] | None,
               show_progress: bool) -> Run | None:
    """Start one trial (here: run it to its end). A trial that fails, or that ``cancel`` ended,
    is its own: the others go on. Ctrl-C (no cancel request) stops the sweep."""
    run = None
    try:
        opened = open_run(decision, command)
        run = opened.run
        run.set_sweep(sweep.id, index, sweep.trial(index).overrides)
        return opened.backend.submit(decision.plan, run, opened.recipe, None, show_progress).run
    except UserError as exc:
        log.warning("sweep %s: trial %d failed to start: %s", sweep.id, index, exc)
        return run.reload() if run is not None else None
    except KeyboardInterrupt:
        if run is not None and run.paths.cancel_request.is_file():
            return run.reload()
        raise


def start_sweep(sd: SweepDecision, *, command: list[str] | None = None, announce: Announce | None = None,
                show_progress: bool = False) -> Sweep:
    """Start every trial: here each one runs to its end (``parallel`` at a time) and the sweep
    returns once all have; on SLURM, once the array is submitted (the trials PENDING)."""
    if any(d.dry for d in sd.decisions):
        raise UserError("this sweep was decided for a dry run; decide it again without dry=True to start it")
    info = SweepInfo(id=new_sweep_id(sd.name), name=sd.name, recipe=sd.source, fixed=list(sd.space.fixed),
                     keys=sd.space.keys(), mode=sd.mode, backend=sd.backend, metric=sd.metric, direction=sd.direction,
                     max_concurrent=sd.max_concurrent, space=list(sd.args), search=sd.search)
    sweep = Sweep.create(sd.runs_root, info)
    say = announce or (lambda _text: None)
    if sd.search is not None:
        say(f"sweep {sweep.id}: {sd.search['trials']} trials asked of Optuna ({sweep.dir})")
        _search(sweep, sd.space, command, show_progress, say)
        return sweep
    for trial, d in zip(sd.trials, sd.decisions):
        sweep.update_trial(sweep.add_trial(trial).index, run_id=d.run_id)
    say(f"sweep {sweep.id}: {len(sd.trials)} trials ({sweep.dir})")
    if sd.backend == "slurm":
        _submit_array(sweep, dict(enumerate(sd.decisions)), sd.max_concurrent, command)
        say(f"SLURM array {sweep.info.array_job} submitted; follow it with `clustertune sweep show {sweep.id}`")
        return sweep

    slots = trial_slots(sd.backend, sd.decisions[0], sd.parallel)
    free: queue.SimpleQueue[Slot] = queue.SimpleQueue()
    for slot in slots:
        free.put(slot)

    def one(index: int) -> None:
        if sweep.cancelled:
            say(f"trial {index} ({_label(sd.trials[index])}): not started, the sweep was cancelled")
            return
        slot = free.get()
        try:
            run = _start_one(sweep, index, slot.place(sd.decisions[index]), command, show_progress and len(slots) == 1)
        finally:
            free.put(slot)
        where = f" on {slot.label}" if slot.label else ""
        say(f"trial {index} ({_label(sd.trials[index])}){where}: "
            + (f"run {run.id} {run.state.value}" + metric_text(sweep, run) if run is not None else "did not start"))

    if len(slots) > 1:
        with ThreadPoolExecutor(len(slots)) as pool:
            list(pool.map(one, range(len(sd.decisions))))
    else:
        for i in range(len(sd.decisions)):
            one(i)
    return sweep


def _search(sweep: Sweep, space: Space, command: list[str] | None, show_progress: bool, say: Announce) -> None:
    if sweep.info.backend == "slurm":
        search_in_waves(sweep, space, int(sweep.info.max_concurrent or DEFAULT_WAVE),
                        lambda sw, ds: _submit_array(sw, ds, None, command), say)
    else:
        search(sweep, space, lambda sw, i, d: _start_one(sw, i, d, command, show_progress), say)


def _submit_array(sweep: Sweep, decisions: dict[int, Decision], max_concurrent: int | None,
                  command: list[str] | None) -> str:
    opened = {}
    for i, d in decisions.items():
        o = open_run(d, command)
        o.run.set_sweep(sweep.id, i, sweep.trial(i).overrides)
        opened[i] = (d.plan, o.run)
    array = submit_array(sweep.id, sweep.dir, opened, max_concurrent, job_name=f"ct-sweep-{sweep.info.name}")
    sweep.info.array_job = array
    for i in decisions:
        sweep.trial(i).job_id = f"{array}_{i}"
        sweep.trial(i).run_id = opened[i][1].id
    sweep.save()
    return array


# -- resume and cancel ----------------------------------------------------------------------------

RERUN = (RunState.FAILED, RunState.CANCELLED, RunState.TIMEOUT, RunState.PREEMPTED)


def resume_sweep(sweep_id: str, *, runs_root_dir: str | os.PathLike[str] | None = None,
                 announce: Announce | None = None, show_progress: bool = False) -> Sweep:
    """Run again only the trials that failed, were cancelled, timed out or never started: each
    resumed from its newest checkpoint (a trial never started starts now). Completed and pruned
    trials stay as they are."""
    sweep = get_sweep(sweep_id, runs_root_dir)
    say = announce or (lambda _text: None)
    root = sweep.runs_root
    if sweep.info.mode == "optuna":
        return _resume_search(sweep, show_progress, say)
    again: dict[int, Decision] = {}
    for t in sweep.info.trials:
        if t.pruned:
            continue
        run = trial_run(t.run_id, root)
        if run is not None and run.state not in RERUN:
            continue
        if run is not None:
            again[t.index] = decide(resume=run.id, runs_root_dir=root, show_progress=False)
        else:
            overrides = [*sweep.info.fixed, *(f"{k}={v}" for k, v in t.overrides.items())]
            again[t.index] = decide(sweep.info.recipe, overrides, runs_root_dir=root, show_progress=False)
            sweep.update_trial(t.index, run_id=again[t.index].run_id)
    if not again:
        raise RunError(f"sweep {sweep.id}: no trial failed, was cancelled or is missing; nothing to resume")
    sweep.clear_cancelled()
    say(f"sweep {sweep.id}: resuming trial(s) {', '.join(map(str, again))}")
    if sweep.info.backend == "slurm":
        _submit_array(sweep, again, sweep.info.max_concurrent, None)
        say(f"SLURM array {sweep.info.array_job} submitted")
        return sweep
    for i, d in again.items():
        if sweep.cancelled:
            say(f"trial {i}: not started, the sweep was cancelled")
            continue
        run = _start_one(sweep, i, d, None, show_progress)
        say(f"trial {i}: " + (f"run {run.id} {run.state.value}{metric_text(sweep, run)}" if run else "did not start"))
    return sweep


def _resume_search(sweep: Sweep, show_progress: bool, say: Announce) -> Sweep:
    root = sweep.runs_root
    wanted = int((sweep.info.search or {}).get("trials", 0))
    unfinished = [t.index for t in sweep.info.trials if not t.pruned and t.value is None
                  and not _completed(t.run_id, root)]
    if not unfinished and len(sweep.info.trials) >= wanted:
        raise RunError(f"sweep {sweep.id}: all {wanted} trials of the search are done; nothing to resume")
    sweep.clear_cancelled()
    say(f"sweep {sweep.id}: resuming the search: trial(s) {', '.join(map(str, unfinished)) or '(none)'} again, "
        f"{wanted - len(sweep.info.trials)} more to ask for")
    _search(sweep, parse_space(sweep.info.space), None, show_progress, say)
    return sweep


def _completed(run_id: str | None, root: Path) -> bool:
    run = trial_run(run_id, root)
    return run is not None and run.state is RunState.COMPLETED


def cancel_sweep(sweep_id: str, runs_root_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Cancel every trial still queued or running, and start no further one; the run ids cancelled."""
    sweep = get_sweep(sweep_id, runs_root_dir)
    sweep.mark_cancelled()
    root = sweep.runs_root
    done = []
    for t in sweep.info.trials:
        run = trial_run(t.run_id, root)
        if run is None or run.state.terminal:
            continue
        try:
            job_for(run).cancel()
            done.append(run.id)
        except (RunError, LaunchError) as exc:
            log.warning("sweep %s: trial %d (run %s): %s", sweep.id, t.index, run.id, exc)
    return done


__all__ = ["SweepDecision", "decide_sweep", "describe_sweep", "start_sweep", "sweep_rows", "sweep_report",
           "plot_sweep", "resume_sweep", "cancel_sweep"]
