"""Tokens/s and MFU arithmetic, checked against a hand computation for GPT-2 124M."""

from __future__ import annotations

import pytest
import torch

from clustertune.train.throughput import PEAK_FLOPS, device_peak_flops, flops_per_token, mfu


def test_gpt2_124m_flops_per_token_and_mfu_by_hand() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):  # the real module structure, no memory
        model = GPT2LMHeadModel(GPT2Config())  # 12 layers, 12 heads, width 768, 1024 positions
    # Parameters: the tied token embedding counted once; position embeddings left out.
    n_all = 124_439_808
    n = n_all - 1024 * 768
    attention = 12 * 12 * 12 * 64 * 1024  # 12 * L * H * Q * T
    by_hand = 6 * n + attention
    assert by_hand == 855_166_464
    assert flops_per_token(model, 1024) == by_hand
    # The H100 row of the measurements: 353k tokens/s is 30.5% of 989 TFLOP/s.
    assert mfu(353_000, by_hand, PEAK_FLOPS["H100"]) == pytest.approx(0.3052, abs=5e-4)
    assert mfu(120_000, by_hand, 989e12) == pytest.approx(0.1038, abs=5e-4)
    # Attention FLOPs grow with the sequence; the dense part does not.
    assert flops_per_token(model, 2048) - flops_per_token(model, 1024) == attention


def test_no_peak_on_cpu_means_no_mfu_and_override_wins() -> None:
    if not torch.cuda.is_available():
        assert device_peak_flops() is None
    assert mfu(1000.0, 1e9, None) is None
    assert device_peak_flops(1e12) == 1e12
