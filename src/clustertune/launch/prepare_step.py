"""``launch.prepare`` on this host (the local backend): the user's own preparing command, run
once per run before the command's ranks start, so that the ranks' ``launch.stage`` copies find
its output. On SLURM the batch script runs it as a one-task step on the first node
(:mod:`clustertune.launch.sbatch`); both mark success with the same file in the run directory.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TextIO

from clustertune.launch.plan import LaunchPlan
from clustertune.runs.paths import LOGS_DIR, PREPARE_LOG, RunPaths


def run_prepare(plan: LaunchPlan, paths: RunPaths, env: dict[str, str], show: TextIO | None = sys.stdout) -> int:
    """Runs ``plan.prepare`` here, in the current directory with ``env``, unless an earlier
    attempt of the run did (``paths.prepared``). Its output goes to ``logs/prepare.log`` and, as
    it comes, to ``show``; a failure adds a line naming its exit code to node 0's log, which the
    run's failure then quotes. Returns the exit code (0: done, or done before)."""
    if not plan.prepare or paths.prepared.is_file():
        return 0
    paths.logs_dir.mkdir(parents=True, exist_ok=True)
    with paths.prepare_log.open("ab") as log:

        def say(data: bytes) -> None:
            log.write(data)
            log.flush()
            if show is not None:
                show.write(data.decode(errors="replace"))
                show.flush()

        try:
            proc = subprocess.Popen(list(plan.prepare), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        except OSError as exc:
            rc = 126 if isinstance(exc, PermissionError) else 127
            say(f"clustertune: cannot start launch.prepare {plan.prepare[0]!r}: {exc.strerror or exc}\n".encode())
        else:
            assert proc.stdout is not None
            for line in iter(proc.stdout.readline, b""):
                say(line)
            rc = proc.wait()
    if rc != 0:
        with paths.node_log(0).open("ab") as node:
            node.write(f"clustertune: launch.prepare failed with code {rc} ({LOGS_DIR}/{PREPARE_LOG}); "
                       "the command did not start\n".encode())
        return rc
    paths.prepared.touch()
    return 0
