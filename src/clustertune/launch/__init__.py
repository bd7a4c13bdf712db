"""Launching runs: plans (pure data), launchers per backend, and jobs to follow them. Owns the
backends (``inprocess``, ``local``, ``slurm``, ``ssh/``) and their registry; imports no torch
(a test imports every module with torch blocked) and nothing of api or cli."""

from clustertune.launch.backends import job_for, launcher, register
from clustertune.launch.base import Job, Launcher

__all__ = ["Job", "Launcher", "job_for", "launcher", "register"]
