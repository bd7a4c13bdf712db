"""The typed records a run directory keeps: ``run.json`` as :class:`RunInfo` with its list of
:class:`Attempt`, and ``data.json`` as :class:`DataRef`.

Keys that a newer clustertune adds, and keys written by an older one that are no longer named
here, are kept as they are (``extra="allow"``) and written back unchanged, so a run directory
moves between versions without losing anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clustertune.runs.state import RunState


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", validate_assignment=True)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, without the optional keys that were never set (as run.json always was)."""
        return self.model_dump(mode="json", exclude_none=True, exclude_unset=False) | self._kept_nones()

    def _kept_nones(self) -> dict[str, Any]:
        return {}


class Attempt(_Record):
    """One start of a run: the first launch, a requeue, a restart, a ``--resume``."""

    n: int
    backend: str = "local"
    job_id: str | None = None
    """The backend's handle: a pid (local), a SLURM job id, ``key@host:pid,...`` (SSH)."""
    host: str = ""
    """The host of the process that opened the attempt."""
    pid: int | None = None
    started_at: str
    ended_at: str | None = None
    """Unset while the attempt runs."""
    state: RunState
    argv: list[str] = Field(default_factory=list)
    resumed_from: str | None = None
    """The checkpoint directory name it continued from."""
    reason: str | None = None
    traceback: str | None = None
    torchrun_pid: int | None = None
    """Local runs: torchrun's process group, so a cancel reaches the ranks."""
    exit_code: int | None = None
    """A user's own command: how it exited (under torchrun: the first failed rank's code)."""
    job_name: str | None = None
    """SLURM: the job's name as ``squeue`` shows it (``launch.job_name``)."""
    precision: str | None = None
    """What the attempt computed in (fp32, bf16 or fp16): ``train.precision`` with ``auto``
    resolved on the attempt's devices. Set when the attempt ends from its training."""
    fp8: bool | None = None
    """True where its linear layers multiplied in FP8 (``train.fp8``); unset otherwise."""
    model: dict[str, Any] | None = None
    """The pretrained model the attempt started from: ``name_or_path``, the ``revision`` asked
    for, the ``commit`` of a hub model's snapshot it read, ``trust_remote_code``."""
    preflight: dict[str, Any] | None = None
    """The checks on the first batches (``train.preflight``): the names of those that passed,
    and warnings. Set on the attempt that started the run from step 0."""

    @property
    def open(self) -> bool:
        return self.ended_at is None

    def _kept_nones(self) -> dict[str, Any]:
        return {"ended_at": None} if self.ended_at is None else {}


class RunInfo(_Record):
    """``run.json``: what the run is, where it came from, its state and its attempts."""

    id: str
    name: str = ""
    task: str = "?"
    state: RunState
    created_at: str = ""
    updated_at: str | None = None
    host: str = ""
    command: list[str] = Field(default_factory=list)
    cwd: str = ""
    git_commit: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    backend: str = "local"
    """The launcher that runs it (a key of ``launch.base.BACKENDS``)."""
    attempts: list[Attempt] = Field(default_factory=list)
    reason: str | None = None
    """Why it ended as it did (failed, stopped, cancelled); unset while it runs or once done."""
    remote: dict[str, Any] | None = None
    """SSH runs and remote calls: the cluster, its hosts as they were, which of them run it."""
    files: list[dict[str, Any]] = Field(default_factory=list)
    """The local paths the recipe named, as first launched: key, path on the submitting machine,
    content digest and size, and how the nodes get it (``clustertune.launch.files``)."""
    sweep: dict[str, Any] | None = None
    """A sweep's trial: the sweep's id, the trial's index and its swept values (``clustertune.runs.sweeps``)."""

    def _kept_nones(self) -> dict[str, Any]:
        return {"git_commit": None} if self.git_commit is None else {}

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        out["attempts"] = [a.to_json() for a in self.attempts]
        if not self.files:
            out.pop("files", None)  # most runs name no local file: run.json stays as it was
        return out


class DataRef(_Record):
    """``data.json``: the prepared data a run trains on (what the nodes read, never raw data)."""

    fingerprint: str
    dir: str
    """The prepared directory (on an SSH host: the host's own copy)."""
    manifest: str
    manifest_sha256: str
    total_bytes: int
    task: str | None = None
    splits: dict[str, Any] = Field(default_factory=dict)
    """Per split: examples and tokens."""
    labels: dict[str, Any] | None = None
    """Classification: ``num_labels`` and the class ``names`` (None for integer labels)."""
