"""Launching runs: plans (pure data), launchers per backend, and jobs to follow them."""

from clustertune.launch.base import Job, Launcher, job_for, launcher, register

__all__ = ["Job", "Launcher", "job_for", "launcher", "register"]
