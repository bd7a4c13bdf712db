"""``--trust-checkpoint`` only goes with ``--resume``: anywhere else it is refused before
anything runs (exit 2, no run directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clustertune.cli.main import main
from tests.helpers import TINY_CAUSAL


@pytest.mark.parametrize("extra", [[], ["--dry-run"]], ids=["new-run", "dry-run"])
def test_trust_checkpoint_without_resume_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    extra: list[str]) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(TINY_CAUSAL))
    runs = tmp_path / "runs"
    rc = main(["run", str(recipe), "--trust-checkpoint", *extra, "--no-progress", "--runs-root", str(runs)])
    err = capsys.readouterr().err
    assert rc == 2 and "--trust-checkpoint goes with --resume RUN_ID" in err and "Traceback" not in err, err
    assert not runs.exists()
