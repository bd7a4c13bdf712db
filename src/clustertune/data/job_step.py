"""The data step of a scheduled job: ``python -m clustertune.data.job_step RUN_DIR``.

On SLURM the data is prepared inside the job, as its first step (one task, on the shared
filesystem), not on the login node and never once per rank. The step reads the run's resolved
recipe, prepares (a cache hit when this data was prepared before, by any run) and records the
result in the run directory (``data.json`` and ``tokenizer/``), which every rank then reads.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from clustertune import startup

if __name__ == "__main__":
    startup.hold()  # imports the tokenizer's libraries; a step past a minute gets it back from the timer

from clustertune.data.run_data import data_step, holds_data  # noqa: E402
from clustertune.errors import UserError  # noqa: E402
from clustertune.process_exit import exit_now  # noqa: E402
from clustertune.recipe.load import load_recipe  # noqa: E402
from clustertune.runs.paths import RunPaths  # noqa: E402
from clustertune.runs.run import Run  # noqa: E402
from clustertune.runs.state import RunState  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m clustertune.data.job_step RUN_DIR", file=sys.stderr)
        return 2
    paths = RunPaths(Path(args[0]).resolve())
    t0 = time.perf_counter()
    try:
        recipe = load_recipe(paths.recipe)
        held = holds_data(paths)
        prepared = data_step(recipe, paths)
    except UserError as exc:
        print(f"data step failed: {exc}", file=sys.stderr, flush=True)
        _record_failure(paths, f"data step: {exc}")
        return 2
    if prepared is None:
        print("data: kept from the run's first attempt" if held else
              "data: nothing to prepare (RL trainers load their own prompts)", flush=True)
        return 0
    how = "cache hit" if prepared.hit else "prepared"
    print(f"data {prepared.fingerprint}: {how} in {time.perf_counter() - t0:.1f}s ({prepared.dir})", flush=True)
    return 0


def _record_failure(paths: RunPaths, reason: str) -> None:
    """Put the reason where `clustertune status` shows it (the job itself only has an exit code)."""
    try:
        run = Run.load(paths.root)
        if not run.state.terminal:
            run.transition(RunState.FAILED, reason=reason)
    except (OSError, ValueError, UserError):
        pass  # the log line above still says why


if __name__ == "__main__":
    exit_now(main())  # without the interpreter's teardown (clustertune/process_exit.py)
