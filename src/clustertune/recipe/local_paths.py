"""Every local path a recipe names, in one place: which keys hold one, and where each is found.

A relative path is looked for beside the recipe file first (people keep ``./distgpt2`` and
``ds_config.json`` next to the YAML that names them), then in the working directory. What is
found becomes an absolute path before a run is created, so every later reader (the data step,
the ranks, a resume from another directory) sees the same file. Which of these paths reach the
nodes, and how, is the launcher's business (:mod:`clustertune.launch.files`); here nothing is
read or copied, only looked at.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clustertune.recipe.run_refs import is_run_ref
from clustertune.recipe.schema import Recipe

BUILTIN_CHAT_TEMPLATES = ("chatml", "llama3")

# What a path is for, which decides whether it travels (see clustertune.launch.files):
# model: a model, tokenizer or config the ranks load; data: raw data, read where the data is
# prepared; file: read by the ranks or the job (a DeepSpeed JSON, a chat template); extra: put
# in the run's files/ folder on the nodes (launch.files, a reward module beside the recipe).
Role = Literal["model", "data", "file", "extra"]


@dataclass(frozen=True)
class Named:
    """A key of the recipe whose value is a local path (``value``, as written)."""

    key: str
    value: str
    role: Role
    # extra: the name it has in the run's files/ folder, and the recipe value is left alone
    # (a reward function's ``module:attr`` names the module, not the file).
    name: str = ""


def pathish(value: str) -> bool:
    """Written as a local path, not a hub name: absolute, relative with ./ or ../, or from ~."""
    return value.startswith(("/", "./", "../", "~"))


def locate(value: str, base: Path | None = None) -> Path:
    """Where ``value`` is on this machine: absolute as given; relative, beside the recipe
    (``base``) when it is there, else in the working directory. The result is absolute."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return p
    if base is not None and (base / p).exists():
        return Path(os.path.abspath(base / p))
    return Path(os.path.abspath(p))


def not_found(value: str, base: Path | None = None) -> str:
    """``value`` (a path as written) does not exist, and where relative paths were looked for."""
    if Path(value).expanduser().is_absolute():
        rel = ""
    elif base is not None and base.resolve() != Path.cwd().resolve():
        rel = f" (relative paths start beside the recipe, {base}, then at {os.getcwd()})"
    else:
        rel = f" (relative paths start at {os.getcwd()})"
    return f"{value!r} does not exist{rel}"


def _maybe_local(value: str | None, base: Path | None) -> bool:
    """A model-like reference (hub name or directory) that is a local path: written as one,
    or a directory that exists (transformers takes an existing directory before the hub)."""
    if not value or is_run_ref(value):
        return False
    return pathish(value) or locate(value, base).exists()


def module_file(spec: str, base: Path | None) -> Path | None:
    """The file or package folder of a ``module:attr`` beside the recipe or in the working
    directory (``my_rewards:score`` -> ``my_rewards.py``); None for an installed module."""
    top = spec.partition(":")[0].split(".")[0]
    if not top.isidentifier():
        return None
    for where in ([base] if base is not None else []) + [Path.cwd()]:
        for cand in (where / f"{top}.py", where / top):
            if cand.is_file() or (cand.is_dir() and (cand / "__init__.py").is_file()):
                return Path(os.path.abspath(cand))
    return None


def named_paths(recipe: Recipe, base: Path | None = None) -> list[Named]:
    """Every key of ``recipe`` that names a local path, in key order."""
    out: list[Named] = []
    m = recipe.model
    for key, value in (("model.name_or_path", m.name_or_path), ("model.tokenizer", m.tokenizer)):
        if value != "train" and _maybe_local(value, base):
            out.append(Named(key, str(value), "model"))
    if m.config and (_maybe_local(m.config, base) or m.config.endswith(".json")):
        out.append(Named("model.config", m.config, "model"))
    d = recipe.data
    out += [Named(f"data.train_files.{i}", f, "data") for i, f in enumerate(d.train_files)]
    out += [Named(f"data.validation_files.{i}", f, "data") for i, f in enumerate(d.validation_files)]
    if d.dataset and not d.dataset.startswith("builtin:") and _maybe_local(d.dataset, base):
        out.append(Named("data.dataset", d.dataset, "data"))
    template = d.sft.chat_template
    if recipe.task == "sft" and template and template not in BUILTIN_CHAT_TEMPLATES:
        out.append(Named("data.sft.chat_template", template, "file"))
    if recipe.train.deepspeed_config:
        out.append(Named("train.deepspeed_config", recipe.train.deepspeed_config, "file"))
    if recipe.rl is not None:
        rl = recipe.rl
        refs = [("rl.policy", rl.policy), ("rl.reference", rl.reference), ("rl.value_model", rl.value_model)]
        refs += [(f"rl.rewards.{i}.model", r.model) for i, r in enumerate(rl.rewards)]
        out += [Named(k, str(v), "model") for k, v in refs if _maybe_local(v, base)]
        for i, r in enumerate(rl.rewards):
            found = module_file(r.function, base) if r.function else None
            if found is not None:
                out.append(Named(f"rl.rewards.{i}.function", str(found), "extra", found.name))
    for i, f in enumerate(recipe.launch.files):
        out.append(Named(f"launch.files.{i}", f, "extra", locate(f, base).name))
    return out


def _set(plain: dict[str, Any], key: str, value: str) -> None:
    """Set a dotted key (list indexes as numbers) in a recipe's plain dict."""
    *parents, last = key.split(".")
    node: Any = plain
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def with_values(plain: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """``plain`` (a recipe's ``to_plain()``) with the dotted keys of ``values`` replaced."""
    import copy

    out = copy.deepcopy(plain)
    for key, value in values.items():
        _set(out, key, value)
    return out


def absolute_paths(recipe: Recipe, base: Path | None = None) -> Recipe:
    """``recipe`` with every local path it names that exists here made absolute (a missing one
    is left as written, for the preflight to name)."""
    values = {}
    for n in named_paths(recipe, base):
        if n.role == "extra" and n.key.startswith("rl."):
            continue  # a module name, not a path
        if n.key == "model.name_or_path" and recipe.model.revision is not None:
            continue  # a hub revision beside a local folder: the preflight names the problem
        found = locate(n.value, base)
        if found.exists() and str(found) != n.value:
            values[n.key] = str(found)
    if not values:
        return recipe
    # From the keys set explicitly: the recipe made again still knows which ones the user set.
    return Recipe.model_validate(with_values(recipe.explicit_plain(), values))
