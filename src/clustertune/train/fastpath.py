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


def prepare_module(model: torch.nn.Module, recipe: Recipe, mixed: str, compile_here: bool = True,
                   regional: bool = False) -> None:
    """Switches applied to the bare model before a strategy wraps it (in place); ``mixed`` is
    the run's precision as Accelerate names it (``no``, ``bf16``, ``fp16``). A strategy
    that compiles its own wrapper (DeepSpeed's ``engine.compile()``) passes ``compile_here=False``;
    one that hooks every block (FSDP) passes ``regional=True``."""
    if recipe.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if recipe.train.fused_gelu:
        fuse_tanh_gelu(model)
    if mixed != "no" and not (recipe.model.adapter and recipe.model.adapter.type == "qlora"):
        keep_half_inputs(model)
    attention = cpu_attention(recipe, mixed)
    if attention is not None and _set_attention(model, attention):
        log.info("attention: %s (training on CPU in bf16 at %d positions, where it is faster than sdpa; "
                 "set model.attn_implementation to choose)", attention, recipe.sequence_length)
    if compile_here and use_compile(recipe):
        compile_with_fallback(model, regional=regional, mode=recipe.train.compile_mode)


# transformers' tanh GELU written out as element-wise operations, and the same function as
# torch's fused GELU(approximate="tanh") (GPT-2's gelu_new; gelu_fast only factors it differently).
TANH_GELU_CLASSES = ("NewGELUActivation", "FastGELUActivation")
# Up to this many positions, eager attention beats SDPA on CPU under bf16 autocast (RESULTS.md:
# GPT-2 shapes, 7-13% of a LoRA step at 64-128 positions, 4% at 256; at 512 they are even).
CPU_EAGER_MAX_POSITIONS = 256


def fuse_tanh_gelu(model: torch.nn.Module) -> int:
    """Replace each of transformers' written-out tanh GELU modules by torch's one-kernel GELU
    (in place; the model's config is untouched, so a saved model names its own activation).
    One kernel forward and one backward instead of seven, and no saved intermediates. Returns
    how many were replaced."""
    swapped = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            kind = type(child)
            if kind.__name__ in TANH_GELU_CLASSES and kind.__module__ == "transformers.activations":
                setattr(parent, name, torch.nn.GELU(approximate="tanh"))
                swapped += 1
    return swapped


def keep_half_inputs(model: torch.nn.Module) -> int:
    """Under autocast over fp32 weights, PEFT's adapter layers cast a bf16/fp16 input up to
    their weights' fp32, and autocast casts it back down for the matrix product: two copies
    forward and two backward per layer, for the same result as none (bf16 -> fp32 -> bf16 is
    exact). This turns that cast off (in place; returns how many layers). Not for a 4-bit base:
    its layers hand half-precision outputs to the fp32 adapters outside autocast too."""
    layers = [m for m in model.modules() if hasattr(m, "cast_input_dtype_enabled")]
    for layer in layers:
        layer.cast_input_dtype_enabled = False
    return len(layers)


def cpu_attention(recipe: Recipe, mixed: str) -> str | None:
    """The attention kernel chosen for ``model.attn_implementation`` unset: ``eager`` when
    training on CPU in bf16 (``mixed``, Accelerate's name) at up to CPU_EAGER_MAX_POSITIONS
    positions, else None (the model's own)."""
    if recipe.model.attn_implementation is not None or on_gpu():
        return None
    if recipe.sequence_length > CPU_EAGER_MAX_POSITIONS or mixed != "bf16":
        return None
    return "eager"


def _set_attention(model: torch.nn.Module, attention: str) -> bool:
    """Switch a transformers model that now runs SDPA to ``attention``; False when it runs
    another kernel (a remote-code model, flash attention) or cannot switch."""
    config = getattr(model, "config", None)
    switch = getattr(model, "set_attn_implementation", None)
    if config is None or switch is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    switch(attention)
    return True


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
