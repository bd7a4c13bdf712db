"""The host layer: SSH clusters (config, transport, cluster), envs, the standard-library helper
that runs on hosts (``runner*.py``), and clusters started on a cloud through SkyPilot. Nothing
here imports torch, and nothing knows of runs or training: remote calls are
:mod:`clustertune.calls`, training on SSH hosts is :mod:`clustertune.launch.ssh`."""
