"""The one interface the training loop drives, whatever splits the work across processes.

Every strategy holds an Accelerator for the process group, reductions and trackers; what
differs is how the model, gradients and optimizer state are held (whole on every rank,
sharded by FSDP, partitioned by DeepSpeed ZeRO) and so how a step, a checkpoint and the
final gathered weights are produced. The loop calls these methods in the same order for all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

import torch
from clustertune.train import memory

OptimizerFactory = Callable[[torch.nn.Module], torch.optim.Optimizer]
SchedulerFactory = Callable[[torch.optim.Optimizer], Any]


ModelFactory = Callable[[], torch.nn.Module]


class Strategy(Protocol):
    name: str
    accelerator: Any  # process group, reduce, trackers
    built_bytes: int  # host bytes the model held once built (the loop's state_memory row)
    own_group: Any  # a process group this run made for itself (closed after it), else None

    @property
    def device(self) -> torch.device: ...
    @property
    def process_index(self) -> int: ...
    @property
    def num_processes(self) -> int: ...
    @property
    def is_main_process(self) -> bool: ...

    def build(self, make: ModelFactory) -> torch.nn.Module:
        """The model before :meth:`prepare`: ``make()`` whole, or built straight into this
        rank's partitions (ZeRO-3 over several processes)."""
        ...

    def prepare(self, model: torch.nn.Module, make_optimizer: OptimizerFactory,
                make_scheduler: SchedulerFactory) -> tuple[Any, Any, Any]:
        """Wrap/shard the model and build the optimizer and scheduler on what it holds."""

    def autocast(self) -> AbstractContextManager[Any]:
        """Mixed-precision context for forward passes."""

    def accumulating(self, model: Any, last: bool) -> AbstractContextManager[Any]:
        """Around one micro-batch's forward and backward; gradients are synchronised when ``last``."""

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of a loss already divided by the number of micro-batches."""

    def step(self, model: Any, optimizer: Any, scheduler: Any, max_grad_norm: float | None) -> Any:
        """Clip, optimizer step, scheduler step, zero the gradients; returns the gradient norm
        (a tensor or float, read only at log intervals) or None without clipping."""

    def reduce(self, tensor: torch.Tensor, reduction: str) -> torch.Tensor: ...
    def wait_for_everyone(self) -> None: ...

    def save_state(self, model: Any, optimizer: Any, scheduler: Any, directory: Path) -> None:
        """Every rank: write this rank's part of model, optimizer and scheduler state."""

    def load_state(self, model: Any, optimizer: Any, scheduler: Any, directory: Path) -> None:
        """Every rank: read back what ``save_state`` wrote (same strategy, same world size)."""

    def full_state_dict(self, model: Any) -> dict[str, torch.Tensor] | None:
        """Every rank takes part; the main process gets the full, unsharded weights (CPU)."""

    def unwrap(self, model: Any) -> torch.nn.Module:
        """The transformers model inside whatever wrapper ``prepare`` returned."""

    def state_bytes(self, model: Any, optimizer: Any) -> dict[str, int]:
        """Bytes of the distinct tensors this rank holds, by kind: ``params``, ``grads``,
        ``optimizer`` (on the device) and ``host`` (offloaded); see train/memory.py."""

    def end(self) -> None: ...


class AcceleratorRanks:
    """Rank bookkeeping shared by the strategies, from the Accelerator they hold."""

    accelerator: Any
    built_bytes: int = 0
    own_group: Any = None

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    @property
    def process_index(self) -> int:
        return int(self.accelerator.process_index)

    @property
    def num_processes(self) -> int:
        return int(self.accelerator.num_processes)

    @property
    def is_main_process(self) -> bool:
        return bool(self.accelerator.is_main_process)

    def reduce(self, tensor: torch.Tensor, reduction: str) -> torch.Tensor:
        return self.accelerator.reduce(tensor, reduction=reduction)

    def wait_for_everyone(self) -> None:
        self.accelerator.wait_for_everyone()

    def end(self) -> None:
        self.accelerator.end_training()

    def build(self, make: ModelFactory) -> torch.nn.Module:
        """The model, from ``make``, held in host memory the way this strategy wants it at the
        start (whole here; ZeRO-3 overrides it). The process group is up when it is called."""
        return make()


class OutOfMemory(Exception):
    """The device ran out of memory; the message says what to change. Not a UserError: the
    recipe is valid, the hardware is too small for it, and the run is marked FAILED."""


def next_strategy(t: Any) -> str:
    """The next rung of the memory ladder after the recipe's strategy, as recipe overrides."""
    if t.strategy == "ddp":
        return "train.strategy=fsdp (or train.strategy=deepspeed train.zero_stage=2)"
    if t.strategy == "fsdp":
        return ("train.offload=params" if t.effective_offload == "none"
                else "train.gradient_checkpointing=true, or more GPUs")
    stage, offload = t.effective_zero_stage, t.effective_offload
    if stage < 3:
        return f"train.zero_stage={stage + 1}"
    if offload != "params":
        return "train.deepspeed_preset=zero3-offload"
    return "train.gradient_checkpointing=true, or more GPUs"


def next_strategy_key(t: Any) -> str | None:
    """The next rung's name in train/memory.py's terms (None: no strategy saves more)."""
    if t.strategy == "ddp":
        return "fsdp"
    offload = t.effective_offload
    if t.strategy == "fsdp":
        return "fsdp+offload" if offload == "none" else None
    stage = t.effective_zero_stage
    if stage < 3:
        return f"zero{stage + 1}" if offload == "none" else ("zero2+offload" if stage == 1 else "zero3+offload")
    return "zero3+offload" if offload != "params" else None


def out_of_memory_message(recipe: Any, config: Any, world: int, mixed: bool, seq_len: int,
                          cause: BaseException) -> str:
    """What ran out, with estimate-memory's figures for this strategy and the next one."""

    t = recipe.train
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    here, after = memory.strategy_key(t), next_strategy_key(t)
    est = {e.strategy: e for e in memory.estimate_all(recipe, config, world, mixed,
                                                      [here] + ([after] if after else []))}
    gib = memory.GiB
    e = est[here]
    figures = (f"estimate-memory puts {here} over {world} device(s) at {e.device_total / gib:.2f} GiB per device "
               f"(weights {e.params / gib:.2f}, gradients {e.grads / gib:.2f}, optimizer {e.optimizer / gib:.2f}, "
               f"activations {e.activations / gib:.2f} GiB)")
    if after:
        figures += f"; {after} would need {est[after].device_total / gib:.2f} GiB per device"
    return (
        f"out of device memory at train.batch_size={t.batch_size}, sequence length {seq_len}, "
        f"train.strategy={t.strategy}"
        + (f" (zero_stage {t.effective_zero_stage}, offload {t.effective_offload})" if t.strategy == "deepspeed" else "")
        + f": {first[:200]}. {figures} (`clustertune estimate-memory RECIPE` shows every strategy). "
        f"Try a smaller train.batch_size with a larger train.gradient_accumulation_steps "
        f"(same global batch), train.gradient_checkpointing=true, or {next_strategy(t)}."
    )


@contextmanager
def explain_out_of_memory(recipe: Any, config: Any, world: int, mixed: bool, seq_len: int) -> Iterator[None]:
    """Turns the device's out-of-memory error inside into OutOfMemory with the advice above."""
    try:
        yield
    except (torch.OutOfMemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise OutOfMemory(out_of_memory_message(recipe, config, world, mixed, seq_len, exc)) from exc


# What running out of device memory looks like when it is not torch's own OutOfMemoryError:
# a CUDA error raised from a kernel launch, cuBLAS failing its workspace, NCCL its buffers.
# On a CPU run (or an offloaded optimizer) the host allocator's own words.
OOM_MARKERS = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "Failed to CUDA calloc",
               "cudaErrorMemoryAllocation", "DefaultCPUAllocator: can't allocate memory")


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or any(m in str(exc) for m in OOM_MARKERS)
