"""How much device memory a recipe needs per device, for each training strategy.

The model is built on the meta device (its real structure, no memory, no download beyond the
config), so the parameter count is exact, tensor by tensor. Per parameter, training with AdamW
keeps the weights, their gradients and the optimizer state (AdamW's two moments in fp32, 8
bytes). How each strategy holds them, per device, over ``W`` devices (``S`` is the sum of each
tensor's shard, ``ceil(n / W)``: every tensor is split on its own, so the first ranks hold the
remainders):

- DDP: everything whole: 4 bytes of weights, 4 of gradients, 8 of optimizer state (another
  ``train.optimizer`` holds its own: :func:`optimizer_state_bytes`).
- FSDP (full shard): weights, gradients and optimizer state of ``S`` elements; mixed precision
  autocasts the compute, the sharded weights stay fp32. Gradients stay sharded between
  micro-batches too (the loop reduce-scatters after each one under FSDP). With ``offload`` all
  three live in host memory.
- DeepSpeed ZeRO keeps its own fp32 master copy of the weights it steps, beside the model's
  weights (which are bf16 under mixed precision). ZeRO-1/2: the model's weights are whole on
  every device; ZeRO-1 keeps whole gradients, ZeRO-2 only this rank's partition of them; the
  master copy and the moments are partitioned (12 bytes per element of the partition). In fp32
  the master copy is still a separate tensor (DeepSpeed clones it).
- ZeRO-3 partitions the weights too, except that parameters smaller than
  ``stage3_param_persistence_threshold`` elements (DeepSpeed's default 100,000) are also kept
  whole on every rank, so that it need not gather them for every layer. Its fp32 master
  partition is a tensor of its own as well (measured so in fp32 on CPU; DeepSpeed may share
  it with the weight partitions in fp32 on a GPU, where this overestimates by 4 bytes per
  partition element).
- Offload (``zero2+offload``: optimizer; ``zero3+offload``: optimizer and parameters): the
  master copy, the moments and the gradient partitions live in host memory; ZeRO-2 keeps one
  partition-sized buffer on the device for copying the updated weights back; ZeRO-3 with
  parameter offload keeps only the persistent parameters whole on the device.

Adapters (``model.adapter``): the frozen base keeps only its weights (no gradients, no optimizer
state); gradients and optimizer state follow the trainable parameters alone, sharded or
partitioned the same way (DeepSpeed flattens only trainable parameters into its buffers, but
ZeRO-3 partitions the frozen weights too). QLoRA's base Linear weights are 4-bit NF4: half a byte
per weight, plus the quantization state bitsandbytes keeps per layer (one 8-bit absmax per block
of 64 weights, an fp32 absmax per 256 of those, and its 16- and 256-entry fp32 code tables).

DDP's gradient buckets (a copy of every trainable gradient, over more than one device: the
buckets, ``bucket_cap_mb`` = 25 MB each by default, together cover them all) and, under mixed
precision, autocast's 16-bit copies of the trainable weights and biases that matrix products use
(Linear and Conv1D layers, the output head; embeddings and norms stay fp32, frozen weights are
cast anew at each use) are counted as ``buffers``. DeepSpeed's
communication buckets (``reduce_bucket_size``) and the CUDA context are not counted:
``estimate-memory`` leaves ~10% of the device for them.

These figures are checked per rank against the tensors a real 2-rank run holds after its first
step under FSDP, ZeRO-2, ZeRO-3 and ZeRO-2 with optimizer offload (fp32, on CPU), for three
model sizes. The mixed-precision variants follow the same layouts with 2-byte model weights.

Activations are an estimate (they depend on kernels, which the arithmetic cannot see): per layer
and token, about ``34·h`` values kept for the backward pass with fused attention (the attention
matrix itself is not kept), ``2·h`` with activation checkpointing (the layer input, plus one
layer's full set during recomputation); the figure is in bytes for 16-bit activations (fp32
doubles it). Plus the logits and their gradient in fp32, ``8·V`` bytes per token, and under mixed
precision their 16-bit versions too (``12·V`` in all).
"""

from __future__ import annotations

import math

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from clustertune.models.heads import auto_class, head_of
from clustertune.models.build import resolve_config
from clustertune.recipe.ds_config import deepspeed_config, with_deepspeed_json
from clustertune.models.adapters import apply_adapter, quantized_linear_numels

GiB = 1024**3
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp+offload", "zero2+offload", "zero3+offload")
# The memory ladder the out-of-memory message walks down, one rung at a time.
LADDER = ("ddp", "zero2", "zero3", "zero3+offload")
# DeepSpeed's default stage3_param_persistence_threshold (elements).
ZERO3_PERSISTENCE_THRESHOLD = 100_000

# Memory of common GPUs, by a substring of the device name (GiB as vendors state them, in GB).
DEVICE_MEMORY_GB: dict[str, float] = {
    "H200": 141, "H100": 80, "A100-80": 80, "A100": 40, "L40S": 48, "A10G": 24, "RTX 4090": 24, "V100": 32,
}


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device (and per host, for offloaded state) under one strategy."""

    strategy: str
    params: int
    grads: int
    optimizer: int
    activations: int
    host: int  # offloaded state, kept in the host's memory (per device's share)
    # Working copies beside the state: DDP's gradient buckets, autocast's 16-bit weight copies.
    buffers: int = 0

    @property
    def device_total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations + self.buffers


@dataclass(frozen=True)
class ModelShape:
    n_params: int
    layers: int
    hidden: int
    vocab: int
    # Element count of each distinct parameter tensor: sharding splits tensors one by one.
    numels: tuple[int, ...] = field(default=(), repr=False)
    # With an adapter: the element counts of the trainable tensors (None: every parameter trains).
    trainable_numels: tuple[int, ...] | None = field(default=None, repr=False)
    # QLoRA: element counts of the base weights held in 4 bits.
    quantized_numels: tuple[int, ...] = field(default=(), repr=False)
    # Elements of the trainable weights and biases that matrix products use (Linear and Conv1D
    # layers, the output head): those autocast keeps a 16-bit copy of. None: every trainable one.
    autocast_numels: int | None = None
    # The shape of each distinct trainable tensor (optimizer state that is not per element needs it);
    # empty: taken as vectors of ``trainable_numels`` / ``numels``.
    trained_dims: tuple[tuple[int, ...], ...] = field(default=(), repr=False)

    def trained_shapes(self) -> tuple[tuple[int, ...], ...]:
        if self.trained_dims:
            return self.trained_dims
        counts = self.trainable_numels if self.trainable_numels is not None else (self.numels or (self.n_params,))
        return tuple((k,) for k in counts)

    @property
    def autocast_copied(self) -> int:
        return self.trainable if self.autocast_numels is None else self.autocast_numels

    def shard(self, world: int) -> int:
        """Elements of one rank's shards: each tensor split on its own, rounded up."""
        if not self.numels:
            return -(-self.n_params // world)
        return sum(-(-n // world) for n in self.numels)

    @property
    def trainable(self) -> int:
        return self.n_params if self.trainable_numels is None else sum(self.trainable_numels)

    def trainable_shard(self, world: int) -> int:
        if self.trainable_numels is None:
            return self.shard(world)
        return sum(-(-n // world) for n in self.trainable_numels)

    def whole_weight_bytes(self, per: int = 4) -> int:
        """Bytes of every weight held whole (``per`` bytes each), the 4-bit ones at their quantized size."""
        q = sum(self.quantized_numels)
        return per * (self.n_params - q) + sum(nf4_bytes(n) for n in self.quantized_numels)

    def sharded_weight_bytes(self, world: int, per: int = 4, threshold: int | None = None) -> int:
        """One rank's bytes of weights sharded tensor by tensor (FSDP, ZeRO-3): of each 4-bit weight
        its shard of the packed values plus the whole quantization state (kept on every rank).
        ``threshold``: ZeRO-3 also keeps tensors smaller than it whole on every rank."""
        def whole(n: int) -> int:
            return n if threshold is not None and n < threshold else 0

        rest = Counter(self.numels) - Counter(self.quantized_numels)
        total = sum(k * per * (_ceil(n, world) + whole(n)) for n, k in rest.items())
        for n in self.quantized_numels:
            packed = _ceil(n, 2)  # two 4-bit values per byte, sharded as bytes
            total += _ceil(packed, world) + whole(packed) + nf4_bytes(n) - packed
        return total

    def small(self, threshold: int) -> int:
        """Elements in tensors smaller than ``threshold`` (ZeRO-3 keeps them whole)."""
        return sum(n for n in self.numels if n < threshold)


# bitsandbytes keeps 8-bit state only for tensors of at least this many elements (min_8bit_size);
# smaller ones get AdamW's two fp32 moments.
BNB_MIN_8BIT = 4096
BNB_BLOCK = 256  # elements per fp32 absmax of its blockwise quantization


def optimizer_state_bytes(shapes: Iterable[tuple[int, ...]], optimizer: str = "adamw", momentum: float = 0.9) -> int:
    """Bytes of ``train.optimizer``'s state for tensors of these shapes: AdamW two fp32 moments
    (8 bytes an element); SGD one momentum buffer (4, none without momentum); the 8-bit AdamWs
    two uint8 moments with an fp32 absmax per block and their two 256-entry code tables (tensors
    under 4,096 elements as AdamW); Adafactor an fp32 row and column factor per matrix and a
    whole second moment for vectors."""
    total = 0
    for shape in shapes:
        n = math.prod(shape)
        if optimizer == "sgd":
            total += 4 * n if momentum > 0 else 0
        elif optimizer == "adafactor":
            total += 4 * (math.prod(shape[:-1]) + math.prod(shape[:-2]) * shape[-1]) if len(shape) >= 2 else 4 * n
        elif optimizer in ("adamw_8bit", "paged_adamw_8bit") and n >= BNB_MIN_8BIT:
            total += 2 * n + 2 * 4 * _ceil(n, BNB_BLOCK) + 2 * 256 * 4
        else:
            total += 8 * n
    return total


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def nf4_bytes(n: int) -> int:
    """One Linear weight of ``n`` elements in bitsandbytes' NF4 with double quantization: packed
    4-bit values, an 8-bit absmax per block of 64, an fp32 absmax per 256 blocks and the offset,
    and the NF4 (16) and 8-bit (256) fp32 code tables."""
    blocks = -(-n // 64)
    return -(-n // 2) + blocks + 4 * -(-blocks // 256) + 4 + 4 * (16 + 256)


def model_shape(config: Any, task: str, recipe: Any = None) -> ModelShape:
    """Exact parameter count of the model ``config`` describes (built on the meta device), with
    the recipe's adapter when it has one."""
    auto = auto_class(head_of(task))
    adapter = recipe.model.adapter if recipe is not None else None
    with torch.device("meta"):
        model = auto.from_config(config)
        quantized: tuple[int, ...] = ()
        if adapter is not None:
            if adapter.type == "qlora":
                quantized = quantized_linear_numels(model)
            # On the meta device the base stays unquantized; the trainable set is the same.
            # (token rows given as strings need the tokenizer: only their number matters here)
            meta_adapter = adapter.model_copy(update={
                "type": "lora" if adapter.type == "qlora" else adapter.type,
                "trainable_token_indices": list(range(len(adapter.trainable_token_indices)))})
            plain = recipe.model.model_copy(update={"adapter": meta_adapter})
            model = apply_adapter(recipe.model_copy(update={"model": plain}), model, None)
    return shape_of(model, config, quantized)


def shape_of(model: torch.nn.Module, config: Any, quantized: tuple[int, ...] = ()) -> ModelShape:
    # Tied weights are one tensor: count each distinct parameter once, as the optimizer does.
    params = list({id(p): p for p in model.parameters()}.values())
    numels = tuple(p.numel() for p in params)
    frozen = any(not p.requires_grad for p in params)
    trainable = tuple(p.numel() for p in params if p.requires_grad) if frozen else None
    layers = _first_int(config, "n_layer", "num_hidden_layers", "num_layers") or 0
    hidden = _first_int(config, "n_embd", "hidden_size", "d_model") or 0
    vocab = _first_int(config, "vocab_size") or 0
    dims = tuple(tuple(p.shape) for p in params if p.requires_grad)
    return ModelShape(sum(numels), layers, hidden, vocab, numels, trainable, quantized, matmul_elements(model), dims)


def matmul_elements(model: torch.nn.Module) -> int:
    """Elements of the trainable parameters autocast casts to 16 bits and caches for the step:
    weights and biases of Linear and Conv1D (GPT-2's) layers and of the output head (an
    embedding tied to it included). Autocast caches casts of trainable leaf tensors only (a
    frozen base is cast anew at each use, one layer at a time); embedding lookups and norms run
    on the fp32 weights."""
    seen: dict[int, int] = {}
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)) or type(module).__name__ == "Conv1D" \
                or module is head:
            for p in module.parameters(recurse=False):
                if p.requires_grad:
                    seen[id(p)] = p.numel()
    return sum(seen.values())


def _first_int(config: Any, *names: str) -> int | None:
    for name in names:
        v = getattr(config, name, None)
        if isinstance(v, int):
            return v
    return None


def activation_bytes(shape: ModelShape, micro_batch: int, seq: int, mixed: bool, checkpointing: bool,
                     causal_lm: bool) -> int:
    tokens = micro_batch * seq
    per_token_layer = (2 if checkpointing else 34) * shape.hidden
    if checkpointing:  # one layer is recomputed in full during its backward
        per_token = shape.layers * per_token_layer + 34 * shape.hidden
    else:
        per_token = shape.layers * per_token_layer
    # 34·h is already bytes (per token and layer, for 16-bit activations): fp32 doubles it.
    act = tokens * per_token * (1 if mixed else 2)
    if causal_lm:
        # Logits and their gradient in fp32 (8 bytes per vocabulary entry); under mixed precision
        # also the 16-bit logits the head computes and their 16-bit gradient (4 more).
        act += tokens * shape.vocab * (12 if mixed else 8)
    return int(act)


def estimate(shape: ModelShape, strategy: str, world: int, activations: int, mixed: bool = False,
             persistence_threshold: int = ZERO3_PERSISTENCE_THRESHOLD, optimizer: str = "adamw",
             momentum: float = 0.9) -> MemoryEstimate:
    """Per-device bytes for ``strategy`` over ``world`` devices (see the module's notes; the
    optimizer's state by :func:`optimizer_state_bytes`, DeepSpeed's always AdamW's).
    ``mixed``: DeepSpeed holds the model's weights in 2 bytes (bf16/fp16) beside its fp32 master."""
    n, w = shape.n_params, max(1, world)
    s = shape.shard(w)
    # Gradients and optimizer state exist for trainable weights only (all of them without an adapter).
    t, st = shape.trainable, shape.trainable_shard(w)
    ds_weight = 2 if mixed else 4  # bytes of a model weight under DeepSpeed
    host = 0
    trained = shape.trained_shapes()
    if strategy == "ddp":
        p, g, o = shape.whole_weight_bytes(), 4 * t, optimizer_state_bytes(trained, optimizer, momentum)
    elif strategy == "fsdp":  # FSDP2 shards each tensor on its first dimension
        o = optimizer_state_bytes(((_ceil(d[0], w), *d[1:]) for d in trained), optimizer, momentum)
        p, g = shape.sharded_weight_bytes(w), 4 * st
    elif strategy == "fsdp+offload":
        o = optimizer_state_bytes(((_ceil(d[0], w), *d[1:]) for d in trained), optimizer, momentum)
        p, g, host, o = 0, 0, 4 * s + 4 * st + o, 0
    elif strategy in ("zero1", "zero2"):
        part = -(-t // w)  # ZeRO-1/2 split one flat buffer of all trainable weights
        p, g = shape.whole_weight_bytes(ds_weight), (ds_weight * t if strategy == "zero1" else 4 * part)
        o = 12 * part
    elif strategy == "zero2+offload":
        part = -(-t // w)
        p, g, o, host = ds_weight * n + ds_weight * part, 0, 0, 16 * part
    elif strategy == "zero3":
        p, g, o = shape.sharded_weight_bytes(w, ds_weight, persistence_threshold), 4 * st, 12 * st
    elif strategy == "zero3+offload":
        whole = shape.small(persistence_threshold)
        p, g, o, host = ds_weight * whole, 0, 0, ds_weight * s + 16 * st
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    buffers = 0
    if strategy == "ddp":
        # DDP all-reduces through buckets that copy every gradient (fp32); autocast keeps a
        # 16-bit copy of each weight it casts for the forward and backward.
        # Buckets cover the trainable parameters only (their total is every gradient, whatever
        # bucket_cap_mb, 25 MB by default, makes of each); autocast caches only casts of
        # trainable weights used in matrix products.
        buffers = (4 * t if w > 1 else 0) + (2 * shape.autocast_copied if mixed else 0)
    return MemoryEstimate(strategy, p, g, o, activations, host, buffers)


# The model of build-time host memory that tests/integration/test_strategies.py checks each rank's measured ``built`` against.
def build_host_bytes(shape: ModelShape, strategy: str, world: int, rank: int, adapter: bool = False) -> int:
    """Host bytes one rank's model holds once built (fp32, before the strategy prepares it):
    under FSDP over more than one process without an adapter only rank 0 builds the real model
    and the others its structure on the meta device; under ZeRO-3 likewise each rank builds
    only its partitions (a fresh model's rank 0 holds it whole for a moment, to draw its initial
    values); every other way, each rank builds it whole."""
    if world > 1 and not adapter:
        if strategy.startswith("fsdp") and rank != 0:
            return 0
        if strategy.startswith("zero3"):
            return shape.sharded_weight_bytes(world)
    return shape.whole_weight_bytes()


def gpu_notes(precision: str, strategy: str, world: int, adapter: bool = False) -> list[str]:
    """Which of the figures hold on GPUs only, and what each rank's host holds at build
    (``strategy``: the recipe's key in STRATEGIES, e.g. ``zero3+offload``)."""
    notes = []
    if precision == "auto":
        notes.append("GPU only: precision auto is counted as mixed precision (bf16, or fp16 where bf16 is missing), "
                     "as on every GPU; on CPU it is fp32 (activations and logits double, no autocast copies)")
    if precision != "fp32":
        notes.append("GPU only (mixed precision): buffers hold autocast's 16-bit copies of the trainable matmul "
                     "weights (DDP), activations are 16-bit and the logits have a 16-bit version beside the fp32 ones")
    if world > 1:
        notes.append("DDP's buffers include its gradient buckets (a copy of every trainable gradient), on any device")
    if strategy.startswith("fsdp") and world > 1 and not adapter:
        notes.append("host memory at build: the whole fp32 model on rank 0 only (the other ranks build it on the meta "
                     "device and receive their shards)")
    elif strategy.startswith("zero3") and world > 1 and not adapter:
        notes.append("host memory at build: each rank builds only its fp32 partitions (deepspeed.zero.Init); "
                     "a model made fresh from a config is also whole on rank 0 for a moment, to draw its initial values")
    else:
        notes.append("host memory at build: the whole fp32 model on every rank")
    return notes


def strategy_key(t: Any) -> str:
    """The name (one of STRATEGIES) of the way a recipe's ``train`` section holds the state."""
    offload = t.effective_offload
    if t.strategy == "ddp":
        return "ddp"
    if t.strategy == "fsdp":
        return "fsdp+offload" if offload != "none" else "fsdp"
    stage = t.effective_zero_stage
    if stage == 0:
        return "ddp"  # DeepSpeed's engine without ZeRO: every rank holds everything, as under DDP
    if offload == "none":
        return f"zero{stage}"
    return "zero3+offload" if stage == 3 else "zero2+offload"


def persistence_threshold(recipe: Any, world: int, mixed_precision: str) -> int:
    """ZeRO-3's threshold as the run's DeepSpeed config sets it (a user JSON may change it)."""
    if recipe.train.strategy != "deepspeed":
        return ZERO3_PERSISTENCE_THRESHOLD

    # Without the world size: the ZeRO section does not depend on it, and an estimate for another
    # number of devices (--devices) is no run whose batch a JSON's train_batch_size must fit.
    zero = deepspeed_config(recipe, None, mixed_precision).get("zero_optimization", {})
    value = zero.get("stage3_param_persistence_threshold", ZERO3_PERSISTENCE_THRESHOLD)
    return int(value) if isinstance(value, (int, float)) else ZERO3_PERSISTENCE_THRESHOLD


def estimate_all(recipe: Any, config: Any, world: int, mixed: bool,
                 strategies: Iterable[str] = STRATEGIES) -> list[MemoryEstimate]:
    shape = model_shape(config, recipe.task, recipe)
    seq = recipe.sequence_length
    act = activation_bytes(shape, recipe.train.batch_size, seq, mixed, recipe.train.gradient_checkpointing,
                           recipe.traits.head == "causal_lm")
    thr = persistence_threshold(recipe, world, "bf16" if mixed else "no")
    t = recipe.train
    return [estimate(shape, s, world, act, mixed, thr, t.optimizer, t.momentum) for s in strategies]


def estimate_recipe(recipe: Any, world: int, strategies: Iterable[str] | None = None) -> tuple[Any, ModelShape, bool, list[MemoryEstimate]]:
    """A recipe (its base model already resolved) over ``world`` devices: the recipe as estimated
    (a DeepSpeed JSON's own stage and offload applied), the model's shape, whether it trains in
    mixed precision, and one estimate per strategy (default: each one QLoRA can use)."""
    recipe = with_deepspeed_json(recipe)
    config = resolve_config(recipe, None)
    if recipe.model.config is not None and recipe.model.tokenizer == "train":
        config.vocab_size = recipe.model.tokenizer_vocab_size  # the tokenizer is not trained yet
    # auto is bf16 or fp16 on every GPU, and a device estimate is for GPUs.
    mixed = recipe.train.precision in ("bf16", "fp16", "auto")
    if strategies is None:
        # QLoRA's 4-bit base is not offloaded (the recipe refuses it).
        qlora = recipe.model.adapter is not None and recipe.model.adapter.type == "qlora"
        strategies = [s for s in STRATEGIES if not (qlora and "offload" in s)]
    rows = estimate_all(recipe, config, world, mixed, strategies)
    return recipe, model_shape(config, recipe.task, recipe), mixed, rows


def device_memory_bytes(name: str | None = None) -> tuple[str, int] | None:
    """(name, bytes) of a GPU: this machine's first one, else a known name like ``H100``."""
    if name is None:
        if not torch.cuda.is_available():
            return None
        props = torch.cuda.get_device_properties(0)
        return props.name, int(props.total_memory)
    for key, gb in DEVICE_MEMORY_GB.items():
        if key.lower() in name.lower():
            return key, int(gb * 1e9)
    return None


# -- what a rank actually holds ------------------------------------------------------------------


