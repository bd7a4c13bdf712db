"""What a user names to use a trained model, and loading it for inference.

``RUN_ID`` (or a unique prefix of one) means that run's final model: a ``save_pretrained``
directory, or for an adapter run the PEFT adapter directory, loaded onto its base without
merging (``merge=True`` merges it, as ``export --merge`` does). A path means a model directory
written by ``save_pretrained`` (or an adapter directory). The tokenizer comes from the model
directory (SFT runs save theirs, chat template included, beside the weights), else from the run.
``RUN@step-N`` means that run's checkpoint of step N: the model is built as the run built it
(its recipe, tokenizer and config) and the checkpoint's weights loaded into it, once its
signature and every file's digest are checked; FSDP's and ZeRO's shards are gathered first.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.models.local import require_local
from clustertune.models.run_models import RunModel, resolve_run_model
from clustertune.errors import ModelError, RunError, UserError
from clustertune.models.adapters import is_adapter_dir, load_adapter, merge_into_base
from clustertune.recipe.load import load_recipe
from clustertune.runs.paths import RunPaths, checkpoint_ref, checkpoint_step, has_tokenizer, split_step
from clustertune.runs.run import Run
from clustertune.runs.sealed import verified_state
from clustertune.models.tokenizer import fix_pad_token, load_tokenizer

DTYPES = ("auto", "fp32", "bf16", "fp16")

_CLASSIFIER_SUFFIX = "ForSequenceClassification"


@dataclass(frozen=True)
class Target:
    """The model directory a user named, and the run it came from (None for a plain directory)."""

    path: Path
    run: Run | None
    adapter: bool
    classifier: bool
    step: int | None = None  # RUN@step-N: ``path`` is that checkpoint's directory

    @property
    def label(self) -> str:
        if self.run is None:
            return str(self.path)
        return "run " + (checkpoint_ref(self.run.id, self.step) if self.step is not None else self.run.id)


@dataclass
class Loaded:
    """A model ready for inference (eval mode, on ``device``) and its tokenizer."""

    target: Target
    model: Any
    tokenizer: Any
    device: str


def _looks_like_path(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~")) or os.sep in ref or Path(ref).expanduser().exists()


def _architectures(path: Path) -> list[str]:
    cfg = path / "config.json"
    if cfg.is_file():
        try:
            return list(json.loads(cfg.read_text(encoding="utf-8")).get("architectures") or [])
        except (OSError, ValueError):
            return []
    return []


def _adapter_is_classifier(path: Path) -> bool:
    try:
        return json.loads((path / "adapter_config.json").read_text(encoding="utf-8")).get("task_type") == "SEQ_CLS"
    except (OSError, ValueError):
        return False


def _target_from_dir(path: Path, run: Run | None) -> Target:
    adapter = is_adapter_dir(path)
    if not adapter and not (path / "config.json").is_file():
        raise ModelError(f"{path}: not a model directory (no config.json or adapter_config.json); give a run id "
                         "(`clustertune runs` lists them) or a directory written by save_pretrained")
    classifier = _adapter_is_classifier(path) if adapter else any(
        a.endswith(_CLASSIFIER_SUFFIX) for a in _architectures(path))
    return Target(path=path.resolve(), run=run, adapter=adapter, classifier=classifier)


def find_target(ref: str, runs_root: str | os.PathLike[str] | None = None) -> Target:
    """``ref`` as a user types it: a run id (or prefix), a run's name (its newest run with a final
    model) or ``last`` under the runs root, each with ``@step-N`` for a checkpoint
    (:func:`~clustertune.models.run_models.resolve_run_model`), or a model directory."""
    try:
        return _find_target(ref, runs_root)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # Looking the name up as a path fails before any "no such run" could be said.
        shown = ref if len(ref) <= 60 else f"{ref[:60]}... ({len(ref)} characters)"
        raise ModelError(f"{shown!r}: too long for a file name on this machine; give a run id (`clustertune runs` "
                         "lists them) or a model directory") from None


def _find_target(ref: str, runs_root: str | os.PathLike[str] | None) -> Target:
    ref = (ref or "").strip()
    if not ref:
        raise RunError("name a run id (`clustertune runs` lists them) or a model directory")
    run_ref, step = split_step(ref)
    if _looks_like_path(run_ref):
        path = Path(run_ref).expanduser()
        if step is not None:
            if not RunPaths(path).run_json.is_file():
                raise RunError(f"{run_ref}: not a run directory (no run.json); RUN@step-N names a run's checkpoint")
            return _checkpoint_target(RunModel(Run.load(path), step, prefixed=False).checked())
        if not path.is_dir():
            raise ModelError(f"{ref}: no such directory; give a run id or a directory written by save_pretrained")
        if RunPaths(path).run_json.is_file():  # a run's directory: its final model, as for its id
            return _run_target(RunModel(Run.load(path), prefixed=False).checked())
        step = checkpoint_step(path.name)
        run_dir = path.resolve().parent.parent
        if step is not None and RunPaths(run_dir).run_json.is_file():  # <run>/checkpoints/step-N
            return _checkpoint_target(RunModel(Run.load(run_dir), step, prefixed=False).checked())
        return _target_from_dir(path, None)
    found = resolve_run_model(ref, None, runs_root, prefixed=False)
    assert found is not None  # without the prefix, every reference is a run's
    return _checkpoint_target(found) if found.step is not None else _run_target(found)


def _checkpoint_target(found: RunModel) -> Target:
    """``RUN@step-N``: the run's complete checkpoint of that step, its signature checked now."""
    run, step = found.run, found.step
    assert step is not None
    ckpt = run.paths.checkpoint(step)
    state = verified_state(ckpt)
    if state.get("kind") == "trl":
        raise ModelError(f"run {checkpoint_ref(run.id, step)} is a checkpoint of TRL's trainer (an RL run); use the run's "
                         "final model, or resume the run to finish it")
    recipe = load_recipe(run.paths.recipe)
    return Target(path=ckpt, run=run, adapter=recipe.model.adapter is not None,
                  classifier=recipe.traits.head == "classifier", step=step)


def _run_target(found: RunModel) -> Target:
    """``RUN``: the run's final model (checked to be there)."""
    return _target_from_dir(found.path, found.run)


def pick_device(device: str | None = None) -> str:
    """``device`` as given (checked), else the first GPU where there is one, else the CPU."""
    import torch

    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ModelError(f"--device {device!r}: not a device torch knows ({exc}); use cpu, cuda or cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"--device {device}: this machine has no CUDA GPU torch can use; use --device cpu")
    return str(dev)


def torch_dtype(name: str, device: str) -> Any:
    """The weights' dtype for ``name``; ``auto`` is bf16 on a GPU that has it, else fp32."""
    import torch

    if name not in DTYPES:
        raise ModelError(f"--dtype {name!r}: choose one of {', '.join(DTYPES)}")
    if name == "auto":
        gpu_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if gpu_bf16 else torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def load_tokenizer_for(target: Target) -> Any:
    """The tokenizer saved with the model, else the run's own, else (adapters) the base's."""

    for where in (target.path, target.run.paths.tokenizer if target.run is not None else None):
        if where is not None and has_tokenizer(where):
            return fix_pad_token(load_tokenizer(str(where), key=str(where)))
    if target.adapter:
        return fix_pad_token(load_tokenizer(adapter_base(target.path), key=f"{target.path} (its base model)"))
    raise ModelError(f"{target.label}: no tokenizer in {target.path}"
                     + (f" or {target.run.paths.tokenizer}" if target.run is not None else "")
                     + "; save one there with tokenizer.save_pretrained(DIR)")


def adapter_base(adapter_dir: Path) -> str:
    try:
        cfg = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{adapter_dir / 'adapter_config.json'}: unreadable ({exc})") from None
    base = cfg.get("base_model_name_or_path")
    if not base:
        raise ModelError(f"{adapter_dir / 'adapter_config.json'}: names no base model (base_model_name_or_path)")
    return str(base)


# transformers' from_pretrained switches process-wide state while it builds a model (the default
# dtype, torch.nn.init patched out, the meta device), so two threads loading at once can break each
# other's load. A server loads on more than one thread (the OpenAI model, the Tinker API's bases):
# one load at a time in a process.
_LOADING = threading.Lock()


def load_model_for(target: Target, *, device: str, dtype: str = "auto", merge: bool = False) -> Any:
    """The model in eval mode on ``device``. An adapter is loaded onto its base unmerged (the
    base unquantized, even for QLoRA: 4-bit kernels need a GPU), merged when ``merge``. Loads
    in one process take turns (see ``_LOADING``)."""
    with _LOADING:
        return _load_model_for(target, device=device, dtype=dtype, merge=merge)


def _load_model_for(target: Target, *, device: str, dtype: str, merge: bool) -> Any:
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    auto = AutoModelForSequenceClassification if target.classifier else AutoModelForCausalLM
    kwargs = {"dtype": torch_dtype(dtype, device)}
    if target.step is not None:
        model = _from_checkpoint(target)
        if target.adapter and merge:
            model = merge_into_base(model)
        return model.to(device=device, dtype=kwargs["dtype"]).eval()
    if target.adapter:
        base = adapter_base(target.path)
        require_local(base, f"{target.label}: its base model")
        try:
            model = auto.from_pretrained(base, **kwargs)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{target.label}: cannot load its base model {base!r}: {exc}") from exc
        model = load_adapter(model, target.path)
        if merge:
            model = merge_into_base(model)
    else:
        try:
            model = auto.from_pretrained(str(target.path), **kwargs)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{target.label}: cannot load the model in {target.path}: {exc}") from exc
    return model.to(device).eval()


def _from_checkpoint(target: Target) -> Any:
    """The model of a ``RUN@step-N`` target: built as its run built it, the checkpoint's weights
    loaded into it (checked first against state.json)."""
    # Deferred: the data, model-building and checkpoint modules import numpy, transformers and
    # torch, which finding a target (the CLI's checks before it loads anything) does without.
    from clustertune.data.staging import read_run_data
    from clustertune.models.build import build_model, resolve_config
    from clustertune.train.checkpoint import verify_checkpoint
    from clustertune.train.gather import weights_file
    from clustertune.train.trainable import load_weights

    assert target.run is not None and target.step is not None
    paths = target.run.paths
    verify_checkpoint(target.path)
    recipe = load_recipe(paths.recipe)
    tok = load_tokenizer_for(target)
    labels = read_run_data(paths).labels if paths.data.is_file() else None
    config = resolve_config(recipe, tok, labels)
    model = build_model(recipe, config, tok)
    # FSDP and ZeRO checkpoints hold shards: gathered into one file here, on this CPU.
    with weights_file(target.path) as weights:
        # The run may have padded its vocabulary for a GPU (train.pad_vocab_multiple): take the
        # checkpoint's row count, whatever this machine would pad to.
        rows = _embedding_rows(weights)
        emb = model.get_input_embeddings()
        if rows is not None and emb is not None and emb.num_embeddings != rows:
            model.resize_token_embeddings(rows)
        try:
            load_weights(model, weights)  # an adapter run's checkpoint holds its trainable weights
        except (RuntimeError, ValueError, OSError, UserError) as exc:
            raise ModelError(f"{target.label}: its weights do not fit the model its recipe builds: {exc}") from exc
    return model


_EMBEDDINGS = ("wte.weight", "embed_tokens.weight", "word_embeddings.weight", "embed_in.weight")


def _embedding_rows(weights: Path) -> int | None:
    """Rows of the input embedding in a safetensors file (its header only), if it names one."""
    from safetensors import safe_open

    with safe_open(str(weights), "pt") as f:
        for key in f.keys():
            if key.endswith(_EMBEDDINGS):
                return int(f.get_slice(key).get_shape()[0])
    return None


def load_for_use(ref: str, *, runs_root: str | os.PathLike[str] | None = None, device: str | None = None,
                 dtype: str = "auto", merge: bool = False) -> Loaded:
    """Find what ``ref`` names and load its model and tokenizer for inference."""
    target = find_target(ref, runs_root)
    dev = pick_device(device)
    tokenizer = load_tokenizer_for(target)
    model = load_model_for(target, device=dev, dtype=dtype, merge=merge)
    return Loaded(target=target, model=model, tokenizer=tokenizer, device=dev)
