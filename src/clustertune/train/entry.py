"""The node side's command: ``python -m clustertune.train.entry RUN_DIR``, one process per rank
(torchrun starts them; the launcher's plan names this module). Each rank runs one attempt of the
run (:func:`clustertune.train.attempt.run_attempt`); the topology comes from the environment,
everything else from the run directory. The process then ends through
:func:`~clustertune.train.attempt.exit_rank` (the reason is there).
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from clustertune import startup

if __name__ == "__main__":
    startup.hold()  # before torch and transformers are imported below; the loop releases it

from clustertune.errors import UserError  # noqa: E402
from clustertune.recipe.load import load_recipe  # noqa: E402
from clustertune.runs.paths import RunPaths  # noqa: E402
from clustertune.runs.topology import Topology  # noqa: E402
from clustertune.train.attempt import Placement, exit_rank, run_attempt  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m clustertune.train.entry RUN_DIR", file=sys.stderr)
        return 2
    paths = RunPaths(Path(args[0]).resolve())
    recipe = load_recipe(paths.recipe)
    minutes = recipe.launch.watchdog_minutes
    # show_progress: rank 0's step, eval and checkpoint lines go to its stderr (the node's log,
    # which `clustertune logs --follow` and the launcher's terminal show) and to run.log, as lines.
    where = Placement(topology=Topology.from_env(os.environ), launched=True, show_progress=True,
                      watchdog_seconds=minutes * 60 if minutes else None)
    try:
        run_attempt(recipe, paths, where)
    except (UserError, KeyboardInterrupt):
        return 1  # recorded in run.json and this rank's log: no traceback on top
    except BaseException:
        traceback.print_exc()  # torchrun's summary and the rank's log show where it failed
        return 1
    return 0


if __name__ == "__main__":
    exit_rank(main())
