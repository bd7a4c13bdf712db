"""The ``clustertune`` command line: one module per command group; each parses, calls the
library through :mod:`clustertune.api` (or the light modules the layer contract lists: recipe,
runs, tasks, use, remote, calls, doctor), prints. Never imports launch, train, data or models
(an import-linter contract)."""
