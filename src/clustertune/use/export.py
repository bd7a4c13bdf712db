"""Export a trained model as a directory other tools load as is.

A full model (or an adapter merged onto its base with ``merge``) becomes a plain
``save_pretrained`` directory: safetensors weights, ``config.json`` (a classifier's
``id2label``/``label2id`` carried over), the tokenizer with its chat template, and for a
generative model ``generation_config.json`` whose end-of-sequence ids include the chat
template's end-of-turn marker, so ``transformers.pipeline`` and serving engines stop where the
model was trained to. An adapter without ``merge`` stays a PEFT adapter directory
(``adapter_config.json`` + safetensors) that ``PeftModel.from_pretrained`` loads onto its base.
A model card (README.md) says what the model is, how it was trained and how to load it.

The directory is built under a hidden temporary name beside the destination and renamed into
place: a failure leaves no half-written export behind, and ``force`` replaces an old one in
one step.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import ModelError
from clustertune.fsutil import replace_dir, temp_sibling
from clustertune.models.adapters import load_merged
from clustertune.models.saving import save_pretrained
from clustertune.use.load import Target, adapter_base, find_target, load_model_for, load_tokenizer_for
from clustertune.use.model_card import model_card
from clustertune.data.templates import set_generation_ids

EXPORT_DTYPES = ("bf16", "fp16", "fp32")
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Failures a user fixes at the destination: permissions, space, a file where a folder must be.
_WRITE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EEXIST}


@dataclass(frozen=True)
class Exported:
    """What was written: where, which kind of directory, its weights' dtype, its files."""

    path: Path
    kind: str  # "model", "adapter" or "merged model"
    dtype: str
    source: str
    files: list[str] = field(default_factory=list)
    fidelity: Any = None  # use/fidelity.py's Fidelity, where the written model was checked


def torch_dtype(name: str | None) -> Any:
    """``--dtype``: None keeps the trained dtype."""
    if name is None:
        return None
    import torch

    table = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if name not in table:
        raise ModelError(f"--dtype {name!r}: choose one of {', '.join(EXPORT_DTYPES)} (or leave it out to keep "
                         "the trained dtype)")
    return table[name]


def _inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def check_destination(to: Path, target: Target, force: bool) -> Path:
    """The resolved destination, or a typed error: a file, a non-empty directory without
    ``force``, or a place that holds (or is held by) what is being exported."""
    out = Path(to).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ModelError(f"--to {to}: a file is there; name a directory (it is created)")
    sources = [target.path] + ([target.run.paths.root] if target.run is not None else [])
    if target.adapter:
        base = Path(adapter_base(target.path)).expanduser()
        if base.is_dir():
            sources.append(base.resolve())
    for src in sources:
        if _inside(out, src) or _inside(src, out):
            raise ModelError(f"--to {to}: overlaps {src}, which the export reads; name a directory outside it")
    if _inside(Path.cwd().resolve(), out) or out == Path.home().resolve():
        raise ModelError(f"--to {to}: that is {'your home directory' if out == Path.home().resolve() else 'where you are'}"
                         "; the export replaces the whole directory, so name a new one (e.g. ./my-model)")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ModelError(f"--to {to}: the directory exists and is not empty; name a new one, or pass --force "
                         "to replace it")
    return out


def export_model(ref: str, to: str | os.PathLike[str], *, runs_root: str | os.PathLike[str] | None = None,
                 merge: bool = False, dtype: str | None = None, force: bool = False,
                 repo_id: str | None = None, check: bool = True) -> Exported:
    """Write what ``ref`` (a run id or a model directory) names to ``to``; see the module doc.

    ``merge`` merges an adapter into its base (a full model is exported as it is either way);
    ``dtype`` converts the weights; ``repo_id`` is the name the model card's examples load from
    (default: the directory); ``check``: compare the written model with the trained one
    (use/fidelity.py) before it is moved into place."""
    target = find_target(ref, runs_root)
    refuse_adapter_checkpoint(target, merge)
    want = torch_dtype(dtype)
    return write_export(target, check_destination(Path(to), target, force), want, merge=merge, repo_id=repo_id,
                        to=to, check=check)


def refuse_adapter_checkpoint(target: Target, merge: bool) -> None:
    if target.step is not None and target.adapter and not merge:
        raise ModelError(f"{target.label}: a checkpoint of an adapter run holds the adapter's weights only; "
                         "export it with --merge (onto its base), or export the run's final model")


def start_export_dir(out: Path, tmp: Path, to: str | os.PathLike[str]) -> None:
    """Make ``out``'s parent folders and the empty ``tmp`` beside it (where an export is written
    before it replaces ``out``), or a typed error naming ``--to`` where nothing can be made."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as exc:  # /proc, a read-only mount, a path through a file
        raise _cannot_write(to, out, exc) from exc


def _cannot_write(to: str | os.PathLike[str], out: Path, exc: OSError) -> ModelError:
    return ModelError(f"--to {to}: cannot write the export there ({exc.strerror or exc}); is "
                      f"{out.parent} a writable directory with room to spare?")


def write_export(target: Target, out: Path, want: Any = None, *, merge: bool = False, repo_id: str | None = None,
                 to: str | os.PathLike[str] | None = None, check: bool = False) -> Exported:
    """Write ``target`` to the directory ``out`` (checked already, or one clustertune owns, such
    as a run's ``checkpoint-models``), replacing it in one step; ``want`` a torch dtype or None.
    ``check``: a generative full or merged model is compared with the trained one first, and not
    written when it answers differently (an adapter directory is loaded onto its base as it trained)."""
    to = to if to is not None else out
    made = _missing_parents(out)
    tmp = temp_sibling(out, "export")
    fidelity = None
    try:
        start_export_dir(out, tmp, to)
        if target.adapter and not merge:
            kind, written = "adapter", _write_adapter(target, tmp, want)
        else:
            kind, written = ("merged model" if target.adapter else "model"), _write_model(target, tmp, want)
            if check and not target.classifier:
                fidelity = check_written(target, tmp, artifact=f"the exported {kind} ({written})", precision=written)
        card = model_card(target, tmp, kind=kind, dtype=written, load_from=repo_id or str(out), fidelity=fidelity)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        readable_as_written(tmp)
        replace_dir(tmp, out)
    except BaseException as exc:
        undo_partial(tmp, made)
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
            raise _cannot_write(to, out, exc) from exc
        raise
    return Exported(path=out, kind=kind, dtype=written, source=target.label,
                    files=sorted(p.name for p in out.iterdir()), fidelity=fidelity)


def check_written(target: Target, written: Path, *, artifact: str, precision: str,
                  gguf_file: str | None = None) -> Any:
    """The fidelity check of what an export wrote (use/fidelity.py); a typed error naming the
    first difference when it fails (the caller then removes what it wrote)."""
    # Deferred: the check reads prepared data (numpy) and loads models, which the CLI's start-up does without.
    from clustertune.use.fidelity import check_export

    found = check_export(target, written, artifact=artifact, precision=precision, gguf_file=gguf_file)
    if not found.passed:
        raise ModelError(f"{artifact} does not answer as {target.label} does, so nothing was written "
                         f"({found.summary()}):\n  - " + "\n  - ".join(found.differences)
                         + "\n(--no-check writes it anyway)")
    return found


def readable_as_written(folder: Path) -> None:
    """Every file of an export with the mode this user's other new files get (0644 under the
    usual umask): safetensors writes its files 0600, which a serving container running as
    another user could not read."""
    umask = os.umask(0)
    os.umask(umask)
    for f in folder.rglob("*"):
        if f.is_file() and not f.is_symlink():
            f.chmod(0o666 & ~umask)


def undo_partial(tmp: Path, made: list[Path]) -> None:
    """What a failed export wrote: its temporary directory, and the parents it created (deepest
    first, only while they are empty)."""
    shutil.rmtree(tmp, ignore_errors=True)
    for d in made:
        try:
            d.rmdir()
        except OSError:
            break


def _missing_parents(out: Path) -> list[Path]:
    missing = []
    p = out.parent
    while not p.exists():
        missing.append(p)
        p = p.parent
    return missing


def _dtype_name(dt: Any) -> str:
    return str(dt).removeprefix("torch.")


# -- a plain model (or an adapter merged onto its base) -----------------------------------------


def _write_model(target: Target, out: Path, want: Any) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    if target.step is not None:  # RUN@step-N: built as the run built it, the checkpoint's weights in it
        model = load_model_for(target, device="cpu", dtype="fp32", merge=target.adapter).to(want or torch.float32)
    elif target.adapter:
        from transformers import AutoConfig

        base = adapter_base(target.path)
        try:
            trained = getattr(AutoConfig.from_pretrained(base), "dtype", None)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{target.label}: cannot read its base model {base!r} to merge into: {exc}") from exc
        # Merge in fp32 (a bf16 base would round the adapter's small update away), then store
        # in the base's dtype unless another is asked for.
        model = load_merged(target.path, dtype=torch.float32)
        model = model.to(want or _as_torch_dtype(trained) or torch.float32)
    else:
        auto = AutoModelForSequenceClassification if target.classifier else AutoModelForCausalLM
        try:
            model = auto.from_pretrained(str(target.path), dtype=want or "auto")
        except (OSError, ValueError) as exc:
            raise ModelError(f"{target.label}: cannot load the model in {target.path}: {exc}") from exc
    tokenizer = load_tokenizer_for(target)
    if not target.classifier:
        set_generation_ids(model, tokenizer)
    save_pretrained(model, str(out))
    tokenizer.save_pretrained(str(out))
    return _dtype_name(model.dtype)


def _as_torch_dtype(dt: Any) -> Any:
    import torch

    if isinstance(dt, torch.dtype):
        return dt
    return getattr(torch, dt, None) if isinstance(dt, str) else None


# -- a PEFT adapter directory --------------------------------------------------------------------


def _write_adapter(target: Target, out: Path, want: Any) -> str:
    """adapter_config.json and the adapter's weights (as safetensors, converted when asked),
    beside the tokenizer; PEFT's own README is replaced by the model card."""
    src = target.path
    shutil.copy2(src / ADAPTER_CONFIG, out / ADAPTER_CONFIG)
    weights = _adapter_weights(src)
    from safetensors.torch import save_file

    if want is None and weights.name == ADAPTER_WEIGHTS:
        shutil.copy2(weights, out / ADAPTER_WEIGHTS)
        tensors = _read_adapter(weights)
    else:
        tensors = {k: (v.to(want) if want is not None and v.is_floating_point() else v).contiguous()
                   for k, v in _read_adapter(weights).items()}
        save_file(tensors, str(out / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    load_tokenizer_for(target).save_pretrained(str(out))
    floats = sorted({_dtype_name(v.dtype) for v in tensors.values() if v.is_floating_point()})
    return ", ".join(floats) or "none"


def _adapter_weights(src: Path) -> Path:
    for name in (ADAPTER_WEIGHTS, "adapter_model.bin"):
        if (src / name).is_file():
            return src / name
    raise ModelError(f"{src}: an adapter directory without weights ({ADAPTER_WEIGHTS} is missing); "
                     "export the run's final model or a complete checkpoint")


def _read_adapter(path: Path) -> dict[str, Any]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    import torch

    return dict(torch.load(str(path), map_location="cpu", weights_only=True))

