"""Models: pretrained (hub name or local directory) or built fresh from a config + overrides."""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clustertune.models.local import hub_options, is_pathish as _is_pathish, require_local
from clustertune.models.heads import auto_class, name_the_loss
from clustertune.errors import ModelError
from clustertune.models.adapters import apply_adapter, load_kwargs, record_base
from clustertune.models.download import Download, plan_download, reporting
from clustertune.models.tokenizer import hub_unreachable_message
from clustertune.recipe.schema import Recipe

log = logging.getLogger("clustertune")

POSITION_ATTRS = ("n_positions", "max_position_embeddings", "n_ctx", "seq_length")


def _config_from_source(src: str) -> Any:
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    p = Path(src).expanduser()
    if p.is_file():
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            raise ModelError(f"model.config: {src!r} is not a readable JSON config: {exc}") from exc
        model_type = data.pop("model_type", None)
        if model_type not in CONFIG_MAPPING:
            raise ModelError(f"model.config: {src!r} has no known 'model_type' (got {model_type!r})")
        return AutoConfig.for_model(model_type, **data)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelError(f"model.config: directory {src!r} has no config.json")
        return local_config(p, "model.config")
    if _is_pathish(src):
        raise ModelError(f"model.config: {src!r} does not exist")
    if src in CONFIG_MAPPING:
        return AutoConfig.for_model(src)
    close = difflib.get_close_matches(src, list(CONFIG_MAPPING.keys()), n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ModelError(f"model.config: {src!r} is neither a model type known to transformers nor an existing path{hint}")


def local_config(directory: Path, key: str, options: dict[str, Any] | None = None) -> Any:
    """The config of a local model directory; a config.json transformers cannot read (not JSON,
    not UTF-8, an unknown model_type) is named with the key that points at it."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(directory), **(options or {}))
    except (OSError, ValueError, KeyError) as exc:  # transformers raises OSError for bad JSON, ValueError for a type
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{key}: {directory / 'config.json'} cannot be read as a model config ({first}); "
                         "fix the file or save the model again with save_pretrained") from exc


def _pretrained_config(name: str, options: dict[str, Any]) -> Any:
    from transformers import AutoConfig

    p = Path(name).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise ModelError(f"model.name_or_path: {name!r} has no config.json; is it a save_pretrained directory?")
        return local_config(p, "model.name_or_path", options)
    require_local(name, "model.name_or_path")
    try:
        return AutoConfig.from_pretrained(name, **options)
    except (OSError, ValueError) as exc:
        raise ModelError(hub_unreachable_message("model.name_or_path", name, exc)) from exc


# Config attributes that are sizes or counts (n_layer, num_attention_heads, hidden_size, ...).
_SIZE_KEY = re.compile(r"^(?:n|num)_|_(?:size|layers?|heads?|positions|dim|embd|ctx)$")


_TRUE, _FALSE = ("true", "1", "y", "yes", "on"), ("false", "0", "n", "no", "off")


def _as_held_type(held: Any, value: Any) -> Any:
    """``value`` in the type the config holds for it, as run_clm's ``config.update_from_string``
    takes the types from the config: a bool stays a bool (``false``, ``0``, ``no``), an int an int
    (``"128"`` from the ``k=v`` form or a quoted YAML value), a float a float (``0`` is ``0.0``).
    An int attribute takes a float too (some configs default a dropout to ``0``). TypeError when
    the value cannot be that type."""
    if isinstance(held, bool):
        text = str(value).strip().lower()
        if isinstance(value, (bool, int, str)) and text in _TRUE + _FALSE:
            return text in _TRUE
        raise TypeError(f"true or false is expected, got {value!r}")
    if isinstance(held, (int, float)):
        if isinstance(value, bool):
            raise TypeError(f"a number is expected, got {value!r}")
        if isinstance(value, str):
            for kind in (int, float):
                try:
                    value = kind(value.strip())
                    break
                except ValueError:
                    continue
            else:
                raise TypeError(f"a number is expected, got {value!r}")
        if isinstance(held, float) and isinstance(value, int):
            return float(value)
    return value


def apply_config_overrides(config: Any, overrides: dict[str, Any]) -> None:
    known = set(config.to_dict()) | set(getattr(config, "attribute_map", {}))
    bad = [k for k in overrides if k not in known]
    if bad:
        msgs = []
        for k in bad:
            close = difflib.get_close_matches(k, sorted(known), n=1)
            msgs.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ModelError(
            f"model.config_overrides: {config.model_type} configs have no attribute {', '.join(msgs)}"
        )
    typed: dict[str, Any] = {}
    for k, v in overrides.items():
        try:
            typed[k] = _as_held_type(getattr(config, k, None), v)
        except TypeError as exc:
            raise _misfit(config, k, v) from exc
    sizes = [k for k, v in typed.items()
             if isinstance(v, int) and not isinstance(v, bool) and v < 1 and _SIZE_KEY.search(k)]
    if sizes:
        raise ModelError("model.config_overrides: " + ", ".join(f"{k}={typed[k]}" for k in sizes)
                         + ": sizes and counts must be at least 1")
    for k, v in typed.items():
        try:
            setattr(config, k, v)
        except Exception as exc:  # configs that check their fields' types raise their own error classes
            raise _misfit(config, k, overrides[k]) from exc


def _misfit(config: Any, key: str, value: Any) -> ModelError:
    held = getattr(config, key, None)
    return ModelError(f"model.config_overrides.{key}: {value!r} does not fit this {config.model_type} config "
                      f"attribute (it holds {type(held).__name__} values, e.g. {held!r})")


def model_positions(config: Any) -> int | None:
    """The longest sequence the model's position embeddings take, when it has a limit."""
    for attr in POSITION_ATTRS:
        v = getattr(config, attr, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def resolve_config(recipe: Recipe, tokenizer: Any | None = None, labels: dict[str, Any] | None = None) -> Any:
    """The model config the run will use, with overrides applied (no weights loaded).
    ``labels`` (classification: ``num_labels`` and ``names`` as the prepared data found them)
    set the head's size and the config's ``id2label``/``label2id``."""
    m = recipe.model
    fresh = m.config is not None
    config = _config_from_source(m.config) if fresh else _pretrained_config(m.name_or_path or "",
                                                                             hub_options(m, m.name_or_path))
    if fresh and tokenizer is not None:
        # A fresh model gets the tokenizer's vocabulary and special ids unless overridden.
        config.vocab_size = len(tokenizer)
        for attr in ("bos_token_id", "eos_token_id", "pad_token_id"):
            tid = getattr(tokenizer, attr, None)
            if tid is not None:
                setattr(config, attr, tid)
    if recipe.traits.head == "classifier":
        n = (labels or {}).get("num_labels") or m.num_labels
        if n is not None:
            config.num_labels = int(n)
        names = (labels or {}).get("names")
        if names:
            config.id2label = {i: str(name) for i, name in enumerate(names)}
            config.label2id = {str(name): i for i, name in enumerate(names)}
        if tokenizer is not None and getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = tokenizer.pad_token_id
    apply_config_overrides(config, m.config_overrides)
    return config


def check_sequence_fits(recipe: Recipe, config: Any) -> None:
    """block_size / max_length must fit the model's position embeddings."""
    limit = model_positions(config)
    if limit is None:
        return
    key, want = recipe.sequence_key, recipe.sequence_length
    if want > limit:
        raise ModelError(
            f"{key}: {want} is larger than the model's {limit} positions; set {key}<={limit}"
            + (" or raise it with model.config_overrides" if recipe.model.config else "")
        )


def build_model(recipe: Recipe, config: Any, tokenizer: Any, on_meta: bool = False) -> Any:
    """Instantiate the model: fresh from ``config`` or pretrained weights with it.

    ``on_meta``: only the structure, on the meta device (no memory, nothing read): a rank of a
    sharded run that receives its shards from rank 0 (see train/strategies/accel.py) builds
    this; it has the same parameters, in the same order and shapes, as the real model."""
    import torch

    auto = auto_class(recipe.traits.head)
    m = recipe.model
    # fp32 whatever dtype the checkpoint or config names: transformers 5 loads in the saved
    # dtype by default (bf16 for Llama/Qwen, fp16 for Pythia/OPT), which would leave AdamW
    # without an fp32 master copy and fp16's grad scaler without fp32 gradients. Autocast (or
    # the strategy) computes in the half type.
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if m.attn_implementation:
        kwargs["attn_implementation"] = m.attn_implementation
    kwargs.update(load_kwargs(recipe))  # QLoRA: the base in 4-bit
    if m.trust_remote_code:  # the model's own classes, named by its config's auto_map
        kwargs["trust_remote_code"] = True
    try:
        if on_meta:
            with torch.device("meta"):
                model = auto.from_config(config, **kwargs)
        elif m.config is not None:
            model = auto.from_config(config, **kwargs)
        else:
            path = str(Path(m.name_or_path or "").expanduser()) if Path(m.name_or_path or "").expanduser().exists() else m.name_or_path
            model = _load_pretrained(auto, path, config, recipe, kwargs | hub_options(m, m.name_or_path))
    except ValueError as exc:
        raise ModelError(f"model: cannot build a {recipe.task} model for {config.model_type!r}: {exc}") from exc
    except OSError as exc:
        raise ModelError(f"model.name_or_path: cannot load weights from {m.name_or_path!r}: {exc}") from exc
    name_the_loss(model, recipe.traits.head)
    emb = model.get_input_embeddings()
    if emb is not None and len(tokenizer) > emb.num_embeddings:
        # Grown to a multiple that tensor cores like (train.pad_vocab_multiple; 64 on a GPU).
        multiple = recipe.train.pad_vocab_multiple or (64 if torch.cuda.is_available() else 1)
        model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=multiple if multiple > 1 else None)
    if m.adapter is not None:
        model = apply_adapter(recipe, model, tokenizer)
        record_base(recipe, model)
    return model


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def weights_line(path: str, revision: str | None = None, what: str = "model") -> str:
    """What loading pretrained weights from ``path`` is about to do, in one line: read a local
    folder (its size), load from the Hugging Face cache, or download into it (first use; how
    many files and MB when the hub says). ``what`` starts the line: the key the model is for."""
    return _weights_plan(path, revision, what)[0]


@contextmanager
def announced_load(path: str, what: str, revision: str | None = None) -> Iterator[None]:
    """Around a ``from_pretrained`` that is not the run's own model (an RL reference, a reward
    or value model): its :func:`weights_line` first, then a download's bytes as they arrive, so
    no load is a silent minute."""
    line, download = _weights_plan(path, revision, what)
    log.info("%s", line)
    with reporting(download):
        yield


def _weights_plan(path: str, revision: str | None, what: str = "model") -> tuple[str, Download | None]:
    """:func:`weights_line` and the download to report while the weights load (None: no
    download, or one whose size the hub did not tell)."""
    local = Path(path)
    if local.is_dir():
        size = sum(f.stat().st_size for pattern in WEIGHT_FILES for f in local.glob(pattern))
        return f"{what}: loading the weights of {path} ({size / 1e6:,.1f} MB)", None
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = any(isinstance(try_to_load_from_cache(path, name, revision=revision), str)
                     for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                  "pytorch_model.bin.index.json"))
    except ValueError:  # not a hub name either (huggingface_hub's validation error is one): the load says why
        return f"{what}: loading the weights of {path}", None
    if cached:
        return f"{what}: loading the weights of {path} from the Hugging Face cache", None
    download = plan_download(path, revision)  # None when the hub does not say: the line without sizes
    size = f"{download.summary()}; " if download is not None else ""
    return (f"{what}: downloading the weights of {path} from the Hugging Face Hub into its cache "
            f"({size}first use here; later runs load them from there)"), download


def _load_pretrained(auto: Any, path: str, config: Any, recipe: Recipe, kwargs: dict[str, Any]) -> Any:
    """Pretrained weights into a model of ``config``. A tensor whose shape changed is
    re-initialised when it belongs to the task head (a classifier reused with another
    ``num_labels``); in the body (``config_overrides`` that change a width) it is an error naming
    the tensors, unless ``model.ignore_mismatched_sizes`` says to re-initialise them too."""
    m = recipe.model
    line, download = _weights_plan(path, kwargs.get("revision"))
    log.info("%s", line)  # a download or a large load takes a while
    with reporting(download):  # huggingface_hub's bars are off (train/execute.py): bytes as they arrive instead
        model, info = auto.from_pretrained(path, config=config,  # always low-memory in transformers 5
                                           ignore_mismatched_sizes=True, output_loading_info=True, **kwargs)
    mismatched = sorted((str(k), tuple(a), tuple(b)) for k, a, b in info.get("mismatched_keys") or ())
    prefix = f"{model.base_model_prefix}."
    body = [t for t in mismatched if t[0].startswith(prefix)]
    if body and not m.ignore_mismatched_sizes:
        shown = "; ".join(f"{k} {list(a)} in the checkpoint, {list(b)} in the model" for k, a, b in body[:6])
        more = f" and {len(body) - 6} more" if len(body) > 6 else ""
        raise ModelError(
            f"model.config_overrides: {len(body)} weight(s) of {m.name_or_path!r} do not fit the model's shape "
            f"({shown}{more}); drop the overrides that change sizes, or set model.ignore_mismatched_sizes=true "
            "to re-initialise those weights (they then start from random values)")
    if mismatched:
        log.warning("re-initialised (shape changed): %s", ", ".join(f"{k} {list(a)} -> {list(b)}" for k, a, b in mismatched))
    return model
