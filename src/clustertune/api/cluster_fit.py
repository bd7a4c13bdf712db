"""Will the run's state fit the cluster's GPUs? ``estimate-memory``'s figure for the recipe's own
strategy against one GPU's memory, and, when it does not fit, the smallest changes that would:
each suggestion is a set of overrides the user can type, and each is estimated again before it
is printed.
"""

from __future__ import annotations

from dataclasses import dataclass

from clustertune.errors import UserError
from clustertune.launch.submit import resolve_base_model
from clustertune.recipe.load import load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.train import memory

GiB = 1024**3
# The share of a GPU's memory the run's state may take: the CUDA context, the allocator's
# fragmentation and temporary buffers take the rest (as `estimate-memory` counts it).
USABLE = 0.9

# The ways of holding the state, as overrides; tried after the recipe's own, lightest first.
STRATEGY_OVERRIDES: dict[str, tuple[str, ...]] = {
    "zero2": ("train.strategy=deepspeed", "train.zero_stage=2"),
    "fsdp": ("train.strategy=fsdp",),
    "zero3": ("train.strategy=deepspeed", "train.zero_stage=3"),
    "zero2+offload": ("train.strategy=deepspeed", "train.zero_stage=2", "train.offload=optimizer"),
    "zero3+offload": ("train.strategy=deepspeed", "train.zero_stage=3", "train.offload=params"),
}


@dataclass(frozen=True)
class Fit:
    needs: int  # bytes per GPU under the recipe's strategy
    has: int  # the GPU's memory in bytes
    strategy: str
    suggestions: tuple[tuple[tuple[str, ...], int], ...] = ()  # (overrides, bytes per GPU), each fits

    @property
    def fits(self) -> bool:
        return self.needs <= USABLE * self.has


def _needs(recipe: Recipe, world: int) -> tuple[int, str]:
    estimated, _, _, rows = memory.estimate_recipe(recipe, world, memory.STRATEGIES)
    key = memory.strategy_key(estimated.train)
    return next(r for r in rows if r.strategy == key).device_total, key


def _variant(recipe: Recipe, overrides: tuple[str, ...]) -> Recipe | None:
    try:
        return load_recipe(recipe.explicit_plain(), list(overrides))
    except UserError:  # not a change this recipe can take (e.g. an adapter on a fresh model)
        return None


def _candidates(recipe: Recipe, world: int, strategy: str) -> list[tuple[str, ...]]:
    t = recipe.train
    out: list[tuple[str, ...]] = []
    if not t.gradient_checkpointing:
        out.append(("train.gradient_checkpointing=true",))
    b = t.batch_size
    while b > 1:  # a smaller micro-batch, the same batch per step through accumulation
        b //= 2
        out.append((f"train.batch_size={b}",
                    f"train.gradient_accumulation_steps={t.gradient_accumulation_steps * (t.batch_size // b)}"))
    ladder = list(STRATEGY_OVERRIDES)
    if strategy in ladder:
        ladder = ladder[ladder.index(strategy) + 1:]
    # Sharding divides the state over the ranks: with one rank only the offloads help.
    out += [STRATEGY_OVERRIDES[s] for s in ladder if world > 1 or "offload" in s]
    if recipe.model.adapter is None:
        out.append(("model.adapter.type=lora",))
    return out


def fit(recipe: Recipe, world: int, gpu_bytes: int, most: int = 3) -> Fit:
    """The recipe's need per GPU against ``gpu_bytes``; when it does not fit, up to ``most``
    changes that would, each estimated again (the first the smallest one)."""
    recipe = resolve_base_model(recipe, train_missing=False)  # a run:<run> base (a dry run's is still named)
    needs, strategy = _needs(recipe, world)
    found = Fit(needs, gpu_bytes, strategy)
    if found.fits:
        return found
    suggestions = []
    for overrides in _candidates(recipe, world, strategy):
        variant = _variant(recipe, overrides)
        if variant is None:
            continue
        bytes_, _ = _needs(variant, world)
        if bytes_ <= USABLE * gpu_bytes:
            suggestions.append((overrides, bytes_))
            if len(suggestions) >= most:
                break
    return Fit(needs, gpu_bytes, strategy, tuple(suggestions))


def gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"
