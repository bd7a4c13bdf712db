"""A sharded checkpoint's model weights in one file, on one CPU, without the ranks that wrote it.

A checkpoint of a DDP or one-process run holds ``model.safetensors``; under FSDP every rank
wrote its shards with ``torch.distributed.checkpoint`` (``shards/``), under DeepSpeed ZeRO its
partitions (``deepspeed/``). ``RUN@step-N`` of such a run (generate, chat, eval, export, or a
checkpoint named as another run's model) gathers them here: torch's own DCP-to-``torch.save``
conversion, DeepSpeed's own fp32 consolidation, each run in this one process. Frozen weights (a
base under an adapter) were never checkpointed; they come from the base as the run built it.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from clustertune.errors import CheckpointError

log = logging.getLogger("clustertune")

WEIGHTS = "model.safetensors"
SHARDS = "shards"  # FSDP: torch.distributed.checkpoint's directory (train/strategies/accel.py)
ZERO_TAG = "deepspeed"  # DeepSpeed's checkpoint layout (train/strategies/zero.py)


def sharded_by(ckpt: Path) -> str | None:
    """``fsdp`` or ``deepspeed`` for a checkpoint whose weights are in shards; None for one file."""
    if (ckpt / WEIGHTS).is_file():
        return None
    if (ckpt / SHARDS).is_dir():
        return "fsdp"
    if (ckpt / ZERO_TAG).is_dir():
        return "deepspeed"
    raise CheckpointError(f"checkpoint {ckpt} holds neither {WEIGHTS} nor FSDP or DeepSpeed shards")


def gathered_state(ckpt: Path) -> dict[str, torch.Tensor]:
    """The model's weights in the checkpoint ``ckpt`` as one state dict of fp32 CPU tensors."""
    how = sharded_by(ckpt)
    if how is None:
        from safetensors.torch import load_file

        return load_file(str(ckpt / WEIGHTS))
    # Gathering reads every rank's shards on this one CPU: a large run's takes a while.
    size = sum(p.stat().st_size for p in (ckpt / (SHARDS if how == "fsdp" else ZERO_TAG)).rglob("*") if p.is_file())
    log.info("checkpoint: gathering the %s shards of %s (%.1f MB) into one set of weights",
             "FSDP" if how == "fsdp" else "DeepSpeed", ckpt, size / 1e6)
    if how == "fsdp":
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

        with tempfile.TemporaryDirectory(prefix="gather-") as tmp:
            whole = Path(tmp) / "state.pt"
            dcp_to_torch_save(str(ckpt / SHARDS), str(whole))
            state = torch.load(whole, map_location="cpu", weights_only=True)["model"]
    else:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        state = get_fp32_state_dict_from_zero_checkpoint(str(ckpt), tag=ZERO_TAG)
    # Tied weights come back as one tensor under two names: each gets its own copy for safetensors.
    return {k: v.detach().to("cpu", torch.float32).clone().contiguous() for k, v in state.items()}


@contextmanager
def weights_file(ckpt: Path) -> Iterator[Path]:
    """The checkpoint's weights as one safetensors file: its own, or gathered from its shards
    into a temporary file removed on exit."""
    if sharded_by(ckpt) is None:
        yield ckpt / WEIGHTS
        return
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory(prefix="gathered-") as tmp:
        out = Path(tmp) / WEIGHTS
        save_file(gathered_state(ckpt), str(out))
        yield out
