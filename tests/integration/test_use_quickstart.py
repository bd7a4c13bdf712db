"""What a new user does after the README's first command: generate from the quickstart run by
its id (a plain causal LM: prompts go as they are), and `chat`, refused for a model without a
chat template until one is named. Shares the session's one quickstart run."""

from __future__ import annotations

import pytest

from clustertune.cli.main import main
from clustertune.runs.store import list_runs
from tests.quickstart_fixture import QuickstartRun


@pytest.mark.slow
def test_generate_and_chat_from_the_quickstart_run(quickstart_cli_run: QuickstartRun,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert quickstart_cli_run.result.returncode == 0, quickstart_cli_run.result.stderr[-2000:]
    root = str(quickstart_cli_run.runs_root)
    run_id = list_runs(root)[0].id
    args = ["--runs-root", root, "--max-new-tokens", "12", "--device", "cpu"]
    assert main(["generate", run_id[:12], "The for statement", "--seed", "5", *args]) == 0
    first = capsys.readouterr().out
    assert main(["generate", run_id[:12], "The for statement", "--seed", "5", *args]) == 0
    assert capsys.readouterr().out == first and first.strip()
    assert main(["chat", run_id[:12], *args]) == 2
    err = capsys.readouterr().err
    assert f"run {run_id} has no chat template" in err and "clustertune generate" in err and "--template" in err


@pytest.mark.slow
def test_a_checkpoint_is_named_run_at_step_n_by_generate_and_export(
        quickstart_cli_run: QuickstartRun, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch
    from safetensors.torch import load_file

    from clustertune.errors import RunError
    from clustertune.use.load import find_target, load_for_use

    root = str(quickstart_cli_run.runs_root)
    run = list_runs(root)[0]
    steps = [int(p.name.split("-")[1]) for p in run.paths.complete_checkpoints()]
    assert len(steps) >= 2, steps  # the quickstart keeps its last checkpoints
    newest = load_for_use(f"{run.id[:12]}@step-{steps[-1]}", runs_root=root, device="cpu", dtype="fp32")
    assert newest.target.label == f"run {run.id}@step-{steps[-1]}"
    saved = load_file(str(run.paths.checkpoint(steps[-1]) / "model.safetensors"))
    state = newest.model.state_dict()
    assert saved and all(torch.equal(state[k], v) for k, v in saved.items())  # the checkpoint's weights, loaded
    earlier = load_for_use(f"{run.id}@step-{steps[0]}", runs_root=root, device="cpu", dtype="fp32")
    assert not torch.equal(earlier.model.get_input_embeddings().weight, newest.model.get_input_embeddings().weight)
    # What a tired user types: a step it does not have, a word for a step.
    with pytest.raises(RunError, match=rf"has no complete checkpoint of step 7 \(its checkpoints: .*step-{steps[-1]}\)"):
        find_target(f"{run.id}@step-7", root)
    with pytest.raises(RunError, match=r"after '@' name a checkpoint as step-N"):
        find_target(f"{run.id}@last", root)
    # The same words through the commands: generate from the checkpoint, and export it.
    args = ["--runs-root", root, "--max-new-tokens", "8", "--device", "cpu", "--temperature", "0"]
    assert main(["generate", f"{run.id}@step-{steps[0]}", "The for statement", *args]) == 0
    assert main(["generate", f"{run.id}@step-{steps[-1]}", "The for statement", *args]) == 0
    assert capsys.readouterr().out.strip()
    out = tmp_path / "exported"
    assert main(["export", f"{run.id}@step-{steps[-1]}", "--to", str(out), "--runs-root", root]) == 0
    exported = load_file(str(out / "model.safetensors"))
    assert exported and all(torch.equal(exported[k], saved[k]) for k in exported if k in saved)


@pytest.mark.slow
def test_prepare_and_estimate_memory_of_the_sft_demo_find_its_base_run(quickstart_cli_run: QuickstartRun) -> None:
    """sft-demo's base is `run:quickstart`: once that run exists, the commands that read a recipe
    before any training resolve it as `run` does."""
    from tests.helpers import cli

    env = {"CLUSTERTUNE_RUNS": str(quickstart_cli_run.runs_root)}
    prepared = cli("prepare", "sft-demo", env=env)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    assert "trained tokens, packed" in prepared.stdout + prepared.stderr
    memory = cli("estimate-memory", "sft-demo", env=env)
    assert memory.returncode == 0, memory.stdout + memory.stderr
    assert "zero3+offload" in memory.stdout and "4.2" in memory.stdout  # the base run's 4.2M parameters, read from its model
