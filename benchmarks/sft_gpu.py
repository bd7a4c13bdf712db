"""SFT with LoRA on one GPU: clustertune vs TRL's ``SFTTrainer``, a Llama-shaped ~1B model.

    .venv/bin/python benchmarks/sft_gpu.py                          # one GPU, bf16, 30 steps a side (10 untimed)
    .venv/bin/python benchmarks/sft_gpu.py --rounds 2
    .venv/bin/python benchmarks/sft_gpu.py --shape gpu-rehearsal    # the same path, tiny, on a CPU
    .venv/bin/python benchmarks/sft_gpu.py --smoke                  # that, 3 steps, ours and TRL only (CI)

The base is built from a config (TinyLlama's widths: 22 layers of 2048, grouped-query attention,
a 16k BPE trained on the builtin corpus), sequence 2048, batch 4, LoRA rank 16 on every linear
layer, SDPA attention on both sides (flash-attn has no wheel on the registry). The data are
chats whose answers are stretches of Python's reference documentation, long enough to fill the
sequence. Sides, fairness checks and output are those of ``sft_cpu.py`` (this only picks its
``gpu-1b`` shape), with MFU beside tokens/s, both by clustertune's formula (6N + attention, over
the device's dense bf16 peak). Goal: ours >= 1.3x ``SFTTrainer``'s tokens/s.
"""

from __future__ import annotations

import sys

from sft_cpu import main

if __name__ == "__main__":
    main(["--shape", "gpu-1b", "--steps", "30", "--skip", "10", *sys.argv[1:]])
