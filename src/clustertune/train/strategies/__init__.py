"""Strategies: how the model, gradients and optimizer state are spread across processes.

``ddp`` and ``fsdp`` run on Accelerate (FSDP2 plugin); ``deepspeed`` drives DeepSpeed ZeRO
directly. The training loop sees only :class:`Strategy`.
"""

from clustertune.train.strategies.base import Strategy

__all__ = ["Strategy"]
