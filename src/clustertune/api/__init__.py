"""The one door: starting, resuming, dry-running, validating and following runs, for Python
callers and the CLI alike (the CLI parses, calls this, prints; an import-linter contract keeps it
from reaching past).

>>> import clustertune as ct
>>> recipe = ct.load_recipe("quickstart", ["train.max_steps=20"])
>>> run = ct.run(recipe)
>>> run.state, run.paths.model

Each part is a module: runs (:mod:`clustertune.api.runs`: decide, describe, start, validate),
following them (:mod:`~clustertune.api.jobs`: job, state, logs, trust, remove), data (:mod:`~clustertune.api.data`: prepare, cache, stage, fetch), estimates and
benchmarks (:mod:`~clustertune.api.perf`), serving (:mod:`~clustertune.api.serving`) and the
cluster commands (:mod:`~clustertune.api.clusters`), and sweeps (:mod:`~clustertune.api.sweeps`). ``api.NAME`` loads the module behind NAME
on first use (:mod:`clustertune.lazy`), so importing this package (the CLI's start-up does) loads
none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clustertune.lazy import exports

if TYPE_CHECKING:
    from clustertune.api import cluster_check, cluster_show, clusters, data, perf, preflight, serving, sweeps, tinker_proxy
    from clustertune.train.bench_names import bench_variants
    from clustertune.api.runs import (decide, decide_command, describe, devices_of, dry_run, follow, job,
                                      kept_result_lines, launch_command, refreshed, remove_runs, run, start,
                                      trust_checkpoint, validate, validate_on, with_base)

_RUNS = ("decide", "decide_command", "describe", "start", "run", "launch_command", "dry_run", "validate",
         "validate_on", "with_base", "devices_of")
_JOBS = ("remove_runs", "trust_checkpoint", "job", "refreshed", "follow", "kept_result_lines")
_MODULES = ("runs", "jobs", "data", "perf", "preflight", "serving", "tinker_proxy", "clusters", "sweeps",
            "cluster_check", "cluster_show")

__getattr__, __dir__ = exports(__name__, {**{name: f"{__name__}.runs" for name in _RUNS},
                                          **{name: f"{__name__}.jobs" for name in _JOBS},
                                          **{name: f"{__name__}.{name}" for name in _MODULES},
                                          "bench_variants": "clustertune.train.bench_names"})

# Written out (not built from the tuples above) so that tools that read it statically see it.
__all__ = ["decide", "decide_command", "describe", "start", "run", "launch_command", "dry_run", "validate",
           "validate_on", "with_base", "devices_of", "remove_runs", "trust_checkpoint", "job", "refreshed", "follow",
           "kept_result_lines", "bench_variants", "runs", "jobs", "data", "perf", "preflight", "serving", "tinker_proxy", "clusters", "sweeps",
           "cluster_check", "cluster_show"]
