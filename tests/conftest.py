"""Shared fixtures: offline hub, a tiny recipe, isolated run roots."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    # Two workers on two cores: torch's default (one compute thread per core in every process,
    # each spinning while it waits) oversubscribes them, and each worker's training runs
    # (and the runs its tests start) took 3-4x their time alone. One thread per process.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import signal  # noqa: E402

# Ctrl-C as at a terminal, for this process and every process the tests start: a suite started
# in the background by a shell without job control inherits SIGINT ignored (and an ignored
# signal stays ignored across exec), so the tests of Ctrl-C and `cancel` would test nothing.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from clustertune import startup  # noqa: E402

# As clustertune's own commands start: collecting imports torch and transformers, made cheaper
# without the collector walking their objects over and over; released once the tests are collected.
startup.hold()

# Re-exported for test modules written against conftest; new ones import tests.helpers.
from tests.helpers import TINY_CAUSAL, TINY_CLS, cli, read_jsonl, tree_snapshot, with_  # noqa: E402, F401


def pytest_collection_finish(session: pytest.Session) -> None:
    startup.release()


@pytest.fixture(scope="session", autouse=True)
def _data_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Prepared data goes to one cache per test session, never the user's ~/.cache."""
    root = tmp_path_factory.mktemp("data-cache")
    os.environ["CLUSTERTUNE_CACHE"] = str(root)
    return root


@pytest.fixture(scope="session", autouse=True)
def _config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client identity key (and the checkpoint key derived from it) of this test session,
    never the user's ~/.config/clustertune; the runs' subprocesses inherit it. The key is one for
    the whole test run, as one user has one on one machine: the quickstart run that one worker
    trains for both (tests/quickstart_fixture.py) has checkpoints a test on the other may load."""
    import shutil

    from clustertune.identity import IDENTITY_FILE, new_identity
    from tests.workers import shared_root

    root = tmp_path_factory.mktemp("ct-config")
    shared = shared_root(tmp_path_factory) / IDENTITY_FILE
    new_identity(shared)  # whichever worker comes first; the other reads it
    shutil.copy2(shared, root / IDENTITY_FILE)
    os.environ["CLUSTERTUNE_CONFIG_DIR"] = str(root)
    return root


@pytest.fixture
def runs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "runs"
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(root))
    return root


# Real services (SLURM, sshd) are started once per test session by modules in tests/services/;
# each module listed here provides its session fixtures.
pytest_plugins: list[str] = ["tests.timing", "tests.leftovers", "tests.workers", "tests.services.slurm", "tests.services.sshd", "tests.services.skypilot_env", "tests.rl_fixtures",
                              "tests.adapter_fixtures", "tests.sft_fixtures", "tests.quickstart_fixture",
                              "tests.services.terminal"]
