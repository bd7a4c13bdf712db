"""The line a run prints before DeepSpeed compiles an op on first use (minutes otherwise silent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustertune.train.strategies.ds_ops import build_line, ops_of

OFFLOAD = {"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
           "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}


def test_which_op_a_config_makes_deepspeed_compile() -> None:
    assert ops_of(OFFLOAD, cuda=False) == ["cpu_adam"]
    assert ops_of({**OFFLOAD, "optimizer": {"type": "Adagrad"}}, cuda=False) == ["cpu_adagrad"]
    assert ops_of({"optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 2}}, cuda=True) == ["fused_adam"]
    assert ops_of({"optimizer": {"type": "Adam", "params": {"torch_adam": True}}}, cuda=True) == []
    assert ops_of({"optimizer": {"type": "Adam"}, "zero_optimization": {"stage": 2}}, cuda=False) == []
    assert ops_of({"optimizer": {"type": "SGD"}, "zero_optimization": False}, cuda=True) == []


def test_the_line_comes_before_a_first_build_and_not_once_it_is_built(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # where torch keeps what it compiled
    line = build_line(OFFLOAD, cuda=False)
    assert line is not None and line.startswith("DeepSpeed: compiling its cpu_adam op (first use"), line
    (tmp_path / "cpu_adam").mkdir(exist_ok=True)
    (tmp_path / "cpu_adam" / "cpu_adam.so").write_bytes(b"\x7fELF")
    assert build_line(OFFLOAD, cuda=False) is None
