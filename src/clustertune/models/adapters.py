"""Adapters through PEFT: LoRA, DoRA and QLoRA on frozen pretrained weights.

``build_model`` loads the base (in 4-bit NF4 for QLoRA) and :func:`apply_adapter` wraps it in
a ``PeftModel`` whose only trainable parameters are the adapter's (plus ``modules_to_save``
and trainable token rows). Nothing downstream asks whether a model has an adapter: the
optimizer takes the parameters that require gradients and the checkpoints save those.

The model carries a small record (:data:`RECORD_ATTR`): which base it was built on (name and
revision, or a content hash of a local directory) and the adapter settings. Checkpoints copy
it into their state.json and a resume compares it with the model it builds.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from pathlib import Path
from typing import Any

from clustertune.models.heads import PEFT_TASK_TYPES, auto_class
from clustertune.models.local import require_local
from clustertune.models.run_models import RunModel
from clustertune.models.saving import save_pretrained
from clustertune.errors import CheckpointError, ModelError
from clustertune.extras import install_hint
from clustertune.recipe.adapter_schema import ALL_LINEAR, AdapterSection
from clustertune.recipe.schema import Recipe

RECORD_ATTR = "clustertune_adapter"
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def require_bitsandbytes() -> Any:
    """bitsandbytes, or a ModelError that says how to install it."""
    try:
        return importlib.import_module("bitsandbytes")
    except ImportError as exc:
        raise ModelError(
            "model.adapter.type: qlora loads the base in 4-bit through bitsandbytes, which is not installed "
            f"here; install it with `{install_hint('qlora')}`, or use model.adapter.type=lora ({exc})"
        ) from exc


def compute_dtype(recipe: Recipe) -> Any:
    """The dtype QLoRA computes in: the run's precision (bf16 where ``auto`` finds it, else fp32)."""
    import torch

    p = recipe.train.precision
    if p == "auto":
        p = "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p, torch.float32)


def load_kwargs(recipe: Recipe) -> dict[str, Any]:
    """Extra ``from_pretrained`` arguments for the base: the 4-bit quantization of QLoRA."""
    a = recipe.model.adapter
    if a is None or a.type != "qlora":
        return {}
    import torch

    require_bitsandbytes()
    from transformers import BitsAndBytesConfig

    # Each process holds its own 4-bit copy on its own device (DDP); the rank comes with the
    # launcher's environment.
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0') or 0)}" if torch.cuda.is_available() else "cpu"
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=compute_dtype(recipe))
    return {"quantization_config": quant, "device_map": {"": device}}


def linear_module_names(model: Any) -> list[str]:
    """The distinct last names of the model's linear layers (what ``target_modules`` names)."""
    from transformers.pytorch_utils import Conv1D

    import torch

    kinds: tuple[type, ...] = (torch.nn.Linear, Conv1D)
    try:
        import bitsandbytes as bnb

        kinds += (bnb.nn.Linear4bit,)
    except ImportError:
        pass
    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if n and isinstance(m, kinds)})


def quantized_linear_numels(model: Any) -> tuple[int, ...]:
    """Element counts of the Linear weights QLoRA loads in 4 bits: all but the output layer, which
    transformers keeps in 16/32 bits."""
    import torch

    head = model.get_output_embeddings()
    return tuple(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head)


def _check_targets(a: AdapterSection, model: Any) -> None:
    """Every named target matches some module; else list what the model has."""
    if a.target_modules == ALL_LINEAR:
        return
    names = [n for n, _ in model.named_modules() if n]
    if isinstance(a.target_modules, str):
        missing = [] if any(re.fullmatch(a.target_modules, n) for n in names) else [a.target_modules]
    else:
        missing = [t for t in a.target_modules if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        regex = ""
        if isinstance(a.target_modules, str):
            regex = (" (one string is a regular expression over full module paths such as "
                     "model.layers.0.self_attn.q_proj: give a list to match by name)")
        raise ModelError(
            f"model.adapter.target_modules: {', '.join(repr(m) for m in missing)} match(es) no module of "
            f"{type(model).__name__}{regex}; its linear layers are named {', '.join(linear_module_names(model))} "
            f"(or use {ALL_LINEAR!r})"
        )


def _token_ids(a: AdapterSection, tokenizer: Any) -> list[int]:
    ids = []
    for t in a.trainable_token_indices:
        if isinstance(t, int):
            ids.append(t)
            continue
        tid = tokenizer.convert_tokens_to_ids(t) if tokenizer is not None else None
        if tid is None or tid == getattr(tokenizer, "unk_token_id", None):
            raise ModelError(f"model.adapter.trainable_token_indices: {t!r} is not a token of the tokenizer; "
                             "add it to the tokenizer (a chat template's markers) or give its id")
        ids.append(int(tid))
    return ids


def lora_config(recipe: Recipe, tokenizer: Any) -> Any:
    from peft import LoraConfig

    a = recipe.model.adapter
    assert a is not None
    ids = _token_ids(a, tokenizer)
    return LoraConfig(
        r=a.rank, lora_alpha=a.alpha, lora_dropout=a.dropout, target_modules=a.target_modules,
        modules_to_save=list(a.modules_to_save) or None, use_dora=a.type == "dora",
        trainable_token_indices=ids or None, task_type=PEFT_TASK_TYPES[recipe.traits.head],
    )


def apply_adapter(recipe: Recipe, model: Any, tokenizer: Any) -> Any:
    """``model`` wrapped in a PeftModel with the recipe's adapter; only the adapter trains."""
    from peft import get_peft_model, prepare_model_for_kbit_training

    a = recipe.model.adapter
    assert a is not None
    _check_targets(a, model)
    config = lora_config(recipe, tokenizer)
    checkpointing = recipe.train.gradient_checkpointing
    if a.type == "qlora":
        # Freezes the 4-bit base and keeps the remaining (norm, embedding) weights in fp32.
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=checkpointing)
    try:
        peft_model = get_peft_model(model, config)
    except (ValueError, TypeError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"model.adapter: PEFT cannot put a {a.type} adapter on {type(model).__name__} with target_modules="
            f"{a.target_modules!r}: {first[:300]}. Target its linear layers ({', '.join(linear_module_names(model))}), "
            "or drop model.adapter to train every weight"
        ) from exc
    if checkpointing:
        # Recomputed blocks (reentrant checkpointing) only backpropagate when their input needs
        # a gradient; with the embedding frozen it would not, and the adapter would get none.
        # (transformers 5 also does this when checkpointing is switched on; 4.x does not.)
        peft_model.enable_input_require_grads()
    return peft_model


def record_base(recipe: Recipe, model: Any) -> None:
    """Attach what checkpoints record: the base model's identity and the adapter settings."""
    a = recipe.model.adapter
    assert a is not None
    setattr(model, RECORD_ATTR, {"base": base_identity(recipe), "settings": a.settings()})


def check_adapter(recipe: Recipe, config: Any) -> None:
    """Preflight: PEFT can wrap the model as asked (built on the meta device: no memory), and
    bitsandbytes is there for QLoRA. Raises ModelError naming the key and the fix."""
    a = recipe.model.adapter
    if a is None:
        return
    import torch

    if a.type == "qlora":
        require_bitsandbytes()
    auto = auto_class(recipe.traits.head)
    with torch.device("meta"):
        model = auto.from_config(config)
        wrapped = apply_adapter(recipe.model_copy(update={"model": recipe.model.model_copy(
            update={"adapter": a.model_copy(update={"type": "lora", "trainable_token_indices": []})})}), model, None)
    if not any(p.requires_grad for p in wrapped.parameters()):
        raise ModelError("model.adapter: nothing would train; name linear layers in model.adapter.target_modules")


# -- which base an adapter belongs to -----------------------------------------------------------


def base_identity(recipe: Recipe) -> dict[str, Any]:
    """The base model: a local directory by the content of its config and weight files (where it
    lives may differ between machines), a hub model by name and revision."""
    ref = recipe.model.name_or_path or recipe.model.config or ""
    p = Path(ref).expanduser()
    if p.is_dir():
        import xxhash

        # XXH3 reads as fast as the disk: a base of many GB costs seconds, not minutes.
        h = xxhash.xxh3_128()
        for f in sorted(p.iterdir()):
            if f.is_file() and (f.suffix in WEIGHT_SUFFIXES or f.name == "config.json"):
                with f.open("rb") as fh:
                    h.update(f.name.encode() + b"\0" + hashlib.file_digest(fh, xxhash.xxh3_128).digest())
        return {"content_xxh3": h.hexdigest()}
    return {"name": ref, "revision": _hub_revision(ref, recipe.model.revision)}


def model_source(recipe: Recipe) -> dict[str, Any] | None:
    """What run.json records of a pretrained model (None for one built from a config): the name,
    the revision asked for, the commit of the hub snapshot read, whether its own code ran."""
    m = recipe.model
    if not m.name_or_path:
        return None
    local = Path(m.name_or_path).expanduser().exists()
    return {"name_or_path": m.name_or_path, "revision": m.revision,
            "commit": None if local else _hub_revision(m.name_or_path, m.revision),
            "trust_remote_code": m.trust_remote_code}


def _hub_revision(name: str, revision: str | None = None) -> str | None:
    """The commit of a hub model's config in the local snapshot (what from_pretrained used)."""
    try:
        from transformers.utils import cached_file

        path = cached_file(name, "config.json", revision=revision, _raise_exceptions_for_missing_entries=False)
    except (OSError, ValueError):
        return None
    parts = Path(path).parts if path else ()
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None


def adapter_record(model: Any) -> dict[str, Any]:
    """What a checkpoint records about the model's adapter (nothing for a plain model)."""
    rec = getattr(model, RECORD_ATTR, None)
    return {"adapter": rec} if rec else {}


def check_resume(ckpt: Path, state: dict[str, Any], model: Any) -> None:
    """A checkpoint resumes only onto the base and adapter settings it was trained with (the
    node side, with the model it built)."""
    check_record(ckpt, state.get("adapter"), getattr(model, RECORD_ATTR, None))


def check_resume_recipe(ckpt: Path, recipe: Recipe) -> None:
    """The same check before a resume starts, from the recipe (no model is built)."""
    import json

    a = recipe.model.adapter
    saved = json.loads((ckpt / "state.json").read_text(encoding="utf-8")).get("adapter")
    check_record(ckpt, saved, {"base": base_identity(recipe), "settings": a.settings()} if a else None)


def check_record(ckpt: Path, saved: dict[str, Any] | None, now: dict[str, Any] | None) -> None:
    if saved is None and now is None:
        return
    if saved is None or now is None:
        has, lacks = ("the checkpoint", "this run") if saved else ("this run", "the checkpoint")
        raise CheckpointError(f"checkpoint {ckpt}: {has} has a model.adapter and {lacks} has none; resume "
                              "with the recipe the checkpoint was written with")
    keys = sorted(k for k in {*saved["settings"], *now["settings"]}
                  if saved["settings"].get(k) != now["settings"].get(k))
    if keys:
        diff = "; ".join(f"model.adapter.{k}: checkpoint {saved['settings'].get(k)!r}, now "
                         f"{now['settings'].get(k)!r}" for k in keys)
        raise CheckpointError(f"checkpoint {ckpt} was trained with other adapter settings ({diff}); resume with "
                              "the checkpoint's settings or start a new run")
    if saved["base"] != now["base"]:
        raise CheckpointError(f"checkpoint {ckpt} holds an adapter of another base model ({saved['base']}; this "
                              f"run loads {now['base']}); point model.name_or_path at the base it was trained on")


# -- merging -------------------------------------------------------------------------------------


def is_adapter_dir(path: Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def load_merged(adapter_dir: Path, base: str | None = None, **base_kwargs: Any) -> Any:
    """The base with the adapter of ``adapter_dir`` merged in, as a plain transformers model.

    The base is loaded unquantized even for a QLoRA adapter: merging into 4-bit weights would
    round most of the update away. ``base`` defaults to the one the adapter names."""
    from peft import PeftConfig
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    adapter_dir = Path(adapter_dir)
    cfg = PeftConfig.from_pretrained(str(adapter_dir))
    base = base or cfg.base_model_name_or_path
    require_local(base, f"{adapter_dir}: its base model")
    auto = AutoModelForSequenceClassification if cfg.task_type == "SEQ_CLS" else AutoModelForCausalLM
    try:
        model = auto.from_pretrained(base, **base_kwargs)
    except (OSError, ValueError) as exc:
        raise ModelError(f"{adapter_dir}: cannot load its base model {base!r} to merge into: {exc}") from exc
    return merge_into_base(load_adapter(model, adapter_dir))


def load_adapter(model: Any, adapter_dir: Path) -> Any:
    """``PeftModel.from_pretrained`` of ``adapter_dir`` onto ``model``, without the deprecation
    notice peft's call into transformers 5 prints (nothing a user can act on)."""
    import warnings

    from peft import PeftModel

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
        return PeftModel.from_pretrained(model, str(adapter_dir))


def merge_into_base(model: Any) -> Any:
    """``model`` (a PEFT model) with its adapter merged in, as a plain transformers model.

    Where the base ties its input embedding to its output layer and the adapter changes one of
    them (LoRA on the embedding: ``target_modules`` naming it), the two are untied first:
    unmerged, the update reaches only the layer it was trained on, and merging it into the one
    shared matrix would change the other as well (the merged model would answer differently).
    The merged model then keeps both matrices and says so in its config."""
    import torch
    from peft.tuners.tuners_utils import BaseTunerLayer

    base = model.get_base_model()
    emb, out = base.get_input_embeddings(), base.get_output_embeddings()
    if emb is not None and out is not None:
        emb_layer, out_layer = getattr(emb, "base_layer", emb), getattr(out, "base_layer", out)
        tied = getattr(emb_layer, "weight", None) is getattr(out_layer, "weight", None)
        if tied and (isinstance(emb, BaseTunerLayer) or isinstance(out, BaseTunerLayer)):
            out_layer.weight = torch.nn.Parameter(out_layer.weight.detach().clone(), requires_grad=False)
            for config in {id(c): c for c in (base.config, base.config.get_text_config())}.values():
                config.tie_word_embeddings = False
    return model.merge_and_unload()


def merge_adapter(adapter_dir: Path, out_dir: Path, base: str | None = None) -> Path:
    """Write the merged model and the adapter directory's tokenizer (and its chat template) to
    ``out_dir`` as a plain ``save_pretrained`` directory; written under a temporary name first."""
    import shutil

    from transformers import AutoTokenizer

    model = load_merged(adapter_dir, base)
    tmp = out_dir.with_name(f".tmp-{out_dir.name}")
    if tmp.exists():
        shutil.rmtree(tmp)
    save_pretrained(model, str(tmp))
    if (Path(adapter_dir) / "tokenizer_config.json").is_file():
        AutoTokenizer.from_pretrained(str(adapter_dir)).save_pretrained(str(tmp))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.rename(out_dir)
    return out_dir


def plain_model(found: RunModel) -> Path:
    """A run's model as a directory ``from_pretrained`` reads, for a run that starts from it (a
    base, an RL policy or reference): its final model, an adapter run's merged into its base (the
    copy ``model.adapter.save_merged`` wrote, or one merged here once, into ``model-merged/``),
    or a checkpoint once written out as a model (:mod:`clustertune.use.bases` does that)."""
    import logging

    path = found.path
    if found.step is not None:
        if not (path / "config.json").is_file():
            raise ModelError(f"{found.name()} is a checkpoint, not yet written out as a model: `clustertune run` "
                             "writes it out when a run starts from it")
        return path
    if not is_adapter_dir(path):
        return path
    merged = found.run.paths.merged_model
    if not (merged / "config.json").is_file():
        logging.getLogger("clustertune").info("merging the adapter of %s onto its base into %s", path, merged)
        merge_adapter(path, merged)
    return merged
