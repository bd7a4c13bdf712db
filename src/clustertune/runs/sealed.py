"""Sealed checkpoints: which checkpoint directories are complete, and which may be loaded.

A checkpoint is complete once its ``state.json`` is there: it is written last, just before the
directory is renamed into place. ``state.json`` lists every file with its size and sha256, and
``state.sig`` beside it holds an HMAC-SHA256 of ``state.json``'s bytes under the user's
checkpoint key (:mod:`clustertune.identity`), so the signature covers every file.

Some files of a checkpoint are pickles that libraries load as they are: the ``.metadata`` of
``torch.distributed.checkpoint`` under FSDP, DeepSpeed's ``*_states.pt``, the trainer's files in
an RL checkpoint. Loading one that someone else wrote could run their code, and checkpoints
travel between hosts. So nothing of a checkpoint is opened before its signature and then every
file's digest have been checked; a checkpoint without a valid signature is refused, unless the
user vouches for it: ``clustertune run --resume RUN_ID --trust-checkpoint`` signs the one a run
resumes from, ``clustertune runs trust RUN@step-N`` any one (a finished run's, to load it).

No torch here: a launcher checks the signature before it starts anything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import shlex
from pathlib import Path
from typing import Any

from clustertune.errors import CheckpointError
from clustertune.fsutil import sha256_file
from clustertune.identity import checkpoint_key, identity_file, key_id
from clustertune.runs.paths import CHECKPOINT_INDEX, RunPaths, checkpoint_ref, checkpoint_step
from clustertune.runs.store import runs_root

log = logging.getLogger("clustertune")

STATE = CHECKPOINT_INDEX
SIGNATURE = "state.sig"
SIG_FORMAT = 1
_DOMAIN = b"clustertune checkpoint state v1\n"  # a checkpoint signature is never valid for anything else


def list_checkpoints(paths: RunPaths) -> list[Path]:
    """Complete checkpoints (renamed into place, state.json present), oldest first. Temporary
    and half-removed directories are never listed."""
    return paths.complete_checkpoints()


def _mac(key: bytes, state_bytes: bytes) -> str:
    return hmac.new(key, _DOMAIN + state_bytes, hashlib.sha256).hexdigest()


def sign_state(ckpt: Path, state_bytes: bytes, key: bytes | None = None) -> Path:
    """Write ``ckpt/state.sig`` for ``state_bytes`` (state.json as written); the caller fsyncs it
    with the rest before the directory is renamed into place."""
    key = checkpoint_key() if key is None else key
    sig = {"format": SIG_FORMAT, "alg": "hmac-sha256", "key_id": key_id(key), "hmac": _mac(key, state_bytes)}
    path = ckpt / SIGNATURE
    path.write_text(json.dumps(sig) + "\n", encoding="utf-8")
    return path


def _read_state_bytes(ckpt: Path) -> bytes:
    state_file = ckpt / STATE
    try:
        return state_file.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {ckpt} is incomplete: {state_file} is missing") from None


def _parse(ckpt: Path, state_bytes: bytes) -> dict[str, Any]:
    try:
        state = json.loads(state_bytes.decode("utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"checkpoint file {ckpt / STATE} is corrupt (not JSON: {exc})") from exc
    if not isinstance(state, dict) or not isinstance(state.get("files", {}), dict):
        raise CheckpointError(f"checkpoint file {ckpt / STATE} is corrupt (not a clustertune checkpoint state)")
    return state


def signature_problem(ckpt: Path, state_bytes: bytes, key: bytes, shown: str | None = None) -> str | None:
    """Why ``ckpt``'s signature does not vouch for ``state_bytes`` under ``key``; None when it does.
    ``shown``: how messages name the checkpoint (``host:path`` for a copy of one kept on a host)."""
    sig_file = ckpt / SIGNATURE
    name = shown or str(ckpt)
    try:
        sig = json.loads(sig_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (f"checkpoint {name} is not signed ({SIGNATURE} is missing: it was written before clustertune "
                "signed its checkpoints, or the file was removed)")
    except (ValueError, UnicodeDecodeError):
        sig = None
    if not isinstance(sig, dict) or not isinstance(sig.get("hmac"), str):
        return f"checkpoint {name} has no valid signature ({SIGNATURE} is not a clustertune signature)"
    if hmac.compare_digest(sig["hmac"], _mac(key, state_bytes)):
        return None
    if sig.get("key_id") != key_id(key):
        return (f"checkpoint {name} was signed with another key (key id {sig.get('key_id')}; this user's is "
                f"{key_id(key)}, from {identity_file()}): another user or machine wrote it, or it was copied from one")
    return f"checkpoint {name} was changed after it was signed (its {STATE} does not match its {SIGNATURE})"


def trust_command(ckpt: Path) -> str:
    """The command that signs ``ckpt`` (a run's checkpoint directory) with this user's key."""
    run_dir = ckpt.parent.parent
    step = checkpoint_step(ckpt.name)
    ref = checkpoint_ref(run_dir.name, step) if step is not None else run_dir.name
    where = "" if run_dir.parent.resolve() == runs_root() else f" --runs-root {shlex.quote(str(run_dir.parent))}"
    return f"clustertune runs trust {ref}{where}"


def _refusal(ckpt: Path, problem: str, run_id: str | None = None, shown: str | None = None,
             resuming: bool = False) -> CheckpointError:
    """The refusal of a checkpoint whose signature does not vouch for it, with the command that
    signs it: ``--resume --trust-checkpoint`` where the run is being resumed from it (the only
    checkpoint a resume signs is its newest), else ``runs trust`` for this very checkpoint (a
    finished run cannot resume; a resume would train on and sign another one)."""
    head = f"{problem}. Some of its files are pickles that loading would run, so none of it was loaded. "
    if resuming:
        run_id = run_id or ckpt.parent.parent.name
        return CheckpointError(
            head + f"If you wrote it and trust its files, `clustertune run --resume {run_id} --trust-checkpoint` signs "
            f"it with your key and resumes; otherwise delete {shown or ckpt} to resume from an earlier checkpoint"
        )
    return CheckpointError(
        head + f"If you wrote it and trust its files, `{trust_command(ckpt)}` signs it with your key (nothing else "
        "changes); otherwise load another checkpoint of the run, or its final model"
    )


def vouch_for_copy(copy: Path, run_id: str, shown: str, trust: bool) -> bool:
    """The signature check of :func:`accept_for_resume` for a local copy of a checkpoint's
    state.json (and state.sig) whose checkpoint lives elsewhere (``shown``: where). Returns
    whether the copy's state.sig was (re)signed with this user's key (``trust``), which the
    caller then puts back beside the checkpoint; raises the refusal otherwise."""
    state_bytes = _read_state_bytes(copy)
    _parse(copy, state_bytes)
    key = checkpoint_key()
    problem = signature_problem(copy, state_bytes, key, shown=shown)
    if problem is None:
        return False
    if not trust:
        raise _refusal(copy, problem, run_id=run_id, shown=shown, resuming=True)
    sign_state(copy, state_bytes, key)
    log.warning("%s; signed with your key as asked (--trust-checkpoint)", problem)
    return True


def signed_state(ckpt: Path, key: bytes | None = None) -> dict[str, Any]:
    """``ckpt``'s state.json once its signature is checked (the bytes checked are the bytes parsed;
    parsing JSON runs no code, and a torn file is better named as such)."""
    state_bytes = _read_state_bytes(ckpt)
    state = _parse(ckpt, state_bytes)
    problem = signature_problem(ckpt, state_bytes, checkpoint_key() if key is None else key)
    if problem is not None:
        raise _refusal(ckpt, problem)
    return state


def verified_state(ckpt: Path, key: bytes | None = None) -> dict[str, Any]:
    """``ckpt``'s state.json after checking its signature, then every file it lists against its
    size and sha256, and that it holds no other file (libraries find some of theirs by name
    pattern); a CheckpointError names the checkpoint or the file that does not match."""
    state = signed_state(ckpt, key)
    _check_files(ckpt, state)
    return state


def _check_files(ckpt: Path, state: dict[str, Any]) -> None:
    """Every file ``state`` (``ckpt``'s state.json) lists matches its size and sha256, and no
    other file is there."""
    listed = set(state.get("files", {}))
    extra = sorted(str(p.relative_to(ckpt)) for p in ckpt.rglob("*")
                   if not p.is_dir() and str(p.relative_to(ckpt)) not in listed | {STATE, SIGNATURE})
    if extra:
        raise CheckpointError(
            f"checkpoint {ckpt} holds file(s) its {STATE} does not list ({', '.join(extra[:5])}): they were added "
            f"after it was sealed, and a loader could pick them up; remove them, or delete {ckpt} to resume from "
            "an earlier checkpoint"
        )
    for name, want in state.get("files", {}).items():
        f = ckpt / name
        if not f.is_file():
            raise CheckpointError(f"checkpoint file {f} is missing")
        if f.stat().st_size != want["bytes"] or sha256_file(f) != want["sha256"]:
            raise CheckpointError(
                f"checkpoint file {f} is corrupt (size or sha256 differs from {ckpt / STATE}); "
                f"delete {ckpt} to resume from an earlier checkpoint"
            )


def vouch_for(ckpt: Path) -> str | None:
    """Sign ``ckpt`` with this user's key when its signature does not vouch for it (``clustertune
    runs trust``): the user vouches for the files its state.json lists, which must match it
    first (a changed file is never signed). Returns what was wrong with the signature; None
    when this user's key had signed it already (nothing is written)."""
    state_bytes = _read_state_bytes(ckpt)
    state = _parse(ckpt, state_bytes)  # a corrupt state.json is named as such, and never signed
    key = checkpoint_key()
    problem = signature_problem(ckpt, state_bytes, key)
    if problem is not None:
        _check_files(ckpt, state)
        sign_state(ckpt, state_bytes, key)
        log.warning("%s; signed with your key as asked (clustertune runs trust)", problem)
    verified_state(ckpt, key)
    return problem


def accept_for_resume(paths: RunPaths, trust: bool = False) -> Path | None:
    """The newest complete checkpoint of a run about to resume, checked before anything changes:
    its signature, then every file it lists against its size and sha256 (the ranks check them
    again before they load any). With ``trust``, an unsigned checkpoint, or one signed with
    another key, is signed with this user's key instead of refused: the user vouches for the
    files its state.json lists, which must still match it. None when there is no checkpoint."""
    found = list_checkpoints(paths)
    if not found:
        return None
    newest = found[-1]
    state_bytes = _read_state_bytes(newest)
    _parse(newest, state_bytes)  # a corrupt state.json is named as such, and never signed
    key = checkpoint_key()
    problem = signature_problem(newest, state_bytes, key)
    if problem is not None:
        if not trust:
            raise _refusal(newest, problem, resuming=True)
        sign_state(newest, state_bytes, key)
        log.warning("%s; signed with your key as asked (--trust-checkpoint)", problem)
    verified_state(newest, key)  # a changed or missing file stops the resume here, on every backend
    return newest
