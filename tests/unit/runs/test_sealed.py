"""Signed checkpoints: every checkpoint is signed with the user's checkpoint key when it is
sealed, and nothing of one is opened before its signature and digests are checked."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

from clustertune.errors import CheckpointError
from clustertune.identity import CHECKPOINT_KEY_ENV, checkpoint_key, derived_checkpoint_key, identity_key, key_id
from clustertune.runs.paths import RunPaths
from clustertune.train import checkpoint as ckpt
from clustertune.runs.sealed import SIGNATURE, accept_for_resume, sign_state
from tests.checkpoint_fixtures import save_one_process


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunPaths, Path]:
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.delenv(CHECKPOINT_KEY_ENV, raising=False)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    paths = RunPaths(tmp_path / "my-run")
    return paths, save_one_process(paths, 3, model, opt, sched, {}, "name: x\n", keep_last=2)


def rewrite_as_an_attacker(d: Path, name: str, data: bytes) -> None:
    """``d/name`` replaced, and state.json's size and sha256 for it recomputed to match."""
    (d / name).write_bytes(data)
    state = json.loads((d / "state.json").read_text())
    state["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (d / "state.json").write_text(json.dumps(state, indent=2) + "\n")


def test_the_checkpoint_key_is_derived_from_the_private_identity_key(saved, tmp_path: Path) -> None:
    key = checkpoint_key()
    assert len(key) == 32 and key == derived_checkpoint_key() and key != identity_key()
    assert (tmp_path / "cfg" / "identity.key").stat().st_mode & 0o777 == 0o600
    # The signature records which key signed it, and is not listed in state.json (it signs it).
    _, d = saved
    sig = json.loads((d / SIGNATURE).read_text())
    assert sig["alg"] == "hmac-sha256" and sig["key_id"] == key_id(key) and len(sig["hmac"]) == 64
    assert SIGNATURE not in json.loads((d / "state.json").read_text())["files"]


def test_a_sealed_checkpoint_verifies_here_and_where_the_launcher_passes_the_key(saved, monkeypatch) -> None:
    _, d = saved
    assert ckpt.verify_checkpoint(d)["step"] == 3
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, derived_checkpoint_key().hex())  # as a remote node gets it
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", "/nonexistent/ct-config")  # and no identity of its own
    assert ckpt.verify_checkpoint(d)["step"] == 3


def test_files_rewritten_with_recomputed_digests_are_refused_before_any_is_opened(saved) -> None:
    _, d = saved
    rewrite_as_an_attacker(d, "optimizer.pt", b"not even a pickle")
    with pytest.raises(CheckpointError) as err:
        ckpt.verify_checkpoint(d)
    msg = str(err.value)
    assert f"checkpoint {d} was changed after it was signed" in msg
    # Loaded, not resumed: the command that signs this very checkpoint, and nothing is to be deleted.
    assert "`clustertune runs trust my-run@step-3 --runs-root" in msg and "delete" not in msg


def test_a_file_added_beside_the_listed_ones_is_refused(saved) -> None:
    # DeepSpeed finds its optimizer shards by name pattern: an unlisted file could be loaded.
    _, d = saved
    (d / "sub").mkdir()
    (d / "sub" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").write_bytes(b"planted")
    with pytest.raises(CheckpointError, match=r"does not list \(sub/zero_pp_rank_1_mp_rank_00_optim_states.pt\)"):
        ckpt.verify_checkpoint(d)


def test_an_unsigned_checkpoint_is_refused_with_how_to_accept_it(saved) -> None:
    _, d = saved
    (d / SIGNATURE).unlink()
    with pytest.raises(CheckpointError, match=f"checkpoint {d} is not signed .*`clustertune runs trust my-run@step-3"):
        ckpt.verify_checkpoint(d)
    (d / SIGNATURE).write_text("garbage")
    with pytest.raises(CheckpointError, match="is not a clustertune signature"):
        ckpt.verify_checkpoint(d)


def test_a_checkpoint_signed_with_another_key_is_refused(saved, monkeypatch) -> None:
    _, d = saved
    other = os.urandom(32)
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, other.hex())
    with pytest.raises(CheckpointError, match=f"signed with another key .*this user's is {key_id(other)}"):
        ckpt.verify_checkpoint(d)
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "not-hex")
    with pytest.raises(CheckpointError, match=f"\\${CHECKPOINT_KEY_ENV} is not a checkpoint key"):
        ckpt.verify_checkpoint(d)


def test_trust_signs_an_unsigned_checkpoint_only_when_asked(saved) -> None:
    paths, d = saved
    (d / SIGNATURE).unlink()
    with pytest.raises(CheckpointError, match="not signed .*`clustertune run --resume my-run --trust-checkpoint`"):
        accept_for_resume(paths)
    assert not (d / SIGNATURE).exists()  # refused: nothing written
    assert accept_for_resume(paths, trust=True) == d
    assert ckpt.verify_checkpoint(d)["step"] == 3 and accept_for_resume(paths) == d
    # A torn state.json is named as such and never signed, trusted or not.
    (d / SIGNATURE).unlink()
    (d / "state.json").write_text('{"files": ')
    with pytest.raises(CheckpointError, match="state.json is corrupt"):
        accept_for_resume(paths, trust=True)
    assert not (d / SIGNATURE).exists()


def test_a_signature_covers_only_the_state_it_was_made_for(saved) -> None:
    _, d = saved
    state_bytes = (d / "state.json").read_bytes()
    sign_state(d, state_bytes.replace(b'"step": 3', b'"step": 4'))
    with pytest.raises(CheckpointError, match="changed after it was signed"):
        ckpt.verify_checkpoint(d)
    sign_state(d, state_bytes)
    assert ckpt.verify_checkpoint(d)["step"] == 3
