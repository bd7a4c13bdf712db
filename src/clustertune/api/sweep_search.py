"""A searched sweep: Optuna asks for each trial's values, each trial runs as an ordinary run, and its
eval curve is reported to the study as it is written, so the pruner can stop it early.

The study lives in the sweep's directory (``study.journal``, Optuna's journal storage): after the
sweep process dies, ``sweep resume`` opens the same study, resumes the trial that was running from
its checkpoint (the study gets it again under a new number, with the same values) and asks only
for the trials still missing. A pruned trial is stopped through its run's stop file (the run ends
with a checkpoint, PREEMPTED) and recorded as pruned, not as a failure.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from clustertune.api.runs import decide
from clustertune.api.sweep_report import trial_run
from clustertune.errors import UserError
from clustertune.extras import install_hint
from clustertune.launch.backends import job_for
from clustertune.launch.decision import Decision
from clustertune.recipe.sweep_space import Space
from clustertune.runs.metrics_file import read_metrics
from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.sweeps import Sweep, trial_metric

log = logging.getLogger("clustertune")
PRUNERS = ("median", "asha", "none")
PRUNE_REQUEST = "the sweep's pruner"  # what a pruned trial's stop file says (its run's reason names it)
Announce = Callable[[str], None]
StartOne = Callable[[Sweep, int, Decision], "Run | None"]
SubmitWave = Callable[[Sweep, "dict[int, Decision]"], str]  # the wave's trials as one array: its job id


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise UserError(f"--search optuna needs Optuna: {install_hint('sweep')}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def study(sweep: Sweep) -> Any:
    """The sweep's study, created in its directory or opened again there."""
    optuna = _optuna()
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    search = sweep.info.search or {}
    pruner = {"median": lambda: optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
              "asha": lambda: optuna.pruners.SuccessiveHalvingPruner(),
              "none": lambda: optuna.pruners.NopPruner()}[search.get("pruner", "median")]()
    storage = JournalStorage(JournalFileBackend(str(sweep.study_path)))
    # A process that opens the study again draws on from where the study is, not from the start of
    # the seed's sequence (which would ask for the values already tried).
    asked = len(sweep.info.trials)
    return optuna.create_study(storage=storage, study_name=sweep.id,
                               direction="minimize" if sweep.info.direction == "min" else "maximize",
                               sampler=optuna.samplers.TPESampler(seed=search.get("seed", 0) + asked), pruner=pruner,
                               load_if_exists=True)


def suggest(trial: Any, space: Space) -> dict[str, str]:
    """One trial's values, asked of the study: a list's (or a range's) as a choice among them, an
    interval's as a float, log-scaled where it says ``log``; each as override text."""
    values = {}
    for axis in space.axes:
        if axis.interval is not None:
            v = trial.suggest_float(axis.key, axis.interval.low, axis.interval.high, log=axis.interval.log)
            values[axis.key] = repr(float(f"{v:.6g}"))
        else:
            values[axis.key] = str(trial.suggest_categorical(axis.key, list(axis.values)))
    return values


def probe_trials(space: Space) -> list[dict[str, str]]:
    """What a search is checked with before it starts: every value of each key (an interval's two
    ends) with the other keys at their first value. The values it goes on to ask for lie among them."""
    def ends(axis: Any) -> list[str]:
        return list(axis.values) if axis.interval is None else [repr(axis.interval.low), repr(axis.interval.high)]

    first = {a.key: ends(a)[0] for a in space.axes}
    out: list[dict[str, str]] = []
    for axis in space.axes:
        for v in ends(axis):
            t = {**first, axis.key: v}
            if t not in out:
                out.append(t)
    return out


class _Watch:
    """Reports a running trial's eval rows to the study as they appear and, when the pruner says
    so, asks its run to stop (the stop file), from a thread beside the one that trains."""

    def __init__(self, trial: Any, run_dir: Any, metric: str):
        self.trial, self.metric, self.pruned, self.reported = trial, metric, False, 0
        self.paths = RunPaths(run_dir)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep-watch", daemon=True)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=30)

    def poll(self) -> None:
        if not self.paths.metrics.is_file():
            return
        rows = [r for r in read_metrics(self.paths.metrics) if r.get("kind") == "eval" and self.metric in r]
        for r in rows[self.reported:]:
            self.trial.report(float(r[self.metric]), int(r["step"]))
            if not self.pruned and self.trial.should_prune():
                self.pruned = True
                self.paths.stop_request.write_text(PRUNE_REQUEST + "\n", encoding="utf-8")
                log.info("trial %d pruned at step %s (%s %.4g)", self.trial.number, r["step"], self.metric, r[self.metric])
        self.reported = len(rows)

    def _loop(self) -> None:
        while True:
            finished = self._done.is_set()
            try:
                self.poll()
            except (OSError, ValueError) as exc:  # a row being written: read it on the next pass
                log.debug("sweep watch: %s", exc)
            if finished:
                return
            self._done.wait(0.2)


def run_trial(sweep: Sweep, st: Any, trial: Any, index: int, decision: Decision, start_one: StartOne) -> str:
    """Run one searched trial to its end, reporting to the study; tell the study how it ended
    (its value, PRUNED, or FAIL); the state it is shown with."""
    with _Watch(trial, sweep.runs_root / decision.run_id, sweep.info.metric) as watch:
        run = start_one(sweep, index, decision)
    return tell(sweep, st, trial, index, run, watch.pruned)


def tell(sweep: Sweep, st: Any, trial: Any, index: int, run: Run | None, pruned: bool) -> str:
    """Tell the study how a trial ended (its value, PRUNED, or FAIL); the state it is shown with."""
    from optuna.trial import TrialState

    value = trial_metric(run, sweep.info.metric) if run is not None else None
    if pruned and run is not None and run.state is not RunState.COMPLETED:
        sweep.update_trial(index, pruned=True)
        st.tell(trial, state=TrialState.PRUNED)
        return "PRUNED"
    if run is not None and run.state is RunState.COMPLETED and value is not None:
        sweep.update_trial(index, value=value)
        st.tell(trial, value)
        return f"COMPLETED, {sweep.info.metric} {value:.4g}"
    st.tell(trial, state=TrialState.FAIL)
    return run.state.value if run is not None else "did not start"


@dataclass
class Asked:
    """A trial of the study with its sweep index, values and decided run."""

    trial: Any
    index: int
    values: dict[str, str]
    decision: Decision
    again: bool = False  # a trial a dead sweep process left unfinished, run again

    def label(self) -> str:
        return f"trial {self.index} ({_label(self.values)})" + (f", study trial {self.trial.number}" if self.again else "")


def _trials(sweep: Sweep, st: Any, space: Space, say: Announce) -> Iterator[Asked]:
    """The trials to run, in order, until the sweep has its trials (or is cancelled): first those a
    dead sweep process left unfinished (each resumed from its checkpoint), then new ones asked of
    the study. Asked lazily, so a study asked between waves knows the trials told before."""
    from optuna.trial import TrialState

    root = sweep.runs_root
    wanted = int((sweep.info.search or {})["trials"])
    recorded = {t.number for t in sweep.info.trials}
    for left in st.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if left.number not in recorded:  # asked by a process that died before it recorded the trial
            st.tell(left.number, state=TrialState.FAIL)
    for t in list(sweep.info.trials):
        if sweep.cancelled:
            return
        if t.pruned or t.value is not None:
            continue
        run = trial_run(t.run_id, root)
        if run is not None and run.state is RunState.COMPLETED:
            continue
        trial = _again(st, t.number, t.overrides, space)
        d = (decide(resume=run.id, runs_root_dir=root, show_progress=False) if run is not None and run.state.terminal
             else decide(sweep.info.recipe, [*sweep.info.fixed, *(f"{k}={v}" for k, v in t.overrides.items())],
                         runs_root_dir=root, show_progress=False))
        sweep.update_trial(t.index, run_id=d.run_id, number=trial.number)
        yield Asked(trial, t.index, dict(t.overrides), d, again=True)
    while len(sweep.info.trials) < wanted and not sweep.cancelled:
        trial = st.ask()
        values = suggest(trial, space)
        index = sweep.add_trial(values).index
        try:
            d = decide(sweep.info.recipe, [*sweep.info.fixed, *(f"{k}={v}" for k, v in values.items())],
                       runs_root_dir=root, show_progress=False)
        except UserError as exc:
            st.tell(trial, state=TrialState.FAIL)
            sweep.update_trial(index, number=trial.number)
            say(f"trial {index} ({_label(values)}): cannot run: {exc}")
            continue
        sweep.update_trial(index, run_id=d.run_id, number=trial.number)
        yield Asked(trial, index, values, d)


def search(sweep: Sweep, space: Space, start_one: StartOne, say: Announce) -> None:
    """Ask, run and tell, one trial at a time, until the sweep has its trials (or is cancelled)."""
    st = study(sweep)
    for a in _trials(sweep, st, space, say):
        say(f"{a.label()}: " + run_trial(sweep, st, a.trial, a.index, a.decision, start_one))


def search_in_waves(sweep: Sweep, space: Space, wave: int, submit: SubmitWave, say: Announce) -> None:
    """A search on SLURM: ask the study for ``wave`` trials, submit them as one job array, watch
    their eval curves (a pruned trial is stopped through its run's stop file, which the job reads
    on the shared filesystem), wait for all of them, tell the study; then ask for the next wave."""
    st = study(sweep)
    asked = _trials(sweep, st, space, say)
    while not sweep.cancelled:
        batch = list(itertools.islice(asked, wave))
        if not batch:
            return
        watches = [_Watch(a.trial, sweep.runs_root / a.decision.run_id, sweep.info.metric) for a in batch]
        for w in watches:
            w.__enter__()
        try:
            array = submit(sweep, {a.index: a.decision for a in batch})
            say(f"wave of {len(batch)}: SLURM array {array}, trial(s) {', '.join(str(a.index) for a in batch)}")
            runs = [_wait(sweep, a) for a in batch]
        finally:
            for w in watches:
                w.__exit__(None, None, None)
        for a, run, w in zip(batch, runs, watches):
            say(f"{a.label()}: " + tell(sweep, st, a.trial, a.index, run, w.pruned))


def _wait(sweep: Sweep, a: Asked) -> Run | None:
    run = trial_run(a.decision.run_id, sweep.runs_root, ask_backend=False)
    if run is None:
        return None
    job_for(run).wait()
    return run.reload()


def _again(st: Any, number: int | None, overrides: dict[str, str], space: Space) -> Any:
    """The study's trial for a sweep trial being run again: the one left RUNNING by a dead process
    is told FAIL (no process reports to it any more) and the same values asked again as a new
    trial, to which the resumed run reports its whole curve."""
    from optuna.trial import TrialState

    if number is not None and st.trials[number].state is TrialState.RUNNING:
        st.tell(number, state=TrialState.FAIL)
    kinds = {a.key: a.interval is not None for a in space.axes}
    params = dict(st.trials[number].params) if number is not None else {}
    st.enqueue_trial(params or {k: float(v) if kinds.get(k) else v for k, v in overrides.items()})
    trial = st.ask()
    suggest(trial, space)  # the enqueued values, as the study's own parameters
    return trial


def _label(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())
