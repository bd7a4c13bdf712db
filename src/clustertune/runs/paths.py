"""Every file of a run directory, named in one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
        return self.root / "run.json"

    @property
    def data(self) -> Path:
        """The prepared data this run trains on: fingerprint, prepared directory, manifest."""
        return self.root / "data.json"

    @property
    def metrics(self) -> Path:
        """One JSON object per line: train and eval rows."""
        return self.root / "metrics.jsonl"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def log(self) -> Path:
        """The run's log (progress lines, warnings, failures)."""
        return self.logs_dir / "run.log"

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

    def checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step-{step:08d}"
