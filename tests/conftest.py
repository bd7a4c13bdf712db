"""Shared fixtures: offline hub, a tiny recipe, isolated run roots."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import copy  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

TINY_CAUSAL: dict[str, Any] = {
    "name": "tiny",
    "task": "causal_lm",
    "model": {
        "config": "gpt2",
        "config_overrides": {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 64},
        "tokenizer": "train",
        "tokenizer_vocab_size": 512,
    },
    "data": {"dataset": "builtin:pydoc", "block_size": 64, "max_eval_samples": 32},
    "train": {"batch_size": 8, "lr": 3e-3, "max_steps": 12, "log_every": 4, "eval_at_start": True,
              "warmup_steps": 2, "lr_scheduler": "cosine", "cpu_threads": 1},
}

TINY_CLS: dict[str, Any] = {
    "name": "tinycls",
    "task": "sequence_classification",
    "model": {
        "config": "bert",
        "config_overrides": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                             "intermediate_size": 128, "max_position_embeddings": 64},
        "tokenizer": "train",
        "tokenizer_vocab_size": 512,
        "num_labels": 2,
    },
    "data": {"dataset": "builtin:pydoc-kinds", "max_length": 32, "validation_fraction": 0.1},
    "train": {"batch_size": 16, "lr": 2e-3, "max_steps": 12, "log_every": 4, "cpu_threads": 1},
}


def with_(base: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with some keys of some sections replaced."""
    out = copy.deepcopy(base)
    for sec, values in sections.items():
        if isinstance(values, dict):
            out.setdefault(sec, {}).update(values)
        else:
            out[sec] = values
    return out


@pytest.fixture(scope="session", autouse=True)
def _data_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Prepared data goes to one cache per test session, never the user's ~/.cache."""
    root = tmp_path_factory.mktemp("data-cache")
    os.environ["CLUSTERTUNE_CACHE"] = str(root)
    return root


@pytest.fixture
def runs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "runs"
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(root))
    return root


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `clustertune` console entry point in a fresh process."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    exe = Path(sys.executable).with_name("clustertune")
    return subprocess.run([str(exe), *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (to prove nothing changed)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# Real services (SLURM, sshd) are started once per test session by modules in tests/services/;
# each module listed here provides its session fixtures.
pytest_plugins: list[str] = ["tests.services.slurm", "tests.services.sshd", "tests.rl_fixtures", "tests.adapter_fixtures",
                             "tests.sft_fixtures", "tests.quickstart_fixture"]
