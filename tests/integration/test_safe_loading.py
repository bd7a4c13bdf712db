"""Nothing in a checkpoint runs code when it is loaded: a ``__reduce__`` payload planted in a
real checkpoint (with state.json's checksums recomputed, as anyone who can write the files can)
is refused by ``--resume`` with a typed error before anything changes, and never runs.

Two guards: the checkpoint's signature (state.sig, the user's key over state.json), checked
before any file is opened, for every strategy, including the files libraries pickle by design
(DCP's ``.metadata`` under FSDP, DeepSpeed's state files, an RL trainer's files); and, for the
files of ours, ``weights_only`` loading, which holds even for a checkpoint the user vouched for."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from clustertune.errors import CheckpointError
from clustertune.train.loop import KILL_AT_STEP_ENV
from clustertune.runs.sealed import SIGNATURE
from tests.helpers import TINY_CAUSAL, cli, with_

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

RECIPE = with_(TINY_CAUSAL, train={"max_steps": 4, "save_every": 2, "log_every": 2, "eval_at_start": False})


class Payload:
    """Creates ``marker`` when unpickled by a loader that runs what a pickle asks for."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def plant(ckpt: Path, name: str, marker: Path) -> Path:
    """Replace ``ckpt/name`` with a pickle that carries a payload, and fix state.json to match."""
    target = ckpt / name
    good = torch.load(target, map_location="cpu", weights_only=True)
    torch.save({**good, "extra": Payload(marker)}, target)
    state_file = ckpt / "state.json"
    state = json.loads(state_file.read_text())
    data = target.read_bytes()
    state["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    return target


def killed_run(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A one-process run killed at step 3: its runs root, its directory, its checkpoint of step 2."""
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(yaml.safe_dump(RECIPE))
    root = tmp_path / "runs"
    killed = cli("run", str(recipe_file), "--no-progress", "--runs-root", str(root), env={KILL_AT_STEP_ENV: "3"})
    assert killed.returncode != 0
    (run_dir,) = [p for p in root.iterdir() if (p / "run.json").is_file()]
    (last,) = (run_dir / "checkpoints").glob("step-*")
    return root, run_dir, last


def test_resume_refuses_a_checkpoint_whose_optimizer_state_carries_code(tmp_path: Path) -> None:
    root, run_dir, last = killed_run(tmp_path)
    assert cli("status", run_dir.name, "--runs-root", str(root)).returncode == 0  # the dead pid is noticed

    marker = tmp_path / "payload-ran"
    planted = plant(last, "optimizer.pt", marker)
    before = (run_dir / "run.json").read_bytes()
    out = cli("run", "--resume", run_dir.name, "--no-progress", "--runs-root", str(root))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"checkpoint {last} was changed after it was signed" in out.stderr and "Traceback" not in out.stderr
    assert f"clustertune run --resume {run_dir.name} --trust-checkpoint" in out.stderr
    assert not marker.exists()
    assert (run_dir / "run.json").read_bytes() == before  # refused before anything changed

    # Vouched for (signed with the user's key), a file of ours that carries code is still never unpickled.
    import clustertune as ct

    with pytest.raises(CheckpointError, match="could run code") as err:
        ct.run(resume=run_dir.name, runs_root_dir=root, show_progress=False, trust_checkpoint=True)
    assert str(planted) in str(err.value) and (last / SIGNATURE).is_file() and not marker.exists()

    # The payload is real: the loader that used to read these files runs it.
    torch.load(planted, map_location="cpu", weights_only=False)
    assert marker.is_dir()


def test_a_multi_rank_resume_checks_every_file_before_anything_changes(tmp_path: Path) -> None:
    # As a one-process resume does: a file changed after sealing stops the launcher before any
    # rank starts, with state.json left as it was (an attacker who can rewrite state.json
    # cannot sign it: that is the case above).
    root, run_dir, last = killed_run(tmp_path)
    weights = last / "model.safetensors"
    with weights.open("r+b") as fh:  # one byte of the weights flipped, its size unchanged
        fh.seek(-1, os.SEEK_END)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert cli("status", run_dir.name, "--runs-root", str(root)).returncode == 0  # the dead pid is noticed
    before = (run_dir / "run.json").read_bytes()
    out = cli("run", "--resume", run_dir.name, "launch.procs_per_node=2", "--no-progress", "--runs-root", str(root))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"checkpoint file {weights} is corrupt" in out.stderr and "Traceback" not in out.stderr
    assert (run_dir / "run.json").read_bytes() == before  # no attempt opened, no state moved
    assert not (run_dir / "logs" / "launcher.log").exists()  # torchrun never started


# -- the files libraries pickle by design: ddp, fsdp, deepspeed and an RL run -------------------

SHORT = {"max_steps": 2, "save_every": 1, "log_every": 1, "eval_at_start": False}
SMALL_EVAL = {**TINY_CAUSAL["data"], "max_eval_samples": 8}
# strategy -> (the train section, the file of its checkpoint the payload goes into, how it is read)
STRATEGY_CASES: dict[str, tuple[dict, str]] = {
    "ddp": ({**SHORT}, "optimizer.pt"),  # ours: weights_only as well
    "fsdp": ({**SHORT, "strategy": "fsdp"}, "shards/.metadata"),  # torch.distributed.checkpoint: pickle.load
    "zero2": ({**SHORT, "strategy": "deepspeed", "zero_stage": 2}, "mp_rank_00_model_states.pt"),  # torch.load(weights_only=False)
}


def plant_anywhere(ckpt: Path, name: str, marker: Path) -> Path:
    """``name`` (the first file of the checkpoint with that name, at any depth) rewritten to carry
    a payload beside what it held (its loader still gets what it expects); state.json's size and
    sha256 for it recomputed."""
    import pickle

    target = next(p for p in sorted(ckpt.rglob(name)) if p.is_file())
    if target.name == ".metadata":  # DCP's Metadata object, read with pickle.load
        meta = pickle.loads(target.read_bytes())
        meta.__dict__["extra"] = Payload(marker)
        target.write_bytes(pickle.dumps(meta))
    else:  # what is there, with one more entry
        torch.save({**torch.load(target, map_location="cpu", weights_only=False), "extra": Payload(marker)}, target)
    rel = str(target.relative_to(ckpt))
    state = json.loads((ckpt / "state.json").read_text())
    data = target.read_bytes()
    state["files"][rel] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (ckpt / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    return target


def holding_checkpoint(run, root: Path):
    """A new run (never started, so it resumes) holding ``run``'s newest checkpoint, as a run
    directory copied between hosts does."""
    import shutil

    from clustertune.runs.run import Run
    from clustertune.train import checkpoint as ckpt

    newest = ckpt.list_checkpoints(run.paths)[-1]
    new = Run.create(root, run.info.name, run.info.task, run.paths.recipe.read_text(), ["test"])
    for name in ("data.json", "tokenizer"):
        src = run.paths.root / name
        if src.is_dir():
            shutil.copytree(src, new.paths.root / name)
        elif src.is_file():
            shutil.copy2(src, new.paths.root / name)
    shutil.copytree(newest, new.paths.checkpoints / newest.name)
    return new, new.paths.checkpoints / newest.name


def refused_everywhere(run, ckpt_dir: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--resume`` (in this process, and through a launcher) refuses before anything changes;
    a node given the key by its launcher refuses before it opens a file."""
    import clustertune as ct
    from clustertune.identity import CHECKPOINT_KEY_ENV, derived_checkpoint_key
    from clustertune import api
    from clustertune.train import checkpoint as ckpt

    before = {p.name: p.read_bytes() for p in run.paths.root.iterdir() if p.is_file()}
    with pytest.raises(CheckpointError) as err:
        ct.run(resume=run.id, runs_root_dir=root, show_progress=False)
    assert f"checkpoint {ckpt_dir} was changed after it was signed" in str(err.value)
    assert f"clustertune run --resume {run.id} --trust-checkpoint" in str(err.value)
    with pytest.raises(CheckpointError, match="changed after it was signed"):
        api.run(None, resume=run.id, overrides=["launch.procs_per_node=2"], runs_root_dir=root, show_progress=False)
    assert {p.name: p.read_bytes() for p in run.paths.root.iterdir() if p.is_file()} == before
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, derived_checkpoint_key().hex())
    with pytest.raises(CheckpointError, match="changed after it was signed"):
        ckpt.verify_checkpoint(ckpt_dir)  # what load_distributed does on every rank, first
    monkeypatch.delenv(CHECKPOINT_KEY_ENV)


def need_deepspeed(train: dict) -> None:
    import importlib.util

    if train.get("strategy") != "deepspeed" or importlib.util.find_spec("deepspeed") is not None:
        return
    msg = "DeepSpeed is not installed: `bash scripts/setup.sh test` installs it (DS_BUILD_OPS=0)"
    pytest.fail(msg) if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1" else pytest.skip(msg)


@pytest.mark.parametrize("strategy", list(STRATEGY_CASES))
def test_a_payload_in_a_strategy_checkpoint_never_runs_and_an_untouched_copy_resumes(
    strategy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    train, name = STRATEGY_CASES[strategy]
    need_deepspeed(train)
    from clustertune.runs.store import get_run, list_runs

    root = tmp_path / "runs"
    # Sharded strategies train in processes of their own: DeepSpeed leaves its process group and
    # its RANK/MASTER_* variables behind in the process that ran it, which later tests inherit.
    recipe_file = tmp_path / "r.yaml"
    recipe_file.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train=train, data=SMALL_EVAL)))
    out = cli("run", str(recipe_file), "--no-progress", "--runs-root", str(root))
    assert out.returncode == 0, out.stderr
    (run,) = list_runs(root)
    assert run.state.value == "COMPLETED"

    # Untouched, the checkpoint resumes in a run it was copied into (through the strategy's loader).
    good, copied = holding_checkpoint(run, root)
    out = cli("run", "--resume", good.id, "--no-progress", "--runs-root", str(root))
    assert out.returncode == 0, out.stderr
    resumed = get_run(good.id, root)
    assert resumed.state.value == "COMPLETED" and resumed.attempts[-1].resumed_from == copied.name

    bad, ckpt_dir = holding_checkpoint(run, root)
    marker = tmp_path / "payload-ran"
    planted = plant_anywhere(ckpt_dir, name, marker)
    refused_everywhere(bad, ckpt_dir, root, monkeypatch)
    assert not marker.exists()
    # The payload is real: the loader the strategy uses runs it.
    if name == "shards/.metadata":
        from torch.distributed.checkpoint import FileSystemReader

        FileSystemReader(str(planted.parent)).read_metadata()
    else:
        torch.load(planted, map_location="cpu", weights_only=False)
    assert marker.is_dir()


def test_a_payload_in_an_rl_checkpoint_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import clustertune as ct
    from clustertune.recipe.load import load_recipe
    from clustertune.train.execute import execute
    from tests.rl_fixtures import grpo_recipe

    root = tmp_path / "runs"
    policy = ct.run(ct.load_recipe(with_(TINY_CAUSAL, train={**SHORT, "save_every": None}, data=SMALL_EVAL)),
                    runs_root_dir=root, show_progress=False)
    recipe = grpo_recipe(str(policy.paths.model), root, max_new_tokens=8)
    recipe["train"].update(max_steps=1, save_every=1, log_every=1)
    recipe["data"].update(max_eval_samples=4, max_train_samples=64)
    run = ct.run(ct.load_recipe(recipe), runs_root_dir=root, show_progress=False)
    assert run.state.value == "COMPLETED"

    bad, ckpt_dir = holding_checkpoint(run, root)
    marker = tmp_path / "payload-ran"
    planted = plant_anywhere(ckpt_dir, "rng_state.pth", marker)  # the trainer's RNG state, read on resume
    refused_everywhere(bad, ckpt_dir, root, monkeypatch)
    with pytest.raises(CheckpointError, match="changed after it was signed"):  # the node side of an RL run
        execute(load_recipe(bad.paths.recipe), bad.paths, ckpt_dir, show_progress=False)
    assert not marker.exists()
    torch.load(planted, map_location="cpu", weights_only=False)
    assert marker.is_dir()
