"""What ``clustertune validate`` checks on this machine, offline, beyond the schema.

The schema checks a recipe's shape wherever it is loaded (on the nodes too). The checks here
look at this machine's files: the local paths a recipe names exist and are what their key
needs, and a model whose ``config.json`` is local takes the recipe's sequence length. They run
where the recipe is written (nodes may see other paths), and need no network and no import of
torch or transformers: a hub name is left to `clustertune run`.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from clustertune.errors import Problem
from clustertune.recipe.local_paths import BUILTIN_CHAT_TEMPLATES, RUN_PREFIX, absolute_paths, locate, pathish
from clustertune.recipe.schema import Recipe

# Where a model's config says how many positions it has, in the order transformers' configs
# are read (GPT-2 names it n_positions, Llama and BERT max_position_embeddings).
POSITION_KEYS = ("n_positions", "max_position_embeddings", "n_ctx", "seq_length")
# The files `datasets.save_to_disk` writes: a Dataset's state, or a DatasetDict's index.
SAVED_DATASET_MARKERS = ("state.json", "dataset_dict.json")


def _where(value: str, base: Path | None = None) -> str:
    if Path(value).expanduser().is_absolute():
        rel = ""
    elif base is not None and base.resolve() != Path.cwd().resolve():
        rel = f" (relative paths start beside the recipe, {base}, then at {os.getcwd()})"
    else:
        rel = f" (relative paths start at {os.getcwd()})"
    return f"{value!r} does not exist{rel}"


def _files(recipe: Recipe) -> list[tuple[str, str]]:
    d = recipe.data
    return ([(f"data.train_files.{i}", f) for i, f in enumerate(d.train_files)]
            + [(f"data.validation_files.{i}", f) for i, f in enumerate(d.validation_files)])


def path_problems(recipe: Recipe, base: Path | None = None) -> list[tuple[str, str]]:
    """(key, message) for every local path the recipe names that is missing or of the wrong kind
    (``base``: the recipe file's folder, where relative paths are looked for first)."""
    out: list[tuple[str, str]] = []
    for key, f in _files(recipe):
        p = locate(f, base)
        if p.is_symlink() and not p.exists():
            out.append((key, f"{f!r} is a symbolic link that cannot be opened (it points nowhere, or at itself); "
                        "point it at the file or give the file's own path"))
        elif not p.exists():
            out.append((key, f"file {_where(f, base)}; fix the path or remove the entry"))
        elif not p.is_file():
            out.append((key, f"{f!r} is not a regular file; give a .txt, .json/.jsonl, .csv or .parquet file"))
    ds = recipe.data.dataset or ""
    if ds and not ds.startswith("builtin:"):
        p = locate(ds, base)
        if p.is_dir() and not any((p / m).is_file() for m in SAVED_DATASET_MARKERS):
            out.append(("data.dataset", f"directory {ds!r} was not written by datasets' save_to_disk (no "
                        f"{' or '.join(SAVED_DATASET_MARKERS)}); for raw files use data.train_files"))
        elif p.is_file():
            out.append(("data.dataset", f"{ds!r} is a file; local files go in data.train_files"))
        elif not p.exists() and pathish(ds):
            out.append(("data.dataset", f"directory {_where(ds, base)}; give a save_to_disk directory, a hub dataset "
                        "name, or local files in data.train_files"))
    m = recipe.model
    if m.name_or_path and not m.name_or_path.startswith(RUN_PREFIX):
        p = locate(m.name_or_path, base)
        if p.is_dir() and not (p / "config.json").is_file():
            out.append(("model.name_or_path", f"directory {m.name_or_path!r} has no config.json; give a directory "
                        "written by save_pretrained"))
        elif not p.exists() and pathish(m.name_or_path):
            out.append(("model.name_or_path", f"directory {_where(m.name_or_path, base)}; give a save_pretrained "
                        "directory or a hub name"))
    if m.config:
        p = locate(m.config, base)
        if p.is_dir() and not (p / "config.json").is_file():
            out.append(("model.config", f"directory {m.config!r} has no config.json"))
        elif not p.exists() and (pathish(m.config) or m.config.endswith(".json")):
            out.append(("model.config", f"{_where(m.config, base)}; give a config.json, a directory holding one, or a "
                        "model type such as gpt2"))
    if m.tokenizer and pathish(m.tokenizer) and not locate(m.tokenizer, base).is_dir():
        out.append(("model.tokenizer", f"directory {_where(m.tokenizer, base)}; give a saved tokenizer directory, a hub "
                    "name, or 'train'"))
    template = recipe.data.sft.chat_template
    if recipe.task == "sft" and template and template not in BUILTIN_CHAT_TEMPLATES:
        if not locate(template, base).is_file():
            close = difflib.get_close_matches(template, BUILTIN_CHAT_TEMPLATES, n=1, cutoff=0.6)
            out.append(("data.sft.chat_template", (f"{template!r}: did you mean {close[0]!r}? " if close else "")
                        + f"{template!r} is neither a built-in template ({', '.join(BUILTIN_CHAT_TEMPLATES)}) "
                        f"nor a Jinja file here: {_where(template, base)}"))
    if recipe.rl is not None:
        policy = recipe.rl.policy or ""
        if pathish(policy) and not locate(policy, base).is_dir():
            out.append(("rl.policy", f"directory {_where(policy, base)}; give a save_pretrained directory, a hub name or "
                        "run:<run-id>"))
    ds = recipe.train.deepspeed_config
    if ds and not locate(ds, base).is_file():
        out.append(("train.deepspeed_config", f"file {_where(ds, base)}; give the path of your DeepSpeed JSON, or drop "
                    "the key to use the one clustertune writes from the recipe"))
    for i, f in enumerate(recipe.launch.files):
        if not locate(f, base).exists():
            out.append((f"launch.files.{i}", f"{_where(f, base)}; fix the path or remove the entry"))
    names = [locate(f, base).name for f in recipe.launch.files]
    for i, name in enumerate(names):
        if name in names[:i]:
            out.append((f"launch.files.{i}", f"{recipe.launch.files[i]!r} has the same name ({name!r}) as "
                        f"launch.files.{names.index(name)}; both would land at files/{name} on the nodes: rename one"))
    return out


def _local_config(recipe: Recipe) -> tuple[str, dict[str, Any]] | None:
    """(key, the config's JSON) when the model's config is a local file or directory."""
    m = recipe.model
    key, src = ("model.config", m.config) if m.config else ("model.name_or_path", m.name_or_path)
    if not src or src.startswith(RUN_PREFIX):
        return None
    p = Path(src).expanduser()
    f = p / "config.json" if p.is_dir() else p
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # `clustertune run` says what is wrong with it when it builds the model
    return (key, data) if isinstance(data, dict) else None


def positions(config: dict[str, Any], overrides: dict[str, Any]) -> int | None:
    """The longest sequence the model takes: an override of it wins over the config's value."""
    for source in (overrides, config):
        for k in POSITION_KEYS:
            v = source.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def sequence_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """The recipe's sequence length against the positions of a local config (or of
    ``config_overrides`` alone, for a model type built fresh)."""
    if recipe.task == "rlhf":
        return []
    found = _local_config(recipe)
    key, config = found if found else ("model.config_overrides", {})
    limit = positions(config, recipe.model.config_overrides)
    if limit is None:
        return []
    seq_key = "data.block_size" if recipe.task == "causal_lm" else "data.max_length"
    want = recipe.sequence_length
    if want <= limit:
        return []
    where = (f"the model's config ({key}: {recipe.model.config or recipe.model.name_or_path})" if found
             else "model.config_overrides")
    fix = f"set {seq_key}<={limit}"
    if recipe.model.config:
        fix += " or raise the positions with model.config_overrides (n_positions / max_position_embeddings)"
    return [(seq_key, f"{want} is longer than the {limit} positions of {where}; {fix}")]


def local_problems(recipe: Recipe, base: Path | None = None) -> tuple[Recipe, list[tuple[str, str]]]:
    """What this machine says of ``recipe`` before anything is built: the recipe with its
    relative paths absolute (looked for beside ``base``, the recipe's folder, then here), and the
    (key, message) problems of its paths, as the user wrote them, and of its sequence length."""
    absolute = absolute_paths(recipe, base)
    return absolute, path_problems(recipe, base) + sequence_problems(absolute)


def located(found: list[tuple[str, str]], file: str | None = None, lines: dict[tuple[str, ...], int] | None = None,
            overrides: list[str] | None = None) -> list[Problem]:
    """(key, message) pairs as Problems naming ``file`` and the key's line there, or the
    ``key=value`` override that set the key."""
    lines = lines or {}
    overridden = {o.partition("=")[0].strip(): o for o in overrides or [] if "=" in o}
    out = []
    for key, message in found:
        parts = tuple(key.split("."))
        src = next((o for k, o in overridden.items() if key == k or key.startswith(k + ".")), None)
        if src is not None:
            out.append(Problem(key=key, message=message, file=f"<override {src}>"))
            continue
        within = [o for k, o in overridden.items() if k.startswith(key + ".")]  # overrides of parts of it
        if within:
            out.append(Problem(key=key, message=message, file=f"<override {' '.join(within)}>"))
            continue
        line = lines.get(parts) or lines.get(parts[:-1]) if parts[-1].isdigit() else lines.get(parts)
        if line is None and len(parts) > 1:  # a key the file does not spell out: its section's line
            line = lines.get(parts[:-1])
        out.append(Problem(key=key, message=message, file=file, line=line))
    return out
