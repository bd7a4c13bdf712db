"""``pairs``: preference pairs for a reward model. Each example is a prompt with a chosen and a
rejected completion (``data.prompt_column``, ``data.chosen_column``, ``data.rejected_column``);
it becomes one sample of two rows, prompt + chosen and prompt + rejected, each cut and padded to
``data.max_length`` (cut at the end, as classification texts are), with their attention masks.
The manifest's label set has one entry: the model's head gives one score per text."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clustertune.data.prepare import Arrays, classification_arrays, column, select_shuffled
from clustertune.data.shapes.base import Built, BuildJob, write_arrays
from clustertune.data.truncation import check_truncation
from clustertune.errors import DataError
from clustertune.recipe.schema import Recipe

SCORE_LABEL = "reward"
"""The one output of a reward model's head, by name (``config.id2label``)."""


@dataclass
class PairArrays(Arrays):
    """One split of pairs: ``input_ids`` and ``attention_mask`` of shape (pairs, 2, max_length),
    the chosen text first."""

    n_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.n_tokens

    @property
    def lengths(self) -> np.ndarray:
        """Real tokens of each pair, both texts (what tokens/s counts per sample)."""
        return np.asarray(self.attention_mask).sum(axis=(1, 2))  # type: ignore[call-overload]

    def batch_tensors(self, idx: np.ndarray) -> dict[str, Any]:
        """The pairs ``idx`` cut to their longest text; ``labels`` marks every pair real (the
        loader sets the padding ones to -100)."""
        import torch

        mask = np.asarray(self.attention_mask[idx])  # type: ignore[index]
        width = max(1, int(mask.sum(-1).max()))
        return {"input_ids": torch.from_numpy(np.asarray(self.input_ids[idx])[..., :width].astype(np.int64)),
                "attention_mask": torch.from_numpy(mask[..., :width].astype(np.int64)),
                "labels": torch.ones(len(idx), dtype=torch.long)}


class Pairs:
    name = "pairs"
    reads_text_column = False
    classifier_tokens = True

    def selection(self, recipe: Recipe) -> dict[str, Any]:
        d = recipe.data
        return {"prompt_column": d.prompt_column, "chosen_column": d.chosen_column,
                "rejected_column": d.rejected_column}

    def processing(self, recipe: Recipe) -> dict[str, Any]:
        return {"max_length": recipe.data.max_length, "pairs": "prompt+completion", "truncation": "right",
                "padding": "max_length"}

    def tokenizer_inputs(self, recipe: Recipe, tokenizer: Callable[[], Any]) -> dict[str, Any]:
        return {}

    def build(self, job: BuildJob) -> Built:
        d, data = job.recipe.data, job.raw()
        splits: dict[str, Any] = {}
        t_write = 0.0
        for name, ds in (("train", data.train), ("validation", data.validation)):
            missing = [f"data.{k} ({c!r})" for k, c in (("prompt_column", d.prompt_column),
                                                        ("chosen_column", d.chosen_column),
                                                        ("rejected_column", d.rejected_column))
                       if c not in ds.column_names]
            if missing:
                raise DataError(f"{', '.join(missing)}: not a column of the {name} data; its columns are "
                                f"{', '.join(ds.column_names)}. Set each to the column that holds it")
            prompts = [_text(p) for p in column(ds, d.prompt_column)]
            limit = d.max_train_samples if name == "train" else d.max_eval_samples
            shuffled, limit = (limit, None) if d.sample_selection == "shuffled" else (None, limit)
            both = [classification_arrays([p + _text(c) for p, c in zip(prompts, column(ds, key))], [0] * len(ds),
                                          job.tokenizer, d.max_length, limit, name)
                    for key in (d.chosen_column, d.rejected_column)]
            arr = PairArrays(input_ids=np.stack([b.input_ids for b in both], axis=1),
                             attention_mask=np.stack([b.attention_mask for b in both], axis=1))  # type: ignore[misc]
            # Counted by pair: a pair is cut when either of its texts is (its tokens are both texts').
            chosen, rejected = both
            cut = {"examples_read": len(chosen), "truncated": int((chosen.rows_cut | rejected.rows_cut).sum()),
                   **{k: chosen.cut[k] + rejected.cut[k] for k in ("tokens_before_cut", "tokens_cut")},
                   "longest": max(chosen.cut["longest"], rejected.cut["longest"])}
            if shuffled:
                arr = select_shuffled(arr, shuffled, d.sample_seed)
            arr.n_tokens = int(np.asarray(arr.attention_mask).sum())
            check_truncation(job.recipe, name, cut)
            t0 = time.perf_counter()
            arrays = write_arrays(job, name, {"input_ids": arr.input_ids, "attention_mask": arr.attention_mask})
            t_write += time.perf_counter() - t0
            splits[name] = {"examples": len(ds), "samples": len(arr), "tokens": arr.tokens, "arrays": arrays, **cut}
        return Built(splits, {"labels": {"num_labels": 1, "names": [SCORE_LABEL]}}, t_write)

    def load(self, arrays: dict[str, Any], spec: Any, directory: Path) -> PairArrays:
        return PairArrays(input_ids=arrays["input_ids"], attention_mask=arrays["attention_mask"], n_tokens=spec.tokens)


def _text(v: Any) -> str:
    return v if isinstance(v, str) else "" if v is None else str(v)


PAIRS = Pairs()
