"""DeepSpeed ZeRO (stages 1-3, optimizer and parameter offload), driven by ``deepspeed.initialize``.

Accelerate's DeepSpeed path is not used: on CPU it drops the plugin, or without ``cpu=True``
reports every rank as the main process and sums instead of averaging. The Accelerator kept
here is a plain one (no plugin, no mixed precision: DeepSpeed casts the model itself) that
only supplies ranks, reductions and trackers over the process group DeepSpeed shares.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import socket
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

from clustertune.errors import UserError
from clustertune.extras import install_hint
from clustertune.recipe.schema import Recipe
from clustertune.train import held_state
from clustertune.train.fastpath import compile_kwargs, prepare_module, use_compile
from clustertune.train.optim import param_groups
from clustertune.train.strategies.base import AcceleratorRanks, ModelFactory, OptimizerFactory, SchedulerFactory
from clustertune.train.strategies.ds_ops import build_line, skip_the_cpu_shm_all_reduce
from clustertune.recipe.ds_config import deepspeed_config, with_deepspeed_json
from clustertune.train.gather import ZERO_TAG as TAG  # DeepSpeed's own checkpoint layout lives in this subdirectory
from clustertune.train.trainable import trainable_parameters



log = logging.getLogger("clustertune")


class DeepSpeedMissing(UserError):
    """train.strategy=deepspeed on a machine without DeepSpeed."""


def require_deepspeed() -> Any:
    try:
        import deepspeed
    except ImportError as exc:
        raise DeepSpeedMissing(
            f"train.strategy: deepspeed is not installed here; install it with `{install_hint('deepspeed')}` "
            f"(its ops build on first use), or choose train.strategy=fsdp ({exc})"
        ) from exc
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    skip_the_cpu_shm_all_reduce()
    return deepspeed


def check_strategy(recipe: Recipe, mixed_precision: str) -> None:
    """Before launch: DeepSpeed importable and the user's JSON agreeing with the recipe."""
    if recipe.train.strategy != "deepspeed":
        return
    if importlib.util.find_spec("deepspeed") is None:
        require_deepspeed()  # raises the install hint
    deepspeed_config(recipe, None, mixed_precision)


def zero_state_bytes(module: torch.nn.Module, optimizer: Any, stage: int, offload: str) -> dict[str, int]:
    """What one rank holds under a ZeRO optimizer (see train/memory.py for the kinds).

    DeepSpeed's optimizer wrapper keeps the state in its own attributes (DeepSpeed 0.19): the
    fp32 master copy it steps, the gradient partitions, and the torch/CPU Adam inside it.
    """
    params = list(module.parameters())
    quant = held_state.quant_state_tensors([*params, *module.modules()])  # QLoRA: kept whole on every rank
    if stage == 0:
        # No ZeRO: the engine steps the optimizer itself, and every rank holds everything (as DDP).
        return held_state.distinct_bytes({
            "params": [*params, *quant], "grads": [p.grad for p in params if p.grad is not None],
            "optimizer": held_state.optimizer_state_tensors(getattr(optimizer, "optimizer", optimizer)),
        })
    moments = held_state.optimizer_state_tensors(optimizer.optimizer)
    if stage == 3:
        held = held_state.distinct_bytes({
            "params": [*(p.data for p in params), *quant],  # whole only where persistent or gathered
            "partitions": [p.ds_tensor for p in params if getattr(p, "ds_tensor", None) is not None],
            "grads": [optimizer.grad_partitions_flat_buffer],
            # Where the master copy is the partitions themselves it is counted above, once.
            "optimizer": [*optimizer.fp32_partitioned_groups_flat, *moments],
        })
        partitions = held.pop("partitions")
        if offload == "params":
            held["host_params"] = partitions
        else:
            held["params"] += partitions
    else:
        masters = list(optimizer.single_partition_of_fp32_groups)
        grads = _tensors(getattr(optimizer, "averaged_gradients", {}))
        grads += [m.grad for m in masters if m.grad is not None]  # offload: the host partition
        grads += [p.grad for p in params if p.grad is not None]  # ZeRO-1: whole until the step
        held = held_state.distinct_bytes({
            # With offload, updated weights come back through a partition-sized device buffer.
            "params": [*params, *quant,
                       *_tensors(getattr(optimizer, "param_buffer_of_bit16_for_cpu_offload_groups", []))],
            "grads": grads,
            "optimizer": [*masters, *moments],
        })
    if offload != "none":
        held = held_state.offloaded(held, ("grads", "optimizer"))
    return held


def hidden_size(model: torch.nn.Module) -> int | None:
    """The width DeepSpeed's "auto" bucket sizes derive from (as Hugging Face's integration reads it)."""
    config = getattr(model, "config", None)
    for cfg in (config, getattr(config, "text_config", None)):
        if cfg is None:
            continue
        if isinstance(getattr(cfg, "hidden_size", None), int):
            return int(cfg.hidden_size)
        if getattr(cfg, "hidden_sizes", None):
            return max(cfg.hidden_sizes)
    return None


def _tensors(obj: Any) -> list[torch.Tensor]:
    """Every tensor in nested lists/tuples/dicts (DeepSpeed keeps its buffers in such)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors(x)]
    return []


def release_freed_host_memory() -> None:
    """Hand memory that was freed back to the operating system (glibc keeps freed blocks of a
    few MB in the process: built one module at a time and then partitioned, a model would
    otherwise leave its whole size resident). Nothing where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DeepSpeedStrategy(AcceleratorRanks):
    name = "deepspeed"

    def __init__(self, recipe: Recipe, accelerator: Any, mixed_precision: str):
        self.ds = require_deepspeed()
        # With the user's JSON, its ZeRO stage and offload are the run's.
        recipe = with_deepspeed_json(recipe)
        self.recipe, self.accelerator, self.mixed_precision = recipe, accelerator, mixed_precision
        self.stage = recipe.train.effective_zero_stage
        self._own_env: list[str] = []
        # One process (no launcher): DeepSpeed still wants a process group of one, and reads
        # LOCAL_RANK in every engine, also when the group of an earlier run here is still up.
        # The variables set for it are removed in end(), so a later run does not see a launcher.
        if "LOCAL_RANK" not in os.environ:
            wanted = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0",
                      "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
            self._own_env = [k for k in wanted if k not in os.environ]
            os.environ.update({k: wanted[k] for k in self._own_env})
        from datetime import timedelta

        # Under a launcher the group is up already (made with the recipe's timeout and backend).
        self.ds.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo",
                                 timeout=timedelta(minutes=recipe.train.collective_timeout_minutes))

    @property
    def partitions_at_build(self) -> bool:
        """ZeRO-3 over several processes, no adapter: every rank builds only its partitions
        (PEFT wraps whole weights, so an adapter's base is built whole)."""
        return self.stage == 3 and self.num_processes > 1 and self.recipe.model.adapter is None

    def build(self, make: ModelFactory) -> torch.nn.Module:
        """Under ZeRO-3, each parameter is partitioned as soon as its module is made, so no rank
        holds the whole model (transformers builds and loads under ``deepspeed.zero.Init`` while
        a ``HfDeepSpeedConfig`` of stage 3 is alive; pretrained weights go straight into the
        partitions). A model built fresh from a config gets rank 0's initial values, drawn as one
        process draws them, so the run starts where a run on one process starts."""
        if not self.partitions_at_build:
            return make()
        # Deferred: transformers' DeepSpeed integration is needed only under ZeRO-3.
        from transformers.integrations import HfDeepSpeedConfig

        seeded = torch.get_rng_state()
        zero3 = HfDeepSpeedConfig(deepspeed_config(self.recipe, self.num_processes, self.mixed_precision))
        try:
            model = make()
        finally:
            del zero3  # transformers holds it by a weak reference only: later builds are plain again
        if self.recipe.model.name_or_path is None:
            self._rank0_initial_values(model, make, seeded)
        release_freed_host_memory()  # the whole modules made, partitioned and dropped along the way
        return model

    def _rank0_initial_values(self, model: torch.nn.Module, make: ModelFactory, seeded: torch.Tensor) -> None:
        """Rank 0 builds the model once more, whole and from the same seed, and its values go into
        every rank's partitions one parameter at a time (only rank 0 ever holds the whole model).
        Every rank then continues from the random state rank 0 is in after that build."""
        torch.set_rng_state(seeded)
        whole = make() if self.is_main_process else None
        for name, param in model.named_parameters():
            with self.ds.zero.GatheredParameters([param], modifier_rank=0):
                if whole is not None:
                    param.data.copy_(whole.get_parameter(name).data)
        del whole
        state = torch.get_rng_state().to(self.device)  # NCCL moves device tensors only
        torch.distributed.broadcast(state, src=0)
        torch.set_rng_state(state.cpu())

    def prepare(self, model: torch.nn.Module, make_optimizer: OptimizerFactory,
                make_scheduler: SchedulerFactory) -> tuple[Any, Any, Any]:
        # The optimizer comes from the config (not ``make_optimizer``) so that DeepSpeed can pick
        # its CPU Adam when the optimizer state lives in host memory.
        prepare_module(model, self.recipe, self.mixed_precision, compile_here=False)
        cfg = deepspeed_config(self.recipe, self.num_processes, self.mixed_precision,
                               total_steps=getattr(make_scheduler, "steps", 0), hidden_size=hidden_size(model),
                               cuda=torch.cuda.is_available())
        # The groups' weight decay is the optimizer's (a user JSON's own, else the recipe's):
        # biases and norms get none either way.
        decay = cfg["optimizer"]["params"].get("weight_decay", self.recipe.train.weight_decay)
        groups: Any = param_groups(model, decay)
        if cfg["optimizer"]["type"].lower() == "adagrad" and self.stage in (1, 2):
            # ZeRO-1/2 makes torch's Adagrad again over its flat partitions as one group (DeepSpeed
            # 0.19, stage_1_and_2.py initialize_optimizer_states): a second group would be lost and
            # its step fail. One group, so the JSON's weight decay reaches biases and norms too.
            groups = [p for p in model.parameters() if p.requires_grad]
        if self.is_main_process and (line := build_line(cfg, torch.cuda.is_available())):
            log.info("%s", line)  # minutes of silence otherwise
        engine, optimizer, _, scheduler = self.ds.initialize(
            model=model, model_parameters=groups,
            # A scheduler in the user's JSON is DeepSpeed's to build; otherwise the recipe's.
            lr_scheduler=None if "scheduler" in cfg else make_scheduler, config=cfg, dist_init_required=False,
        )
        self.engine = engine
        if use_compile(self.recipe):
            # After initialize: ZeRO-3 installs its gather/release hooks on the modules, which a
            # model compiled beforehand would trace around; the engine compiles with them in place.
            engine.compile(compile_kwargs=compile_kwargs(self.recipe.train.compile_mode))
        return engine, optimizer, scheduler

    def autocast(self) -> AbstractContextManager[Any]:
        return nullcontext()  # the engine holds the model in the training precision already

    def accumulating(self, model: Any, last: bool) -> AbstractContextManager[Any]:
        # The engine reduces gradients and steps only at a boundary: the last micro-batch.
        model.set_gradient_accumulation_boundary(last)
        return nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss, scale_wrt_gas=False)  # the loop already divided by the micro-batches

    def step(self, model: Any, optimizer: Any, scheduler: Any, max_grad_norm: float | None) -> Any:
        # Clipping (gradient_clipping), the scheduler step and zeroing happen inside the engine.
        model.step()
        return model.get_global_grad_norm() if max_grad_norm is not None else None

    def unwrap(self, model: Any) -> torch.nn.Module:
        return getattr(model, "module", model)

    def state_bytes(self, model: Any, optimizer: Any) -> dict[str, int]:
        return zero_state_bytes(self.unwrap(model), optimizer, self.stage, self.recipe.train.effective_offload)

    def save_state(self, model: Any, optimizer: Any, scheduler: Any, directory: Path) -> None:
        # Frozen weights (a base under an adapter) are not checkpointed: they come from the base.
        model.save_checkpoint(str(directory), tag=TAG, save_latest=False, exclude_frozen_parameters=True)

    def load_state(self, model: Any, optimizer: Any, scheduler: Any, directory: Path) -> None:
        whole = trainable_parameters(self.unwrap(model)) is None
        path, _ = model.load_checkpoint(str(directory), tag=TAG, load_optimizer_states=True,
                                        load_lr_scheduler_states=True, load_module_strict=whole)
        if path is None:
            raise UserError(f"checkpoint {directory} holds no DeepSpeed state; was it saved under another train.strategy?")

    def end(self) -> None:
        # Release ZeRO's hooks and buffers and let every rank get here before the process
        # group goes away, so no collective is still in flight at teardown.
        if getattr(self, "engine", None) is not None:
            self.engine.destroy()
        self.wait_for_everyone()
        # Not accelerator.end_training(): it also destroys the default process group, which
        # DeepSpeed's comm module keeps referencing; a later run in this process (a next
        # recipe, another model size) reuses the group instead. A group torn down and made
        # again under the same launcher store hangs in gloo's connect.
        for tracker in self.accelerator.trackers:
            tracker.finish()
        for k in self._own_env:
            os.environ.pop(k, None)

    def full_state_dict(self, model: Any) -> dict[str, torch.Tensor] | None:
        masters = self._fp32_masters(model)
        if masters is not None:
            return masters if self.is_main_process else None
        if self.stage == 3:
            full = model._zero3_consolidated_16bit_state_dict()  # a collective; rank 0 gets the dict
        else:
            full = model.module.state_dict() if self.is_main_process else None
        if not self.is_main_process or full is None:
            return None
        return {k: v.detach().cpu() for k, v in full.items()}

    def _fp32_masters(self, model: Any) -> dict[str, torch.Tensor] | None:
        """The optimizer's fp32 master weights, whole, with the persistent buffers: what the
        other strategies save (the engine's own consolidation gives the 16-bit compute copies).
        Each gather is a collective, so every rank walks the parameters in the same order.
        None where DeepSpeed keeps no master mapping for the parameters."""
        from deepspeed.utils import safe_get_full_fp32_param

        module = self.unwrap(model)
        full: dict[str, torch.Tensor] = {}
        for name, param in module.named_parameters():
            master = safe_get_full_fp32_param(param)
            if master is None:
                return None
            if self.is_main_process:
                shape = param.ds_shape if hasattr(param, "ds_shape") else param.shape  # ZeRO-3: the whole shape
                full[name] = master.detach().reshape(shape).float().cpu()
        for prefix, sub in module.named_modules():
            for bname, buf in sub._buffers.items():
                if buf is not None and bname not in sub._non_persistent_buffers_set:
                    full[f"{prefix}.{bname}" if prefix else bname] = buf.detach().cpu()
        return full
