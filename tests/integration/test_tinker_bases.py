"""The Tinker API's bases named every way a user names them, one of them the session's quickstart
run: a module of its own, so that its one read of that run (trained on the cores' spare time,
tests/background.py) is scheduled late, not in the middle of test_tinker.py's group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_tinker import Running, sdk_env  # noqa: F401 - the module's SDK settings


def test_every_base_spelling_survives_the_sdk(quickstart_cli_run: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, chat_base: Path) -> None:
    """A run id, a run's name, its model directory and a hub name in the local cache each make a
    training client whose tokenizer the SDK loads offline; the four share one base in memory."""
    import shutil

    from huggingface_hub import constants

    from clustertune.runs.store import list_runs

    assert quickstart_cli_run.result.returncode == 0
    run = next(r for r in list_runs(quickstart_cli_run.runs_root) if r.info.name == "quickstart")
    cache = tmp_path / "hub"
    snap = cache / "models--tiny--chat" / "snapshots" / ("c" * 40)
    shutil.copytree(chat_base, snap)
    (cache / "models--tiny--chat" / "refs").mkdir()
    (cache / "models--tiny--chat" / "refs" / "main").write_text("c" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))

    r = Running(runs_root=quickstart_cli_run.runs_root, tinker_dir=tmp_path / "state")
    try:
        sc = r.client()
        ids = []
        for spelling in (run.id, "quickstart", str(run.paths.model), "tiny/chat"):
            tc = sc.create_lora_training_client(base_model=spelling, rank=4).result()
            tok = tc.get_tokenizer()
            assert tok.decode(tok.encode("def main():")) == "def main():", spelling
            assert tc.get_info().model_data.model_name == spelling
            ids.append(tc.model_id)
        assert len(set(ids)) == 4
        assert len(r.server.tinker.bases) == 2  # the run's model once (three spellings), the hub model once
    finally:
        r.stop()
