"""FP8 training of a model's linear layers (``train.fp8``) through torchao's float8 training.

Each eligible ``nn.Linear`` becomes torchao's ``Float8Linear``: its inputs, weights and output
gradients are cast to FP8 with one dynamic scale per tensor and multiplied on the GPU's FP8
tensor cores (H100 and H200 double their bf16 rate there); weights, optimizer state and
everything outside those multiplies stay as the run's precision keeps them (bf16 autocast over
fp32 weights). Checkpoints and the final model hold the same high-precision weights under the
same names: nothing downstream knows FP8 was used, and run.json records that it was.

Eligible: both dimensions a multiple of 16 (what the FP8 matrix multiply takes) and not the
output layer (its logits feed the loss's softmax, which FP8's range would coarsen). The gain
needs large matrices: below about 1B parameters the casts cost what the faster multiplies save.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

import torch

from clustertune.errors import UserError
from clustertune.extras import install_hint

log = logging.getLogger("clustertune")

# Compute capability of the first NVIDIA GPUs with FP8 tensor cores (Ada: L40S, RTX 4090; Hopper: 8.9 / 9.0).
FP8_CAPABILITY = (8, 9)


def check_fp8_device(device: torch.device) -> None:
    """Refuse ``train.fp8`` where this rank cannot compute in FP8, before the model is built."""
    cuda = device.type == "cuda"
    why = fp8_refusal(device.type, torch.cuda.get_device_capability(device) if cuda else None,
                      torch.cuda.get_device_name(device) if cuda else "", importlib.util.find_spec("torchao") is not None)
    if why is not None:
        raise UserError(why)


def fp8_refusal(device_type: str, capability: tuple[int, int] | None, name: str, have_torchao: bool) -> str | None:
    """Why a rank on ``device_type`` (a GPU of ``capability``, called ``name``) cannot train in
    FP8, or None where it can. The device first: without one, installing torchao would not help."""
    if device_type != "cuda" or capability is None:
        return ("train.fp8: FP8 matrix multiplies need an NVIDIA GPU with FP8 tensor cores (compute capability 8.9 "
                f"or later: H100, H200, L40S, RTX 4090), and this rank trains on the {device_type}; drop train.fp8 "
                "to train in bf16")
    if capability < FP8_CAPABILITY:
        return (f"train.fp8: this rank's {name} is compute capability {capability[0]}.{capability[1]}; FP8 tensor "
                "cores start at 8.9 (H100, H200, L40S, RTX 4090). Drop train.fp8 to train in bf16")
    if not have_torchao:
        return (f"train.fp8 needs the torchao package, not installed here: {install_hint('fp8')}; or drop train.fp8 "
                "to train in bf16")
    return None


def to_fp8(model: torch.nn.Module, sharded: bool, emulate: bool = False) -> list[str]:
    """Swap ``model``'s eligible linear layers for torchao's ``Float8Linear`` in place; returns
    their names. ``sharded``: FSDP gathers their weights already cast to FP8 (half the bytes of
    bf16 on the wire). ``emulate``: torchao's reference arithmetic instead of the GPU's FP8
    multiply (what runs on a CPU; tests only)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    out_layer = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None

    def eligible(mod: torch.nn.Module, name: str) -> bool:
        return (isinstance(mod, torch.nn.Linear) and mod is not out_layer
                and mod.in_features % 16 == 0 and mod.out_features % 16 == 0)

    names = [n for n, m in model.named_modules() if eligible(m, n)]
    if not names:
        kinds = sorted({type(m).__name__ for m in model.modules() if type(m).__name__ in ("Conv1D", "Linear")})
        raise UserError(f"train.fp8: no layer of this {type(model).__name__} can compute in FP8 (torchao converts "
                        f"torch.nn.Linear layers whose dimensions are multiples of 16; this model has "
                        f"{', '.join(kinds) or 'neither'}: GPT-2's Conv1D is not one). Drop train.fp8")
    config = Float8LinearConfig(enable_fsdp_float8_all_gather=sharded, emulate=emulate)
    convert_to_float8_training(model, module_filter_fn=eligible, config=config)
    log.info("fp8: %d linear layers multiply in FP8 (torchao, one dynamic scale per tensor); the output layer "
             "and the rest stay in %s", len(names), "bf16")
    return names


def fp8_layers(model: Any) -> int:
    """How many of ``model``'s layers are torchao's ``Float8Linear`` (0 without torchao)."""
    return sum(1 for m in model.modules() if type(m).__name__ == "Float8Linear")
