"""``chats``: one sample per conversation or prompt/completion pair, rendered through a chat
template (part of the fingerprint, and saved with the entry's tokenizer so the model chats as
it was trained), the loss on the answer tokens only, packed into rows when ``data.sft.packing``
(:mod:`clustertune.data.sft`). The examples carry messages, not ``data.text_column``; the
validation split keeps held-out prompts for the generation check."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustertune.data.manifest import file_entry
from clustertune.data.packing import SFTArrays, read_generation, write_generation
from clustertune.data.sft import checked_conversations, sft_split
from clustertune.data.shapes.base import Built, BuildJob, write_arrays
from clustertune.data.templates import BUILTIN_TEMPLATES, ChatRenderer, resolve_template, template_digest
from clustertune.recipe.schema import Recipe


def chat_template(recipe: Recipe, tokenizer: Callable[[], Any]) -> str:
    """The template's text: a builtin's (no tokenizer loaded), else what ``data.sft.chat_template``
    resolves to with the tokenizer."""
    spec = recipe.data.sft.chat_template
    return BUILTIN_TEMPLATES[spec] if spec in BUILTIN_TEMPLATES else resolve_template(spec, tokenizer())


class Chats:
    name = "chats"
    reads_text_column = False
    classifier_tokens = False

    def selection(self, recipe: Recipe) -> dict[str, Any]:
        return {}

    def processing(self, recipe: Recipe) -> dict[str, Any]:
        d = recipe.data
        # Format (3: held-out prompts keep their conversations), columns, masking rule (loss_on),
        # packing, too_long and the generation prompts;
        # the template's text joins the inputs where the tokenizer is known.
        proc: dict[str, Any] = {"max_length": d.max_length, "sft": d.sft.model_dump(mode="json"), "sft_format": 3}
        if d.sft.role_order != "alternate":
            proc["role_order"] = d.sft.role_order  # which conversations are accepted (absent: the default)
        return proc

    def tokenizer_inputs(self, recipe: Recipe, tokenizer: Callable[[], Any]) -> dict[str, Any]:
        # The template decides the bytes; the tokenizer's content hash leaves it out.
        return {"chat_template": template_digest(chat_template(recipe, tokenizer))}

    def build(self, job: BuildJob) -> Built:
        data, tk = job.raw(), job.tokenizer
        tk.chat_template = chat_template(job.recipe, lambda: tk)  # saved with the tokenizer
        renderer = ChatRenderer(tk.chat_template, tk)
        chosen: list[Any] = []  # the SFT encoder, chosen on the training split's texts
        convs = checked_conversations(job.recipe, {"train": data.train, "validation": data.validation}, data.origins)
        splits: dict[str, Any] = {}
        t_write = 0.0
        for name, ds in (("train", data.train), ("validation", data.validation)):
            arr, extra = sft_split(job.recipe, ds, tk, name, renderer, job.workers, chosen, data.origins.get(name),
                                   convs[name])
            t0 = time.perf_counter()
            arrays = write_arrays(job, name, {"input_ids": arr.input_ids, "loss_mask": arr.loss_mask,
                                              "position_ids": arr.position_ids, "lengths": arr.lengths})
            extra["packed"] = bool(arr.packed)
            if arr.generation:  # the held-out prompts of the generation check
                fname = f"{name}.generation.json"
                job.files[fname] = file_entry(write_generation(job.out / fname, arr))
                extra["generation_file"] = fname
            t_write += time.perf_counter() - t0
            splits[name] = {"examples": len(ds), "samples": len(arr), "tokens": arr.tokens, "arrays": arrays, **extra}
        return Built(splits, write_seconds=t_write)

    def load(self, arrays: dict[str, Any], spec: Any, directory: Path) -> SFTArrays:
        gen, marker = read_generation(directory / spec.generation_file) if spec.generation_file else ([], "")
        return SFTArrays(input_ids=arrays["input_ids"], loss_mask=arrays["loss_mask"],
                         position_ids=arrays["position_ids"], lengths=arrays["lengths"], packed=spec.packed,
                         n_tokens=spec.tokens, generation=gen, end_marker=marker)


CHATS = Chats()
