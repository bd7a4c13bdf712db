"""The fast default path on a GPU: torch.compile, fused AdamW, a padded vocabulary.

Each is a recipe switch whose unset value means "on where it is safe": on a CUDA device,
off on CPU (where compile buys little and costs a long first step). A compile failure never
stops training: the model falls back to eager mode and the log says why.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from clustertune.recipe.schema import Recipe

log = logging.getLogger("clustertune")

GPU_VOCAB_MULTIPLE = 64


def on_gpu() -> bool:
    return torch.cuda.is_available()


def use_compile(recipe: Recipe) -> bool:
    c = recipe.train.compile
    return on_gpu() if c is None else c


def use_fused_adamw(recipe: Recipe) -> bool:
    f = recipe.train.fused_adamw
    return on_gpu() if f is None else f


def vocab_multiple(recipe: Recipe) -> int:
    """Round a fresh model's vocabulary up to this (pretrained vocabularies are left alone)."""
    if recipe.model.config is None:
        return 1
    m = recipe.train.pad_vocab_multiple
    return (GPU_VOCAB_MULTIPLE if on_gpu() else 1) if m is None else m


def pad_vocab(config: Any, multiple: int) -> None:
    """Round ``config.vocab_size`` up; the extra rows are never a label, so they only cost memory."""
    if multiple > 1 and isinstance(getattr(config, "vocab_size", None), int):
        config.vocab_size = int(math.ceil(config.vocab_size / multiple) * multiple)


def prepare_module(model: torch.nn.Module, recipe: Recipe, compile_here: bool = True, regional: bool = False) -> None:
    """Switches applied to the bare model before a strategy wraps it (in place). A strategy
    that compiles its own wrapper (DeepSpeed's ``engine.compile()``) passes ``compile_here=False``;
    one that hooks every block (FSDP) passes ``regional=True``."""
    if recipe.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if compile_here and use_compile(recipe):
        compile_with_fallback(model, regional=regional, mode=recipe.train.compile_mode)


def compile_kwargs(mode: str) -> dict[str, Any]:
    """``torch.compile``'s keywords for ``train.compile_mode`` (``default`` passes none)."""
    return {} if mode == "default" else {"mode": mode}


def compile_with_fallback(model: torch.nn.Module, regional: bool = False, backend: str = "inductor",
                          mode: str = "default") -> None:
    """Compile ``model`` in place; on a compile error, try the next way and say why: a
    ``mode`` other than ``default`` falls back to ``default``, and that to eager mode.

    Whole (the default): ``model.forward`` is compiled into one graph. Regional: each repeated
    block and each other leaf module is compiled in place (accelerate's ``compile_regions_fsdp2``),
    the top-level forward stays eager. FSDP needs the regional way: its hooks run around every
    sharded block and a whole-model graph breaks at each of them (13 breaks and 16 graphs for
    GPT-2 124M on an H100), while compiled blocks keep the hooks outside their graphs.

    Only the instance's ``forward`` is replaced (and, regionally, each module's compiled call),
    so parameter names, state dicts and ``save_pretrained`` are those of the plain model.
    Compilation happens at the first call, so that is where failures surface; errors after a
    successful first call are not compile failures and propagate.
    """
    from accelerate.utils.other import compile_regions_fsdp2, has_repeated_blocks

    eager = model.forward
    regional = regional and has_repeated_blocks(model)  # the top level is then never a compiled leaf
    modes = [mode] if mode == "default" else [mode, "default"]
    regions: list[torch.nn.Module] = []

    def build(how: str) -> Any:
        if not regional:
            return torch.compile(eager, backend=backend, **compile_kwargs(how))
        compile_regions_fsdp2(model, backend=backend, **compile_kwargs(how))
        regions[:] = [m for m in model.modules() if getattr(m, "_compiled_call_impl", None) is not None]
        log.info("compile: %d regions (each repeated block and each other leaf module)", len(regions))
        return eager  # the compiled regions are inside it

    state: dict[str, Any] = {"calls": 0, "call": build(modes[0])}

    def forward(*args: Any, **kwargs: Any) -> Any:
        while state["call"] is not None:
            try:
                out = state["call"](*args, **kwargs)
            except Exception as exc:
                # Only a failure of compilation itself falls back. Out-of-memory, CUDA and NCCL
                # errors on the first call are the step's own and would recur in eager mode.
                if state["calls"] > 0 or not _is_compile_error(exc):
                    raise
                for region in regions:  # back to each module's own call
                    region._compiled_call_impl = None
                failed = modes.pop(0)
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                then = (f"compiling in mode {modes[0]} instead" if modes else
                        "training continues in eager mode (set train.compile=false to skip the attempt)")
                log.warning("torch.compile%s failed (%s: %s); %s", "" if failed == "default" else f" in mode {failed}",
                            type(exc).__name__, first[:300], then)
                state["call"] = build(modes[0]) if modes else None
                continue
            state["calls"] += 1
            return out
        return eager(*args, **kwargs)

    model.forward = forward  # type: ignore[method-assign]


def _is_compile_error(exc: BaseException) -> bool:
    """Raised by dynamo or inductor (or by something they call, re-raised by them)."""
    if isinstance(exc, torch.OutOfMemoryError):
        return False
    mod = type(exc).__module__ or ""
    return mod.startswith(("torch._dynamo", "torch._inductor"))
