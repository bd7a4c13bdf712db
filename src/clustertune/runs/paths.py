"""Every file of a run directory, named in one place, and the stop/cancel request protocol.

The run directory is the only contract between the submitting machine and the nodes, so the
names below are shared by both sides: the launcher writes a request file, every rank polls for
it (:mod:`clustertune.train.stop`) and checkpoints before it stops.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

# STOP_FILE, written into the run directory, asks every rank to checkpoint and stop (the batch
# shell's signal trap writes it); removed when a job (re)starts. CANCEL_FILE, written by
# `clustertune cancel` before it asks the scheduler, makes the stop a cancel. A user's own
# script reads them through the stdlib-only helper that names them.
from clustertune.errors import RunError
from clustertune.script import CANCEL_FILE, LIB_DIR, STOP_FILE
RUN_JSON = "run.json"
LOGS_DIR = "logs"
RUN_LOG = "run.log"
# The folder of a run's own files on the nodes (launch.files), named to the ranks in FILES_ENV.
FILES_DIR = "files"
FILES_ENV = "CLUSTERTUNE_FILES"
# A user's own command: launch.prepare's output, and the mark that it succeeded (once per run).
PREPARE_LOG = "prepare.log"
PREPARED_FILE = "prepared"
# A checkpoint's index of its files and their checksums, written last: its presence marks it complete.
CHECKPOINT_INDEX = "state.json"
# What marks a tokenizer directory as complete (save_pretrained writes it last of the configs).
TOKENIZER_MARKER = "tokenizer_config.json"


# A checkpoint directory is ``step-`` and the step, zero-padded: sorted by name, sorted by step.
CHECKPOINT_PREFIX = "step-"


def checkpoint_name(step: int) -> str:
    return f"{CHECKPOINT_PREFIX}{step:08d}"


def checkpoint_step(name: str) -> int | None:
    """The step a checkpoint directory's name stands for; None for any other name."""
    digits = name[len(CHECKPOINT_PREFIX):] if name.startswith(CHECKPOINT_PREFIX) else ""
    return int(digits) if digits.isdigit() else None


# ``RUN@step-N`` names a run's checkpoint wherever a run is named (``step-200``, ``step200``
# and ``step-00000200`` alike).
STEP_RE = re.compile(r"step-?0*(\d+)")


def split_step(ref: str) -> tuple[str, int | None]:
    """``RUN@step-N`` as (RUN, N); anything without an ``@`` as (ref, None). A ``@`` followed
    by anything but a step is an error naming the spelling."""
    run_ref, at, step = ref.rpartition("@")
    if not at or not run_ref:
        return ref, None
    m = STEP_RE.fullmatch(step)
    if m is None:
        raise RunError(f"{ref!r}: after '@' name a checkpoint as step-N (`clustertune runs show {run_ref}` "
                       f"lists them), e.g. {run_ref}@step-200")
    return run_ref, int(m.group(1))


def checkpoint_ref(run: str, step: int) -> str:
    """How users name a run's checkpoint: ``RUN@step-N`` (the run's id or directory)."""
    return f"{run}@step-{step}"


def rank_log_name(rank: int) -> str:
    """One rank's own log inside ``logs/``."""
    return f"rank-{rank}.log"


def node_log_name(node: int | str) -> str:
    """One node's log inside ``logs/`` (``%n`` lets SLURM fill in the node id)."""
    return f"node-{node}.log"


def has_tokenizer(directory: Path) -> bool:
    """Whether ``directory`` holds a saved tokenizer (the run's own copy, a cache entry)."""
    return (directory / TOKENIZER_MARKER).is_file()


@dataclass(frozen=True)
class RunPaths:
    """The layout of ``<runs_root>/<run_id>/``."""

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def recipe(self) -> Path:
        """The resolved recipe, as the nodes read it."""
        return self.root / "recipe.yaml"

    @property
    def run_json(self) -> Path:
        """State machine, attempts, versions, host, command line."""
        return self.root / RUN_JSON

    @property
    def data(self) -> Path:
        """The prepared data this run trains on: fingerprint, prepared directory, manifest."""
        return self.root / "data.json"

    @property
    def files(self) -> Path:
        """``launch.files`` (and reward modules beside the recipe) as the ranks find them, by
        name: ``$CLUSTERTUNE_FILES``, on the ranks' ``sys.path``."""
        return self.root / FILES_DIR

    @property
    def snapshots(self) -> Path:
        """SLURM: copies of the local paths the recipe names, by content digest, where the
        nodes read them (the recipe names these, not the originals)."""
        return self.root / "snapshots"

    @property
    def metrics(self) -> Path:
        """One JSON object per line: train and eval rows."""
        return self.root / "metrics.jsonl"

    @property
    def logs_dir(self) -> Path:
        return self.root / LOGS_DIR

    @property
    def log(self) -> Path:
        """The run's log (progress lines, warnings, failures)."""
        return self.logs_dir / RUN_LOG

    def rank_log(self, rank: int) -> Path:
        return self.logs_dir / rank_log_name(rank)

    def node_log(self, node: int | str) -> Path:
        return self.logs_dir / node_log_name(node)

    def out_of_memory(self, rank: int) -> Path:
        """Written by a rank that ran out of device memory, so the run's failure names it (the
        other ranks only see their collective fail)."""
        return self.logs_dir / f"out-of-memory-rank-{rank}.txt"

    def out_of_memory_reports(self) -> list[Path]:
        return sorted(self.logs_dir.glob("out-of-memory-rank-*.txt")) if self.logs_dir.is_dir() else []

    @property
    def stop_request(self) -> Path:
        """Asks every rank to checkpoint at the next step and stop (see :data:`STOP_FILE`)."""
        return self.root / STOP_FILE

    @property
    def cancel_request(self) -> Path:
        """Says a stop is a cancel: the ranks record CANCELLED (see :data:`CANCEL_FILE`)."""
        return self.root / CANCEL_FILE

    @property
    def command(self) -> Path:
        """A user's own command (``clustertune launch``): its argv, as JSON."""
        return self.root / "command.json"

    @property
    def prepared(self) -> Path:
        """A user's own command: written when ``launch.prepare`` succeeded, so later attempts skip it."""
        return self.root / PREPARED_FILE

    @property
    def prepare_log(self) -> Path:
        """A user's own command: the output of ``launch.prepare``."""
        return self.logs_dir / PREPARE_LOG

    @property
    def launch_section(self) -> Path:
        """A user's own command: the resolved ``launch`` section it runs under."""
        return self.root / "launch.yaml"

    @property
    def script_lib(self) -> Path:
        """A user's own command: the copy of ``clustertune.script`` on its PYTHONPATH."""
        return self.root / LIB_DIR

    @property
    def is_command(self) -> bool:
        """Whether this run is a user's own command rather than a recipe."""
        return self.command.is_file()

    @property
    def has_final_model(self) -> bool:
        """The run wrote its final model: a save_pretrained directory, or an adapter's."""
        return (self.model / "config.json").is_file() or (self.model / "adapter_config.json").is_file()

    @property
    def has_tokenizer(self) -> bool:
        """The run's tokenizer was saved (trained on the spot or copied) before training."""
        return has_tokenizer(self.tokenizer)

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def model(self) -> Path:
        """Final model (save_pretrained) and tokenizer; with model.adapter, the PEFT adapter directory."""
        return self.root / "model"

    @property
    def merged_model(self) -> Path:
        """With model.adapter.save_merged: the base with the adapter merged in (save_pretrained)."""
        return self.root / "model-merged"

    @property
    def tokenizer(self) -> Path:
        """The tokenizer the run uses (trained on the spot or copied), saved before training."""
        return self.root / "tokenizer"

    @property
    def evals(self) -> Path:
        """``clustertune eval`` results, one JSON file each: ``<UTC time>-<what>.json``."""
        return self.root / "evals"

    @property
    def trackers(self) -> Path:
        """TensorBoard/W&B/MLflow output."""
        return self.root / "trackers"

    @property
    def summary(self) -> Path:
        """Final figures: eval metrics, tokens/s, steps, wall time."""
        return self.root / "summary.json"

    @property
    def plot(self) -> Path:
        return self.root / "curves.png"

    @property
    def preflight(self) -> Path:
        """What the checks on the first batches found (passed, warnings), written by rank 0
        before the first step and copied into the attempt's record in run.json."""
        return self.root / "preflight.json"

    @property
    def serve_address(self) -> Path:
        """Where a serving run's server listens (JSON: model, host, port, base_url), written once
        its port is bound; the submitting side waits for it."""
        return self.root / "serve.json"

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / checkpoint_name(step)

    def checkpoint_model(self, step: int) -> Path:
        """The checkpoint of ``step`` written out as a model directory (save_pretrained and
        tokenizer), made once when another run names ``run:<this run>@step-N`` as a model."""
        return self.root / "checkpoint-models" / checkpoint_name(step)

    def checkpoint_dirs(self) -> list[Path]:
        """Every step directory, complete or not, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(p for p in self.checkpoints.iterdir() if p.is_dir() and checkpoint_step(p.name) is not None)

    def checkpoint_list(self) -> str:
        """The complete checkpoints as users name them after ``@`` (``step-3, step-6``), or ``none``."""
        return ", ".join(f"step-{checkpoint_step(p.name)}" for p in self.complete_checkpoints()) or "none"

    def complete_checkpoints(self) -> list[Path]:
        """Checkpoints renamed into place with their index (:data:`CHECKPOINT_INDEX`), oldest
        first. Temporary and half-removed directories are never listed."""
        return [p for p in self.checkpoint_dirs() if (p / CHECKPOINT_INDEX).is_file()]


@dataclass(frozen=True)
class HostRunPaths:
    """The same run directory on an SSH host, as POSIX path strings for remote commands.

    ``root`` is the host's clustertune root; a run's directory sits at ``<root>/train/<run id>``.
    """

    root: str
    run_id: str

    @property
    def run_dir(self) -> str:
        return posixpath.join(self.root, "train", self.run_id)

    def file(self, *parts: str) -> str:
        return posixpath.join(self.run_dir, *parts)

    @property
    def stop_request(self) -> str:
        return self.file(STOP_FILE)

    @property
    def cancel_request(self) -> str:
        return self.file(CANCEL_FILE)

    @property
    def logs_dir(self) -> str:
        return self.file(LOGS_DIR)
