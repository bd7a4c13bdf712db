"""Checkpoints: atomic, self-describing, verified, pruned (written and read as a one-process run
does: save_distributed and load_distributed with its strategy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from clustertune.errors import CheckpointError
from clustertune.runs.paths import RunPaths
from clustertune.train import checkpoint as ckpt
from tests.checkpoint_fixtures import load_one_process, save_one_process


def setup(tmp_path: Path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    sched.step()
    return RunPaths(tmp_path / "run"), model, opt, sched


def test_save_load_restores_everything(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    paths, model, opt, sched = setup(tmp_path)
    meta = {"position": {"epoch": 0, "offset": 8, "samples_seen": 8}}
    d = save_one_process(paths, 5, model, opt, sched, meta, "name: x\n", keep_last=2)
    state = json.loads((d / "state.json").read_text())
    assert state["step"] == 5 and set(state["files"]) == {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng-0.pt", "recipe.yaml"}
    assert (state["strategy"], state["world_size"]) == ("ddp", 1)
    expected_next = torch.rand(3)
    torch.manual_seed(123)  # move the RNG; loading must put it back
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    fopt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    fsched = torch.optim.lr_scheduler.LambdaLR(fopt, lambda s: 1.0 / (s + 1))
    with caplog.at_level("INFO", logger="clustertune"):
        got = load_one_process(d, fresh, fopt, fsched)
    assert got["position"]["offset"] == 8
    # A large checkpoint takes a while to read: the resume said which one and how large first.
    size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6
    assert [r.getMessage() for r in caplog.records] == [
        f"resuming: loading {d.name} ({size:.1f} MB) into the model and optimizer"]
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    assert fopt.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]
    assert fsched.last_epoch == 1
    assert torch.equal(torch.rand(3), expected_next)


def test_corrupt_or_missing_file_is_named(tmp_path: Path) -> None:
    paths, model, opt, sched = setup(tmp_path)
    d = save_one_process(paths, 5, model, opt, sched, {}, "", keep_last=2)
    w = d / "optimizer.pt"
    w.write_bytes(w.read_bytes()[:-3] + b"xyz")
    with pytest.raises(CheckpointError, match=r"checkpoint file .*step-00000005/optimizer.pt is corrupt"):
        ckpt.verify_checkpoint(d)
    w.unlink()
    with pytest.raises(CheckpointError, match="optimizer.pt is missing"):
        ckpt.verify_checkpoint(d)
    (d / "state.json").write_text("{trunc")
    with pytest.raises(CheckpointError, match="state.json is corrupt"):
        ckpt.verify_checkpoint(d)


def test_temp_dirs_are_never_listed_and_old_ones_pruned(tmp_path: Path) -> None:
    paths, model, opt, sched = setup(tmp_path)
    for step in (1, 2, 3):
        save_one_process(paths, step, model, opt, sched, {}, "", keep_last=2)
    (paths.checkpoints / ".tmp-step-00000004-999").mkdir()  # a crash mid-write
    assert [p.name for p in ckpt.list_checkpoints(paths)] == ["step-00000002", "step-00000003"]
    save_one_process(paths, 5, model, opt, sched, {}, "", keep_last=2)
    assert not (paths.checkpoints / ".tmp-step-00000004-999").exists()


class _Payload:
    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.makedirs, (self.marker,))


@pytest.mark.parametrize("name", ["optimizer.pt", "scheduler.pt", "rng-0.pt", "rng.pt"])
def test_a_file_of_ours_that_would_run_code_is_refused_unopened(tmp_path: Path, name: str) -> None:
    # Even signed with the user's own key (a checkpoint they vouched for with
    # --trust-checkpoint), a file of ours that holds more than tensors is never unpickled.
    import hashlib

    from clustertune.runs.sealed import sign_state

    paths, model, opt, sched = setup(tmp_path)
    d = save_one_process(paths, 5, model, opt, sched, {}, "name: x\n", keep_last=2)
    marker = tmp_path / "ran"
    good = ckpt.load_tensors(d / ("rng-0.pt" if name == "rng.pt" else name))
    state = json.loads((d / "state.json").read_text())
    if name == "rng.pt":  # the one RNG file of a checkpoint from before each rank saved its own
        (d / "rng-0.pt").unlink()
        del state["files"]["rng-0.pt"]
    torch.save({**good, "extra": _Payload(marker)}, d / name)
    data = (d / name).read_bytes()
    state["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (d / "state.json").write_text(json.dumps(state))
    sign_state(d, (d / "state.json").read_bytes())
    with pytest.raises(CheckpointError, match="could run code") as err:
        ckpt.verify_checkpoint(d)
    assert str(d / name) in str(err.value)
    with pytest.raises(CheckpointError, match="could run code"):
        load_one_process(d, model, opt, sched)
    assert not marker.exists()


def test_leftovers_of_killed_writes_and_prunes_are_never_listed_and_cleaned_at_the_next_start(tmp_path: Path) -> None:
    paths, model, opt, sched = setup(tmp_path)
    good = save_one_process(paths, 4, model, opt, sched, {}, "name: x\n", keep_last=2)
    (paths.checkpoints / ".tmp-step-00000008").mkdir()  # a write killed before its rename
    (paths.checkpoints / ".tmp-step-00000008" / "optimizer.pt").write_bytes(b"partial")
    half = paths.checkpoints / "step-00000002"  # a removal cut short: state.json already gone
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"partial")
    assert ckpt.list_checkpoints(paths) == [good]
    assert ckpt.clean_stale(paths) == [".tmp-step-00000008", "step-00000002"]
    assert sorted(p.name for p in paths.checkpoints.iterdir()) == [good.name]
    ckpt.verify_checkpoint(good)


def test_gathering_a_sharded_checkpoint_says_so_first_and_gives_the_weights(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """RUN@step-N of an FSDP run reads every rank's shards on one CPU, which takes a while for a
    large run: one line names the checkpoint and its size before the gathering starts."""
    import logging

    import torch.distributed.checkpoint as dcp

    from clustertune.train.gather import gathered_state

    ckpt = tmp_path / "step-00000004"
    weights = {"wte.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4), "ln.bias": torch.ones(4)}
    dcp.save({"model": weights}, checkpoint_id=str(ckpt / "shards"))  # one process: no group needed
    size = sum(p.stat().st_size for p in (ckpt / "shards").rglob("*") if p.is_file()) / 1e6
    with caplog.at_level(logging.INFO, logger="clustertune"):
        got = gathered_state(ckpt)
    # clustertune's own records only: torch's checkpoint logger writes records that name the path.
    assert [r.getMessage() for r in caplog.records if r.name == "clustertune"] == [
        f"checkpoint: gathering the FSDP shards of {ckpt} ({size:.1f} MB) into one set of weights"]
    assert set(got) == set(weights) and all(torch.equal(got[k], weights[k]) for k in weights)
