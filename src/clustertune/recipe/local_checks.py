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
from pathlib import Path
from typing import Any

from clustertune.errors import Problem
from clustertune.recipe.local_paths import (BUILTIN_CHAT_TEMPLATES, absolute_paths, locate, not_found,
                                            pathish)
from clustertune.recipe.run_refs import is_run_ref
from clustertune.recipe.sent_files import sent_files_problems
from clustertune.recipe.schema import Recipe

# Where a model's config says how many positions it has, in the order transformers' configs
# are read (GPT-2 names it n_positions, Llama and BERT max_position_embeddings).
POSITION_KEYS = ("n_positions", "max_position_embeddings", "n_ctx", "seq_length")
# The files `datasets.save_to_disk` writes: a Dataset's state, or a DatasetDict's index.
SAVED_DATASET_MARKERS = ("state.json", "dataset_dict.json")


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
            out.append((key, f"file {not_found(f, base)}; fix the path or remove the entry"))
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
            out.append(("data.dataset", f"directory {not_found(ds, base)}; give a save_to_disk directory, a hub dataset "
                        "name, or local files in data.train_files"))
    m = recipe.model
    if m.name_or_path and not is_run_ref(m.name_or_path):
        p = locate(m.name_or_path, base)
        if p.is_dir() and not (p / "config.json").is_file():
            out.append(("model.name_or_path", f"directory {m.name_or_path!r} has no config.json; give a directory "
                        "written by save_pretrained"))
        elif not p.exists() and pathish(m.name_or_path):
            out.append(("model.name_or_path", f"directory {not_found(m.name_or_path, base)}; give a save_pretrained "
                        "directory or a hub name"))
    out += _revision_problems(recipe, base)
    if m.config:
        p = locate(m.config, base)
        if p.is_dir() and not (p / "config.json").is_file():
            out.append(("model.config", f"directory {m.config!r} has no config.json"))
        elif not p.exists() and (pathish(m.config) or m.config.endswith(".json")):
            out.append(("model.config", f"{not_found(m.config, base)}; give a config.json, a directory holding one, or a "
                        "model type such as gpt2"))
    if m.tokenizer and pathish(m.tokenizer) and not locate(m.tokenizer, base).is_dir():
        out.append(("model.tokenizer", f"directory {not_found(m.tokenizer, base)}; give a saved tokenizer directory, a hub "
                    "name, or 'train'"))
    template = recipe.data.sft.chat_template
    if recipe.task == "sft" and template and template not in BUILTIN_CHAT_TEMPLATES:
        if not locate(template, base).is_file():
            close = difflib.get_close_matches(template, BUILTIN_CHAT_TEMPLATES, n=1, cutoff=0.6)
            out.append(("data.sft.chat_template", (f"{template!r}: did you mean {close[0]!r}? " if close else "")
                        + f"{template!r} is neither a built-in template ({', '.join(BUILTIN_CHAT_TEMPLATES)}) "
                        f"nor a Jinja file here: {not_found(template, base)}"))
    if recipe.rl is not None:
        policy = recipe.rl.policy or ""
        if pathish(policy) and not locate(policy, base).is_dir():
            out.append(("rl.policy", f"directory {not_found(policy, base)}; give a save_pretrained directory, a hub name or "
                        "run:<run-id>"))
    ds = recipe.train.deepspeed_config
    if ds and not locate(ds, base).is_file():
        out.append(("train.deepspeed_config", f"file {not_found(ds, base)}; give the path of your DeepSpeed JSON, or drop "
                    "the key to use the one clustertune writes from the recipe"))
    out += sent_files_problems(recipe.launch.files, base)  # as `clustertune launch` checks a command's
    return out


def _revision_problems(recipe: Recipe, base: Path | None) -> list[tuple[str, str]]:
    """``model.revision`` names a revision of a hub model: the schema refuses it beside a model
    written as a local path; here, beside a bare name that is a folder on this machine (which
    transformers reads instead of the hub), and as a local path or model folder itself."""
    m = recipe.model
    if m.revision is None:
        return []
    out = []
    name = m.name_or_path or ""
    if name and not is_run_ref(name) and not pathish(name) and locate(name, base).exists():
        out.append(("model.revision", f"{m.revision!r} is a hub revision, but model.name_or_path {name!r} is the local "
                    f"folder {locate(name, base)} here, which has no revisions (transformers reads the folder, not "
                    "the hub): drop model.revision, or move the folder away to load the hub model"))
    # Bare, only a model folder counts: a branch may share its name with some other folder here.
    if pathish(m.revision) or (locate(m.revision, base) / "config.json").is_file():
        out.append(("model.revision", f"{m.revision!r} is a local folder; model.revision takes a hub revision of the "
                    "hub model in model.name_or_path (a branch such as main, a tag or a commit sha): for weights in a "
                    "folder, set model.name_or_path to the folder and drop model.revision"))
    return out


def _local_config(recipe: Recipe) -> tuple[str, dict[str, Any]] | None:
    """(key, the config's JSON) when the model's config is a local file or directory."""
    m = recipe.model
    key, src = ("model.config", m.config) if m.config else ("model.name_or_path", m.name_or_path)
    if not src or is_run_ref(src):
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
