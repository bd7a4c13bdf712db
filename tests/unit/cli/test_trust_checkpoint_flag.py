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


def test_an_unsigned_checkpoint_of_a_completed_run_is_refused_with_a_fix_that_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Loading a finished run's unsigned checkpoint names the command that signs that very
    checkpoint; `run --resume --trust-checkpoint`, which a finished run cannot take, says the
    same; and that command signs it, after which it loads."""
    import torch

    from clustertune.recipe.load import dump_recipe, load_recipe
    from clustertune.runs.run import Run
    from clustertune.runs.state import RunState
    from clustertune.train import checkpoint as ckpt
    from clustertune.runs.sealed import SIGNATURE
    from tests.checkpoint_fixtures import save_one_process

    root = tmp_path / "runs"
    run = Run.create(root, "tiny", "causal_lm", dump_recipe(load_recipe(TINY_CAUSAL)), ["test"])
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    d = save_one_process(run.paths, 3, model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0), {},
                         "name: x\n", keep_last=2)
    run.start_attempt()
    run.transition(RunState.COMPLETED)
    (d / SIGNATURE).unlink()  # written before checkpoints were signed, or copied without it
    fix = f"clustertune runs trust {run.id}@step-3 --runs-root {root}"

    rc = main(["generate", f"{run.id}@step-3", "hello", "--runs-root", str(root)])
    err = capsys.readouterr().err
    assert rc == 2 and f"checkpoint {d} is not signed" in err and f"`{fix}` signs it with your key" in err, err
    assert "--resume" not in err and "Traceback" not in err

    rc = main(["run", "--resume", run.id, "--trust-checkpoint", "--no-progress", "--runs-root", str(root)])
    err = capsys.readouterr().err
    assert rc == 2 and f"run {run.id} already COMPLETED" in err and f"`clustertune runs trust {run.id}@step-3" in err, err
    assert not (d / SIGNATURE).exists()

    assert main(fix.split()[1:]) == 0
    out = capsys.readouterr().out
    assert f"{d}: signed with your key" in out, out
    assert ckpt.verify_checkpoint(d)["step"] == 3
    assert main(fix.split()[1:]) == 0 and "already signed with your key" in capsys.readouterr().out
