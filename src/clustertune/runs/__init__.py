"""Runs: directories (every file of a run named once in ``paths.py``), records, the state
machine, lookup, reports. The only writer of run state; imports recipe and below, never the
host layer, models, data, train or anything above."""

from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, list_runs, runs_root

__all__ = ["Run", "RunPaths", "RunState", "get_run", "list_runs", "runs_root"]
