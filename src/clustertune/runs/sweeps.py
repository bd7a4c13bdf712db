"""A sweep on disk: ``<runs root>/sweeps/<sweep id>/sweep.json`` lists its trials, each an
ordinary run (``run.json`` names the sweep and the trial back); the SLURM array's own log and an
Optuna study's journal live beside it. :class:`Sweep` is the only writer of sweep.json.

A trial's state is its run's: the sweep records only what no run knows (its overrides, which
run it became, and whether the search pruned it).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from clustertune.errors import RunError
from clustertune.fsutil import atomic_write_json
from clustertune.runs.metrics_file import read_metrics
from clustertune.runs.records import _Record
from clustertune.runs.run import Run
from clustertune.runs.store import runs_root

SWEEPS_DIR = "sweeps"
SWEEP_JSON = "sweep.json"
STUDY_FILE = "study.journal"
CANCELLED_FILE = "cancelled"

Mode = Literal["grid", "random", "optuna"]


class TrialRecord(_Record):
    index: int
    overrides: dict[str, str]
    """The swept keys' values (the fixed overrides are the sweep's)."""
    run_id: str | None = None
    """The run it became (unset while its recipe is not yet decided: an Optuna trial asked for)."""
    job_id: str | None = None
    """SLURM: the array task, ``<array job>_<index>``."""
    pruned: bool = False
    """Stopped early by the search from its eval curve (its run is CANCELLED, the trial is not a failure)."""
    value: float | None = None
    """The metric the search was told (Optuna sweeps)."""
    number: int | None = None
    """Optuna sweeps: the study's trial number it ran as last."""


class SweepInfo(_Record):
    id: str
    name: str
    recipe: str
    """The recipe as given: a path made absolute, or a shipped name."""
    fixed: list[str] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)
    space: list[str] = Field(default_factory=list)
    """The sweep's arguments as given (its fixed and swept keys): a search asks its values from them."""
    mode: Mode = "grid"
    backend: str = "local"
    metric: str = "eval_loss"
    direction: Literal["min", "max"] = "min"
    created_at: str = ""
    max_concurrent: int | None = None
    array_job: str | None = None
    search: dict[str, Any] | None = None
    """Optuna: trials asked for, the pruner, the seed."""
    trials: list[TrialRecord] = Field(default_factory=list)


def sweeps_root(root: str | os.PathLike[str] | None = None) -> Path:
    return runs_root(root) / SWEEPS_DIR


def new_sweep_id(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:40] or "sweep"
    return f"{safe}-sweep-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


@dataclass
class Sweep:
    dir: Path
    info: SweepInfo

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def runs_root(self) -> Path:
        """The runs root its trials' run directories are in."""
        return self.dir.parent.parent

    @property
    def json_path(self) -> Path:
        return self.dir / SWEEP_JSON

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def study_path(self) -> Path:
        return self.dir / STUDY_FILE

    @property
    def cancelled(self) -> bool:
        """``cancel ID`` asked every trial to end: a sweep process starts no further trial. A file of
        its own, so the process that runs the trials (and writes sweep.json) never overwrites it."""
        return (self.dir / CANCELLED_FILE).is_file()

    def mark_cancelled(self) -> None:
        (self.dir / CANCELLED_FILE).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()), encoding="utf-8")

    def clear_cancelled(self) -> None:
        (self.dir / CANCELLED_FILE).unlink(missing_ok=True)

    @classmethod
    def create(cls, root: str | os.PathLike[str] | None, info: SweepInfo) -> Sweep:
        d = sweeps_root(root) / info.id
        d.mkdir(parents=True)
        (d / "logs").mkdir()
        info.created_at = info.created_at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sweep = cls(d, info)
        sweep.save()
        return sweep

    @classmethod
    def load(cls, d: Path) -> Sweep:
        try:
            data = json.loads((d / SWEEP_JSON).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RunError(f"sweep directory {d} has no readable {SWEEP_JSON} ({exc})") from None
        return cls(d, SweepInfo.model_validate(data))

    def save(self) -> None:
        atomic_write_json(self.json_path, self.info.to_json())

    def trial(self, index: int) -> TrialRecord:
        for t in self.info.trials:
            if t.index == index:
                return t
        raise RunError(f"sweep {self.id} has no trial {index}")

    def update_trial(self, index: int, **fields: Any) -> None:
        t = self.trial(index)
        for k, v in fields.items():
            setattr(t, k, v)
        self.save()

    def add_trial(self, overrides: dict[str, str]) -> TrialRecord:
        t = TrialRecord(index=len(self.info.trials), overrides=overrides)
        self.info.trials.append(t)
        self.save()
        return t


def list_sweeps(root: str | os.PathLike[str] | None = None) -> list[Sweep]:
    base = sweeps_root(root)
    if not base.is_dir():
        return []
    out = []
    for d in sorted(base.iterdir()):
        if (d / SWEEP_JSON).is_file():
            try:
                out.append(Sweep.load(d))
            except (RunError, ValueError):
                continue
    out.sort(key=lambda s: s.info.created_at)
    return out


def get_sweep(sweep_id: str, root: str | os.PathLike[str] | None = None) -> Sweep:
    """The sweep ``sweep_id`` names: its id, a unique prefix of one, or ``last``."""
    found = list_sweeps(root)
    if sweep_id == "last" and found:
        return found[-1]
    exact = [s for s in found if s.id == sweep_id]
    matches = exact or [s for s in found if s.id.startswith(sweep_id)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        known = ", ".join(s.id for s in found[-5:]) or "none yet"
        raise RunError(f"no sweep {sweep_id!r} under {sweeps_root(root)} (newest: {known}); `clustertune sweeps` lists them")
    raise RunError(f"{sweep_id!r} names {len(matches)} sweeps ({', '.join(s.id for s in matches)}); give more of the id")


def is_sweep_id(text: str, root: str | os.PathLike[str] | None = None) -> bool:
    return (sweeps_root(root) / text / SWEEP_JSON).is_file()


def metric_values(run: Run, metric: str) -> list[float]:
    return [float(r[metric]) for r in read_metrics(run.paths.metrics) if r.get("kind") == "eval" and metric in r]


def trial_metric(run: Run, metric: str) -> float | None:
    """The trial's result: its summary's final evaluation, else its last evaluation so far."""
    final = (run.summary.get("final_eval") or {}) if run.paths.summary.is_file() else {}
    if metric in final and final[metric] is not None:
        return float(final[metric])
    values = metric_values(run, metric)
    return values[-1] if values else None
