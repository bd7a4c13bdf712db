"""Runs: directories, state machine, lookup."""

from clustertune.runs.paths import RunPaths
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from clustertune.runs.store import get_run, list_runs, runs_root

__all__ = ["Run", "RunPaths", "RunState", "get_run", "list_runs", "runs_root"]
