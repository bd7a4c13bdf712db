"""Remote functions and objects on SSH clusters (``ct.function``, ``ct.cls``, refs, ``exec``),
each call a run of its own, and what the runs on a cluster need when it starts and stops
(:mod:`clustertune.calls.clusters`). Built on the host layer (:mod:`clustertune.remote`);
imports nothing of launch, api or cli."""
