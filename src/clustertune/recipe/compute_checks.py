"""Checks of the keys that change how a step computes (``train.compile_mode``, ``train.fp8``,
``train.group_by_length``) against the rest of the recipe: what each cannot be combined with, named before anything starts.
Whether a GPU can do it is each rank's to check (:mod:`clustertune.train.fp8`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clustertune.recipe.schema import Recipe

# The compile modes that record CUDA graphs.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def compute_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """Every problem of these keys, as (key, message) pairs."""
    return [*compile_problems(recipe), *fp8_problems(recipe), *grouping_problems(recipe)]


def compile_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """A compile mode the run cannot use."""
    t, traits, key = recipe.train, recipe.traits, "train.compile_mode"
    if t.compile_mode == "default":
        return []
    if traits.trainer == "trl":
        return [(key, f"{t.compile_mode}: task {recipe.task} trains with TRL's own loop, which clustertune does not "
                 "compile; drop it")]
    if t.compile is False:
        return [(key, f"{t.compile_mode} with train.compile: false compiles nothing; drop one of them")]
    out: list[tuple[str, str]] = []
    if t.compile_mode in CUDA_GRAPH_MODES:
        if not traits.fixed_shapes:
            out.append((key, f"{t.compile_mode} replays CUDA graphs of one batch shape, and task {recipe.task} cuts "
                        "each batch to its longest row: use max-autotune-no-cudagraphs"))
        if t.strategy != "ddp":
            out.append((key, f"{t.compile_mode} replays CUDA graphs, which need parameters that stay in place, and "
                        f"strategy {t.strategy} gathers them into new memory each step: use "
                        "max-autotune-no-cudagraphs, or strategy ddp"))
    return out


def fp8_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """What ``train.fp8`` cannot be combined with (the GPU itself is checked on each rank)."""
    t = recipe.train
    if not t.fp8:
        return []
    why = ("TRL's trainers run their own loop" if recipe.traits.trainer == "trl" else
           "it converts the layers a full fine-tune trains; with an adapter the base is frozen (QLoRA saves "
           "its memory instead)" if recipe.model.adapter is not None else
           "DeepSpeed's engine does not train torchao's FP8 layers: use strategy ddp or fsdp"
           if t.strategy == "deepspeed" else
           f"it multiplies in FP8 inside bf16 autocast; precision {t.precision} has none: use bf16 (or auto)"
           if t.precision in ("fp32", "fp16") else None)
    return [] if why is None else [("train.fp8", why)]


def _nothing_to_group(recipe: Recipe) -> str | None:
    """Why this recipe's rows all have one length (the fix ends the sentence), or None when they differ."""
    traits = recipe.traits
    return (f"task {recipe.task} trains with TRL's own loop, which orders the samples itself; drop it"
            if traits.trainer == "trl"
            else f"task {recipe.task} trains on rows of one length (blocks of data.block_size, or texts padded to "
                 "data.max_length): there is nothing to group; drop it" if traits.fixed_shapes
            else "data.sft.packing fills every row to about data.max_length: there is nothing to group; drop it"
            if recipe.data.sft.packing else None)


def groups_by_length(recipe: Recipe) -> bool:
    """Whether the loop batches rows of similar length: ``train.group_by_length`` when set, else
    wherever rows differ in length (chat SFT without packing, reward pairs)."""
    g = recipe.train.group_by_length
    return g if g is not None else _nothing_to_group(recipe) is None


def grouping_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """``train.group_by_length: true`` where every row has one length (nothing to group)."""
    why = _nothing_to_group(recipe) if recipe.train.group_by_length else None
    return [] if why is None else [("train.group_by_length", why)]
