"""Typed errors for everything a user can get wrong.

Every user-facing failure is a :class:`UserError`: the CLI prints its message (no traceback
unless ``--debug``) and exits with code 2. Anything else escaping is a bug in clustertune.
"""

from __future__ import annotations

from dataclasses import dataclass


class UserError(Exception):
    """A problem with the user's input: recipe, paths, data, run ids. Exit code 2."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a recipe: where (file, key path, line) and what, with a fix."""

    key: str
    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None

    def render(self) -> str:
        where = self.file or "<recipe>"
        if self.line is not None:
            where += f":{self.line}"
        text = f"{where}: {self.key or '<top level>'}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class RecipeError(UserError):
    """One or more problems in a recipe, reported all at once."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        # The recipe without the values these problems are about, when the rest is valid: later
        # checks (the preflight) can report their problems together with these.
        self.partial: object | None = None
        n = len(self.problems)
        head = f"recipe has {n} problem{'s' if n != 1 else ''}:"
        super().__init__("\n".join([head] + ["  - " + p.render() for p in self.problems]))


class RecipeNotFound(UserError):
    """A recipe name or path that is neither a file nor a shipped recipe."""


class UnknownKey(UserError):
    """A recipe key the schema does not have (``clustertune schema KEY``); names the closest ones."""


class StarterError(UserError):
    """``clustertune init``: a task without a starter recipe, or a file that is already there."""


class DataError(UserError):
    """Missing data files, columns, bad labels, unreachable datasets."""


class ModelError(UserError):
    """A model or tokenizer that cannot be found or does not fit the recipe."""


class GenerationError(UserError):
    """A sampling setting, prompt or prompts file that generation cannot use; names the flag or line."""


class RunError(UserError):
    """Unknown run ids, runs that cannot be resumed."""


class CheckpointError(UserError):
    """A checkpoint that is incomplete or corrupt; names the file."""


class DivergedError(UserError):
    """Training produced a non-finite loss or gradient norm; names the step and the likely cause."""


class OptimizerError(UserError):
    """``train.optimizer`` cannot be built here (bitsandbytes missing, a GPU-only optimizer on the CPU)."""


class TrackingError(UserError):
    """A tracker that was asked for but is not installed."""


class LaunchError(UserError):
    """A job that cannot be launched as asked: too many processes, no sbatch, a rejected job."""


class ClusterError(UserError):
    """An SSH cluster that is unknown, misconfigured or cannot be reached; names the host and the fix."""


class HostKeyError(ClusterError):
    """A host whose SSH host key is unknown or changed: refused, with how to accept it."""


class EnvError(ClusterError):
    """An environment that cannot be built on a host (pip's error is included)."""


class RemoteCallError(ClusterError):
    """A remote call that cannot be started, found or trusted (unknown run key, foreign result)."""


class RewardError(UserError):
    """A reward function or reward model that cannot be loaded or gives unusable scores."""


class DiskFullError(UserError):
    """A write failed for want of space (or quota): the run fails with this one message; what
    was written before (earlier checkpoints) stays intact. Exit code 1, like any failed run."""

    exit_code = 1


class MetricError(UserError):
    """An evaluation metric that cannot be imported or returns something that is not a number."""


class EvalError(UserError):
    """An evaluation that cannot run as asked: an unknown task, a missing task directory, a missing extra."""
