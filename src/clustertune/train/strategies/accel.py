"""DDP and FSDP2 through Accelerate.

DDP keeps a whole model on every rank: the main process writes one full checkpoint and
everyone reads it back. FSDP2 (``fully_shard``) shards parameters, gradients and optimizer
state: every rank writes its own shards with torch.distributed.checkpoint and the full
weights are gathered only for the final ``save_pretrained``.

On a GPU Accelerate's FSDP2 plugin shards the model. On CPU Accelerate drops the plugin
without a word (``Accelerator(cpu=True)`` runs plain DDP whatever plugin it is given), so there
the model is sharded here, with the same calls the plugin makes: ``fully_shard`` on each
transformer block and then on the root, resharding after forward.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from clustertune.recipe.schema import Recipe
from clustertune.train import held_state
from clustertune.train.checkpoint import load_tensors
from clustertune.train.fastpath import prepare_module
from clustertune.train.gather import SHARDS  # torch.distributed.checkpoint's directory (one file per rank + metadata)
from clustertune.train.trainable import load_weights, save_weights, trainable_parameters
from clustertune.train.strategies.base import AcceleratorRanks, OptimizerFactory, SchedulerFactory
from clustertune.errors import ModelError
from clustertune.models.saving import no_deepspeed_import

WEIGHTS = "model.safetensors"
OPTIMIZER = "optimizer.pt"
SCHEDULER = "scheduler.pt"
SCALER = "scaler.pt"  # fp16's loss scale and its growth tracker


def mixed_precision_policy(mixed: str) -> Any:
    """FSDP2's policy for Accelerate's ``mixed_precision``: weights gathered in the half type
    for compute, gradients reduced (and so accumulated) in fp32. Without it Accelerate's plugin
    reduces in the half type and returns bf16 outputs, which quantises the logged losses."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mixed)
    if half is None:
        return None
    return MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32)


def loads_from_rank0(recipe: Recipe, env: Any = None) -> bool:
    """Whether only rank 0 builds the real model and the others receive their shards from it:
    FSDP over more than one process, without an adapter (PEFT wraps real weights). Every rank
    answers the same, so all of them take part in the broadcast."""
    import os

    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1") or 1)
    return recipe.train.strategy == "fsdp" and recipe.model.adapter is None and world > 1


def fsdp_plugin(recipe: Recipe, mixed: str = "no", from_rank0: bool = False) -> Any:
    """Accelerate's FSDP2 plugin: shard every transformer block and the root, reshard after
    forward. ``from_rank0``: the other ranks hold an empty model; Accelerate broadcasts rank 0's
    weights into every rank's shards (its CPU-RAM-efficient loading)."""
    from accelerate import FullyShardedDataParallelPlugin

    return FullyShardedDataParallelPlugin(
        fsdp_version=2,
        auto_wrap_policy="transformer_based_wrap",  # the model's own _no_split_modules blocks
        reshard_after_forward=True,
        cpu_offload=recipe.train.effective_offload != "none",
        state_dict_type="SHARDED_STATE_DICT",
        mixed_precision_policy=mixed_precision_policy(mixed),
        cpu_ram_efficient_loading=from_rank0,
    )


class AccelerateStrategy(AcceleratorRanks):
    def __init__(self, recipe: Recipe, accelerator: Any, sharded: bool, from_rank0: bool = False):
        self.recipe, self.accelerator, self.sharded = recipe, accelerator, sharded
        self.name = "fsdp" if sharded else "ddp"
        # Rank 0 built the real model, the others its structure on the meta device.
        self.from_rank0 = sharded and from_rank0

    @property
    def shards_itself(self) -> bool:
        """FSDP asked for, but the Accelerator will not do it (CPU): ``fully_shard`` here."""
        from accelerate.utils import DistributedType

        return self.sharded and self.accelerator.distributed_type != DistributedType.FSDP

    def prepare(self, model: torch.nn.Module, make_optimizer: OptimizerFactory,
                make_scheduler: SchedulerFactory) -> tuple[Any, Any, Any]:
        prepare_module(model, self.recipe, str(self.accelerator.mixed_precision), regional=self.sharded)
        offload = self.recipe.train.effective_offload != "none"
        if self.shards_itself:
            # Rank 0's whole weights (references, not copies), taken before sharding replaces them.
            full = model.state_dict() if self.from_rank0 and self.is_main_process else {}
            shard_model(model, offload, mixed_precision_policy(self.accelerator.mixed_precision))
            if self.from_rank0:
                load_shards_from_rank0(model, full, torch.device("cpu") if offload else self.device)
                del full
            # The optimizer is built on the shards (DTensors), as FSDP2 wants; Accelerate is
            # not asked to prepare the model, which it would wrap in DDP on top.
            optimizer = make_optimizer(model)
            return model, optimizer, make_scheduler(optimizer)
        optimizer = make_optimizer(model)
        # The scheduler holds the optimizer's param_group dicts, which Accelerate keeps (it only
        # swaps the parameters inside them for their shards), so it can be built first.
        scheduler = make_scheduler(optimizer)
        if self.from_rank0 and not self.is_main_process:
            # Accelerate maps the optimizer's parameters to their shards by address, so each
            # needs one: allocated, never written (so never resident), replaced by the shards.
            model.to_empty(device="cpu")
        model, optimizer = self.accelerator.prepare(model, optimizer)
        if self.from_rank0:
            share_buffers_and_rng(model)
        return model, optimizer, scheduler

    def autocast(self) -> AbstractContextManager[Any]:
        return self.accelerator.autocast()

    def accumulating(self, model: Any, last: bool) -> AbstractContextManager[Any]:
        # DDP all-reduces on the last micro-batch only. FSDP reduce-scatters after every
        # micro-batch: skipping it would hold whole, unsharded gradients on every rank between
        # micro-batches (the full model's size, where the sharded ones are 1/world of it), and
        # FSDP exists to fit what does not fit whole. estimate-memory counts sharded gradients;
        # the loop measures what each rank holds between micro-batches too (state_bytes).
        if self.sharded:
            return nullcontext()
        return nullcontext() if last else self.accelerator.no_sync(model)

    def backward(self, loss: torch.Tensor) -> None:
        self.accelerator.backward(loss)

    def step(self, model: Any, optimizer: Any, scheduler: Any, max_grad_norm: float | None) -> Any:
        norm = None
        if max_grad_norm is not None:
            norm = self.accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
            if hasattr(norm, "full_tensor"):  # FSDP2 returns the norm as a DTensor
                norm = norm.full_tensor()
        optimizer.step()
        # fp16's grad scaler skips the step on overflow; the schedule then does not move either.
        if not getattr(optimizer, "step_was_skipped", False):
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return norm

    def unwrap(self, model: Any) -> torch.nn.Module:
        with no_deepspeed_import():  # this strategy never builds a DeepSpeed engine (models/saving.py)
            return self.accelerator.unwrap_model(model)

    def state_bytes(self, model: Any, optimizer: Any) -> dict[str, int]:
        # Under FSDP whole gradients of a unit not yet reduce-scattered live beside its shards
        # (on the unsharded parameters): counted, so that skipping the reduction would show.
        extra = unsharded_gradients(model) if self.sharded else []
        held = held_state.measured_state_bytes(model, _inner(optimizer), extra)
        if self.sharded and self.recipe.train.effective_offload != "none":
            # FSDP's CPU offload keeps the sharded weights, their gradients and so the
            # optimizer state in host memory; only the gathered layers visit the device.
            held = held_state.offloaded(held, ("params", "grads", "optimizer"))
        return held

    # -- checkpoints -------------------------------------------------------------------------

    def save_state(self, model: Any, optimizer: Any, scheduler: Any, directory: Path) -> None:
        if self.sharded:
            import torch.distributed.checkpoint as dcp

            model_sd, optim_sd = self._dcp_state(model, optimizer)
            dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=str(directory / SHARDS))
        if self.is_main_process:
            if not self.sharded:
                save_weights(self.unwrap(model), directory / WEIGHTS)
                torch.save(optimizer.state_dict(), directory / OPTIMIZER)
            torch.save(scheduler.state_dict(), directory / SCHEDULER)
            if self.accelerator.scaler is not None:
                torch.save(self.accelerator.scaler.state_dict(), directory / SCALER)

    def load_state(self, model: Any, optimizer: Any, scheduler: Any, directory: Path) -> None:
        if self.sharded:
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

            model_sd, optim_sd = self._dcp_state(model, optimizer)
            state = {"model": model_sd, "optimizer": optim_sd}
            dcp.load(state, checkpoint_id=str(directory / SHARDS))  # fails on a key the shards lack
            # Frozen weights are not in the checkpoint (they stay as the base has them).
            whole = trainable_parameters(model) is None
            set_state_dict(model, _inner(optimizer), model_state_dict=state["model"],
                           optim_state_dict=state["optimizer"],
                           options=StateDictOptions(ignore_frozen_params=True, strict=whole))
        else:
            load_weights(self.unwrap(model), directory / WEIGHTS)
            optimizer.load_state_dict(load_tensors(directory / OPTIMIZER))
        scheduler.load_state_dict(load_tensors(directory / SCHEDULER))
        if self.accelerator.scaler is not None and (directory / SCALER).is_file():
            self.accelerator.scaler.load_state_dict(load_tensors(directory / SCALER))

    def _dcp_state(self, model: Any, optimizer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        # Frozen weights (a base under an adapter) are not checkpointed: they come from the base.
        return get_state_dict(model, _inner(optimizer), options=StateDictOptions(ignore_frozen_params=True))

    def full_state_dict(self, model: Any) -> dict[str, torch.Tensor] | None:
        if not self.sharded:
            return self.unwrap(model).state_dict() if self.is_main_process else None
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        # A collective: every rank sends its shards, the main process ends up with the whole.
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return full if self.is_main_process else None


def shard_model(model: torch.nn.Module, offload: bool, mp_policy: Any = None) -> None:
    """FSDP2 over the model: each of its transformer blocks (the model's own
    ``_no_split_modules`` classes) is one unit, the root holds the rest (embeddings, head)."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    block_names = set(getattr(model, "_no_split_modules", None) or [])
    policy = CPUOffloadPolicy(pin_memory=torch.cuda.is_available()) if offload else OffloadPolicy()
    blocks = [m for m in model.modules() if type(m).__name__ in block_names]
    if not blocks:
        raise ModelError(
            f"train.strategy: fsdp shards each transformer block, but {type(model).__name__} names none "
            "(its _no_split_modules is empty); use train.strategy=ddp, or deepspeed with train.zero_stage=3"
        )
    mp = mp_policy or MixedPrecisionPolicy()
    for block in blocks:
        fully_shard(block, reshard_after_forward=True, offload_policy=policy, mp_policy=mp)
    fully_shard(model, reshard_after_forward=True, offload_policy=policy, mp_policy=mp)


def load_shards_from_rank0(model: torch.nn.Module, full: dict[str, torch.Tensor], device: torch.device) -> None:
    """Fill a sharded model's shards with rank 0's whole weights (``full``, empty elsewhere).

    Every rank but 0 built the model on the meta device and sharded it there: here it gets
    memory for its own shards only, and rank 0 broadcasts each whole tensor, of which every
    rank keeps its shard. A collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if any(p.is_meta for p in model.parameters()) or any(b.is_meta for b in model.buffers()):
        model.to_empty(device=device)  # in place: tied weights stay one tensor
    set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    share_buffers_and_rng(model)


def share_buffers_and_rng(model: torch.nn.Module) -> None:
    """Rank 0's buffers (those outside the state dict too, e.g. rotary frequencies) and random
    state on every rank: as if every rank had built the model itself from the same seed."""
    import torch.distributed as dist

    for buf in model.buffers():
        dist.broadcast(buf.data, src=0)
    # Byte tensors, carried on the device the group's backend speaks (NCCL: the GPU).
    on = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    states = [torch.get_rng_state()] + ([torch.cuda.get_rng_state()] if on.type == "cuda" else [])
    shared = []
    for state in states:
        moved = state.to(on)
        dist.broadcast(moved, src=0)
        shared.append(moved.cpu())
    torch.set_rng_state(shared[0])
    if on.type == "cuda":
        torch.cuda.set_rng_state(shared[1])


def unsharded_gradients(model: torch.nn.Module) -> list[torch.Tensor]:
    """Whole (unsharded) gradients FSDP2 holds for its units between backward and the
    reduce-scatter: kept there across micro-batches only when gradient sync is switched off."""
    out: list[torch.Tensor] = []
    for module in model.modules():
        get_state = getattr(module, "_get_fsdp_state", None)
        if get_state is None:
            continue
        for group in getattr(get_state(), "_fsdp_param_groups", []):
            for fp in group.fsdp_params:
                unsharded = getattr(fp, "_unsharded_param", None)
                for grad in (getattr(fp, "unsharded_accumulated_grad", None), getattr(unsharded, "grad", None)):
                    if grad is not None:
                        out.append(grad)
    return out


def _inner(optimizer: Any) -> torch.optim.Optimizer:
    """The torch optimizer inside Accelerate's wrapper."""
    return getattr(optimizer, "optimizer", optimizer)
