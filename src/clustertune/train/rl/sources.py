"""Where an RL run's models and examples come from.

- models (policy, reference, reward models): a hub name, a ``save_pretrained`` directory, or
  ``run:<run-id>``, the final model of an earlier clustertune run;
- prompts and preference pairs: the recipe's ``data`` section as for any task, plus two offline
  builtins made from Python's reference documentation:
  ``builtin:pydoc-prompts`` (the opening words of prose passages) and
  ``builtin:pydoc-preferences`` (those prompts with two real continuations each, ranked by the
  shipped reward; see :func:`builtin_rl_rows`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from clustertune.data import builtin
from clustertune.data.builtin import builtin_rl_rows
from clustertune.data.origins import Origins, row_at
from clustertune.data.sources import RawData, carve_indices, load_raw
from clustertune.errors import DataError, ModelError
from clustertune.models.adapters import plain_model
from clustertune.models.run_models import resolve_run_model
from clustertune.recipe.rl_recipe import RLRecipe

RL_BUILTINS = ("pydoc-prompts", "pydoc-preferences")


def resolve_model(ref: str, key: str, runs_root_dir: str | None = None) -> str:
    """A local directory or hub name that ``from_pretrained`` takes, for ``ref`` as users write it
    (``run:<run>``: that run's model, an adapter run's merged into its base)."""
    found = resolve_run_model(ref, key, runs_root_dir)
    if found is not None:
        return str(plain_model(found))
    p = Path(ref).expanduser()
    if p.exists():
        if not (p / "config.json").is_file():
            raise ModelError(f"{key}: {ref!r} has no config.json; give a save_pretrained directory")
        return str(p.resolve())
    if ref.startswith(("/", "./", "../", "~")):
        raise ModelError(f"{key}: directory {ref!r} does not exist")
    return ref


def _rename(ds: Any, mapping: dict[str, str]) -> Any:
    mapping = {a: b for a, b in mapping.items() if a != b}
    return ds.rename_columns(mapping) if mapping else ds


def load_rl_data(recipe: RLRecipe) -> RawData:
    """Train/validation splits with columns ``prompt`` (and ``chosen``/``rejected`` for DPO)."""
    from datasets import Dataset

    d, rl, seed = recipe.data, recipe.rl, recipe.train.seed
    name = d.dataset or ""
    if name.startswith(builtin.BUILTIN_PREFIX) and name[len(builtin.BUILTIN_PREFIX):] in RL_BUILTINS:
        short = name[len(builtin.BUILTIN_PREFIX):]
        ds = _rename(Dataset.from_list(builtin_rl_rows(short, seed)),
                     {"prompt": rl.prompt_column, "chosen": rl.chosen_column, "rejected": rl.rejected_column})
        keep, held = carve_indices(len(ds), d.validation_fraction, seed)
        whole = Origins.of_dataset(f"data.dataset {name!r}", len(ds))
        raw = RawData(train=ds.select(keep), validation=ds.select(held), identity={"kind": "builtin", "name": short},
                      carved=True, origins={"train": whole.select(keep), "validation": whole.select(held)})
    elif name.startswith(builtin.BUILTIN_PREFIX) and name[len(builtin.BUILTIN_PREFIX):] in builtin.BUILTINS:
        raise DataError(f"data.dataset: {name!r} has no prompts; for task rlhf use "
                        + " or ".join(builtin.BUILTIN_PREFIX + b for b in RL_BUILTINS) + " or your own data")
    else:
        raw = load_raw(d.model_copy(update={"text_column": rl.prompt_column}), seed)
    needed = [("rl.prompt_column", rl.prompt_column)]
    paired = rl.algorithm == "dpo" or (rl.algorithm == "kto" and rl.chosen_column in raw.train.column_names)
    if paired:
        needed += [("rl.chosen_column", rl.chosen_column), ("rl.rejected_column", rl.rejected_column)]
    elif rl.algorithm == "kto":  # unpaired: one completion a row, marked desirable or not
        needed += [("rl.completion_column", rl.completion_column), ("rl.label_column", rl.label_column)]
    for split, ds in (("train", raw.train), ("validation", raw.validation)):
        for key, col in needed:
            if col not in ds.column_names:
                raise DataError(f"{key}: column {col!r} not in the {split} data; its columns are {', '.join(ds.column_names)}. "
                                f"Set {key} to the column that holds it")
    # Where each row was read travels with it through the carve and the cleaning, for the messages.
    train, train_from = _clean(raw.train, raw.origins.get("train"), rl.prompt_column, d.max_train_samples, "train")
    val, val_from = _clean(raw.validation, raw.origins.get("validation"), rl.prompt_column, d.max_eval_samples,
                           "validation")
    rename = {rl.prompt_column: "prompt"}
    if paired:
        rename.update({rl.chosen_column: "chosen", rl.rejected_column: "rejected"})
    elif rl.algorithm == "kto":
        rename.update({rl.completion_column: "completion", rl.label_column: "label"})
    keep = list(rename)
    train = _rename(train.select_columns(keep), rename)
    val = _rename(val.select_columns(keep), rename)
    if "label" in train.column_names:
        train = _desirable(train, train_from, rl.label_column, "train")
        val = _desirable(val, val_from, rl.label_column, "validation")
    origins = {k: v for k, v in (("train", train_from), ("validation", val_from)) if v is not None}
    return RawData(train=train, validation=val, identity=raw.identity, carved=raw.carved, origins=origins)


_DESIRABLE = {1: True, 0: False, "true": True, "false": False, "1": True, "0": False}  # True == 1, False == 0


def _desirable(ds: Any, origins: Origins | None, col: str, split: str) -> Any:
    """KTO's labels as booleans: true/false, 1/0 (as numbers or text) are read as such; anything
    else is named where it was read (``origins``: its file and line)."""
    values = ds["label"]
    for i, v in enumerate(values):
        key = v.strip().lower() if isinstance(v, str) else v
        if isinstance(key, float) and key in (0.0, 1.0):
            key = int(key)
        if key not in _DESIRABLE or isinstance(key, float):
            raise DataError(f"rl.label_column: {row_at(origins, split, i)} has {v!r} in column {col!r}; KTO needs "
                            "true/false (or 1/0): whether the completion is desirable")
    flags = [_DESIRABLE[v.strip().lower() if isinstance(v, str) else int(v)] for v in values]
    if split == "train" and len(set(flags)) < 2:
        raise DataError(f"rl.label_column: every train row of column {col!r} is {flags[0]}; KTO needs desirable and "
                        "undesirable completions both")
    return ds.remove_columns("label").add_column("label", flags)


def _clean(ds: Any, origins: Origins | None, col: str, limit: int | None, split: str) -> tuple[Any, Origins | None]:
    """The rows with a prompt, up to ``limit``, and where each of them was read."""
    keep = [i for i, p in enumerate(ds[col]) if isinstance(p, str) and p.strip()]
    if not keep:
        raise DataError(f"rl.prompt_column: the {split} data has no non-empty prompts in column {col!r} "
                        f"({len(ds)} rows); give prompts as text")
    keep = keep[:limit] if limit else keep
    if len(keep) == len(ds):
        return ds, origins
    return ds.select(keep), origins.select(np.asarray(keep)) if origins is not None else None


def eval_prompts(recipe: RLRecipe, raw: RawData) -> list[str]:
    rl = recipe.rl
    base = list(rl.eval_prompts) or list(raw.validation["prompt"])
    return [p for p in base for _ in range(rl.eval_repeats)]
