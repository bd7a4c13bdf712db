"""``packed_text``: every text concatenated and cut into blocks of ``data.block_size`` tokens
(``run_clm.py``'s grouping), one sample per block, no example boundaries kept. Local .txt, .jsonl
and .parquet files with their own validation files are read a chunk at a time and never held
whole; a streamed run prepares its validation split only (the loader tokenizes the training
text as it goes)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from clustertune.data.blocks import discard_split, write_causal_lm_split
from clustertune.data.encode import EncoderChoice, TextEncoder, chunks_by_chars, probe_sample
from clustertune.data.manifest import MappedArrays
from clustertune.data.prepare import column
from clustertune.data.shapes.base import Built, BuildJob
from clustertune.data.sources import (CHUNKED_SUFFIXES, ArrowGaveUp, RawData, ReadAhead, as_text, load_validation,
                                      text_chunks_of_files)
from clustertune.recipe.schema import Recipe

log = logging.getLogger("clustertune")

# Characters of text read, tokenized and packed at a time: bounds a prepare's memory.
CHUNK_CHARS = 16 << 20

Source = Callable[[bool], Iterator[Sequence[str]]]


class PackedText:
    name = "packed_text"
    reads_text_column = True
    classifier_tokens = False

    def selection(self, recipe: Recipe) -> dict[str, Any]:
        return {}

    def processing(self, recipe: Recipe) -> dict[str, Any]:
        return {"block_size": recipe.data.block_size, "packing": "concat-all-drop-remainder", "special_tokens": True}

    def tokenizer_inputs(self, recipe: Recipe, tokenizer: Callable[[], Any]) -> dict[str, Any]:
        return {}

    def build(self, job: BuildJob) -> Built:
        """Tokenize and pack each split, writing its blocks while its texts are read."""
        d = job.recipe.data
        choice: list[EncoderChoice] = []
        chosen: list[TextEncoder] = []

        def encoder(chunk: Sequence[str]) -> TextEncoder:  # checked on the first chunk of text
            if not chosen:
                chosen.append(choice[0].on(probe_sample(chunk)))
            return chosen[0]

        splits: dict[str, Any] = {}
        for name, source in _sources(job.recipe, job.raw):
            limit = d.max_train_samples if name == "train" else d.max_eval_samples
            try:
                with ReadAhead(source(True)) as chunks:
                    if not choice:  # what the choice needs of the tokenizer alone, while the first chunk is read
                        choice.append(EncoderChoice(job.tokenizer, job.workers))
                    splits[name] = write_causal_lm_split(chunks, encoder, job.out, name, d.block_size, limit, job.files)
            except ArrowGaveUp as exc:
                log.info("data: Arrow cannot read the %s files (%s); reading them line by line", name, exc)
                discard_split(job.out, name, job.files)
                with ReadAhead(source(False)) as chunks:
                    splits[name] = write_causal_lm_split(chunks, encoder, job.out, name, d.block_size, limit, job.files)
        if chosen:
            log.info("data: tokenized with %s", chosen[0].engine)
        return Built(splits, write_seconds=sum(s.pop("write_seconds") for s in splits.values()))

    def load(self, arrays: dict[str, Any], spec: Any, directory: Path) -> MappedArrays:
        return MappedArrays(input_ids=arrays["input_ids"], n_tokens=spec.tokens)


def _sources(recipe: Recipe, raw: Callable[[], RawData]) -> list[tuple[str, Source]]:
    """Each split's texts, a chunk at a time (``source(arrow)``): files with their own
    validation files chunk by chunk; everything else (datasets, a validation split carved from
    the training rows) loaded, then cut into chunks."""
    d = recipe.data

    def loaded(ds: Any) -> Source:
        return lambda arrow: iter(chunks_by_chars([as_text(t) for t in column(ds, d.text_column)], CHUNK_CHARS))

    if d.streaming:  # the training text is tokenized on the fly by the loader
        return [("validation", loaded(load_validation(d)))]
    chunked = [list(d.train_files or []), list(d.validation_files or [])]
    if all(fs and all(Path(f).suffix.lower() in CHUNKED_SUFFIXES for f in fs) for fs in chunked):
        return [(name, lambda arrow, fs=fs, key=key: text_chunks_of_files(fs, d.text_column, key, CHUNK_CHARS, arrow,
                                                                          d.keep_linebreaks))
                for name, fs, key in (("train", chunked[0], "data.train_files"),
                                      ("validation", chunked[1], "data.validation_files"))]
    data = raw()
    return [("train", loaded(data.train)), ("validation", loaded(data.validation))]


PACKED_TEXT = PackedText()
