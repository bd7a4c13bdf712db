"""``clustertune fetch``: bring a recipe's hub inputs into a local store, for offline nodes.

On a machine with internet: the model and tokenizer repositories are downloaded as they are
(``snapshot_download`` into ``<store>/models/<org>--<name>/``, the same files
``save_pretrained`` writes), the dataset is loaded and written with ``save_to_disk`` into
``<store>/datasets/<org>--<name>[--<config>]/``, and a recipe that points at those copies is
written beside them. That recipe is then prepared, so where the cache is shared the nodes find
it ready. Runs of it with ``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1`` never touch the
network and hit the same prepared cache.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.data import builtin
from clustertune.errors import DataError, ModelError, UserError
from clustertune.fsutil import replace_dir, temp_sibling
from clustertune.recipe.schema import TOKENIZER_TRAIN, Recipe
from clustertune.recipe.load import dump_recipe, load_recipe

log = logging.getLogger("clustertune")


@dataclass
class FetchResult:
    recipe: Recipe
    recipe_path: Path
    fetched: list[tuple[str, str, Path]] = field(default_factory=list)  # (key, hub name, local copy)


def _is_local(s: str) -> bool:
    return Path(s).expanduser().exists()


def _safe(name: str) -> str:
    return name.replace("/", "--")


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _download_repo(name: str, dest: Path, key: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(name, local_dir=str(dest))
    except Exception as exc:  # huggingface_hub raises many types for "not there / not reachable"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{key}: cannot download {name!r} from the Hugging Face Hub ({first})") from exc
    return dest


def fetch(recipe: Recipe, store: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
          prepare_data: bool = True) -> FetchResult:
    """Download the recipe's hub model, tokenizer and dataset into ``store``; write a local recipe."""

    if _offline():
        raise UserError("fetch downloads from the Hugging Face Hub: run it where the hub is reachable, "
                        "with HF_HUB_OFFLINE and HF_DATASETS_OFFLINE unset")
    root = Path(store).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    plain: dict[str, Any] = recipe.to_plain()
    fetched: list[tuple[str, str, Path]] = []
    m, d = recipe.model, recipe.data

    if m.name_or_path and not _is_local(m.name_or_path):
        dest = _download_repo(m.name_or_path, root / "models" / _safe(m.name_or_path), "model.name_or_path")
        plain["model"]["name_or_path"] = str(dest)
        fetched.append(("model.name_or_path", m.name_or_path, dest))
    if m.tokenizer and m.tokenizer != TOKENIZER_TRAIN and not _is_local(m.tokenizer):
        if m.tokenizer == m.name_or_path:
            plain["model"]["tokenizer"] = plain["model"]["name_or_path"]
        else:
            dest = _download_repo(m.tokenizer, root / "models" / _safe(m.tokenizer), "model.tokenizer")
            plain["model"]["tokenizer"] = str(dest)
            fetched.append(("model.tokenizer", m.tokenizer, dest))

    name = d.dataset or ""
    if name and not name.startswith(builtin.BUILTIN_PREFIX) and not _is_local(name):
        import datasets

        dest = root / "datasets" / (_safe(name) + (f"--{d.dataset_config}" if d.dataset_config else ""))
        try:
            ds = datasets.load_dataset(name, d.dataset_config, revision=d.dataset_revision)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(f"data.dataset: cannot download {name!r} from the Hugging Face Hub ({first})") from exc
        tmp = temp_sibling(dest)
        ds.save_to_disk(str(tmp))
        replace_dir(tmp, dest)
        plain["data"].update({"dataset": str(dest), "dataset_config": None, "dataset_revision": None})
        fetched.append(("data.dataset", name, dest))

    local = load_recipe(plain)
    path = Path(out).expanduser().resolve() if out else root / f"{recipe.name}.yaml"
    path.write_text(
        f"# Written by `clustertune fetch` from recipe {recipe.name!r}: hub inputs replaced by local copies.\n"
        + dump_recipe(local), encoding="utf-8")
    if prepare_data:
        # Deferred: importing it pulls in numpy, which this module's importers do not need.
        from clustertune.data.cache import prepare

        p = prepare(local)
        log.info("data: %s %s", p.fingerprint, "cache hit" if p.hit else "prepared")
    return FetchResult(local, path, fetched)
