"""``labelled_text``: one sample per example, cut and padded to ``data.max_length``, with its
class id from ``data.label_column`` (``run_glue.py``'s reading of the labels; the label set is
read from the data and recorded in the manifest, where the model's head takes its size)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustertune.data.labels import LABEL_RULE, infer_labels
from clustertune.data.manifest import MappedArrays
from clustertune.data.prepare import prepare_split
from clustertune.data.shapes.base import Built, BuildJob, write_arrays
from clustertune.data.truncation import check_truncation
from clustertune.recipe.schema import Recipe


class LabelledText:
    name = "labelled_text"
    reads_text_column = True
    classifier_tokens = True

    def selection(self, recipe: Recipe) -> dict[str, Any]:
        d = recipe.data
        return {"label_column": d.label_column, "num_labels": recipe.model.num_labels,
                "labels": {"rule": LABEL_RULE, "names": d.label_names}}  # which id each label gets

    def processing(self, recipe: Recipe) -> dict[str, Any]:
        return {"max_length": recipe.data.max_length, "truncation": "right", "padding": "max_length"}

    def tokenizer_inputs(self, recipe: Recipe, tokenizer: Callable[[], Any]) -> dict[str, Any]:
        return {}

    def build(self, job: BuildJob) -> Built:
        data = job.raw()
        labels = infer_labels(job.recipe, {"train": data.train, "validation": data.validation}, data.origins)
        splits: dict[str, Any] = {}
        t_write = 0.0
        for name, ds in (("train", data.train), ("validation", data.validation)):
            arr = prepare_split(job.recipe, ds, job.tokenizer, name, job.workers, labels)
            check_truncation(job.recipe, name, arr.cut)
            t0 = time.perf_counter()
            arrays = write_arrays(job, name, {"input_ids": arr.input_ids, "attention_mask": arr.attention_mask,
                                              "labels": arr.labels})
            t_write += time.perf_counter() - t0
            splits[name] = {"examples": len(ds), "samples": len(arr), "tokens": arr.tokens, "arrays": arrays,
                            **arr.cut}
        return Built(splits, {"labels": labels.to_json()}, t_write)

    def load(self, arrays: dict[str, Any], spec: Any, directory: Path) -> MappedArrays:
        return MappedArrays(input_ids=arrays["input_ids"], attention_mask=arrays["attention_mask"],
                            labels=arrays["labels"], n_tokens=spec.tokens)


LABELLED_TEXT = LabelledText()
