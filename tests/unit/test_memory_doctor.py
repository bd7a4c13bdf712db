"""estimate-memory against the bytes real models hold after a step; doctor's findings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clustertune.train import memory
from tests.conftest import cli


@pytest.mark.parametrize("layers,width,vocab", [(2, 64, 512), (4, 128, 2048), (6, 256, 4096)])
def test_estimate_matches_measured_state_after_one_step(layers: int, width: int, vocab: int) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_embd=width, n_head=4, vocab_size=vocab, n_positions=64,
                        bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, vocab, (2, 64))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()

    measured = memory.measured_state_bytes(model, opt)
    est = memory.estimate(memory.model_shape(config, "causal_lm"), "ddp", 1, activations=0)
    for kind, predicted in (("params", est.params), ("grads", est.grads), ("optimizer", est.optimizer)):
        assert abs(predicted - measured[kind]) <= 0.10 * measured[kind], (kind, predicted, measured[kind])


def test_sharding_divides_what_each_strategy_shards() -> None:
    shape = memory.ModelShape(n_params=1_000_001, layers=2, hidden=64, vocab=100)
    full = memory.estimate(shape, "ddp", 4, 0)
    z1, z2, z3 = (memory.estimate(shape, s, 4, 0) for s in ("zero1", "zero2", "zero3"))
    assert (z1.params, z1.grads) == (full.params, full.grads) and z1.optimizer == -(-full.optimizer // 4)
    assert z2.params == full.params and z2.grads == -(-full.grads // 4)
    assert z3.params == -(-full.params // 4)
    off = memory.estimate(shape, "zero3+offload", 4, 0)
    assert off.params == 0 and off.optimizer == 0 and off.host == z3.optimizer + z3.params
    with pytest.raises(ValueError):
        memory.estimate(shape, "zero4", 4, 0)


def test_estimate_memory_command(tmp_path: Path) -> None:
    res = cli("estimate-memory", "quickstart", "--devices", "4", "--gpu", "A100")
    assert res.returncode == 0, res.stderr
    lines = {ln.split()[0]: ln.split() for ln in res.stdout.splitlines()[2:] if ln.strip() and ln.split()[0] in memory.STRATEGIES}
    assert set(lines) == set(memory.STRATEGIES)
    assert float(lines["zero3"][5]) < float(lines["ddp"][5])  # per-device total shrinks when sharded
    assert lines["ddp"][-1] == "yes"  # a 4M-parameter model fits an A100
    bad = cli("estimate-memory", "quickstart", "--gpu", "TPU-v9")
    assert bad.returncode == 2 and "unknown GPU 'TPU-v9'" in bad.stderr


def test_doctor_reports_versions_tools_and_fixes(tmp_path: Path) -> None:
    import transformers

    # A PATH without the SLURM tools: doctor names each missing one with the fix.
    bare = tmp_path / "bin"
    bare.mkdir()
    res = cli("doctor", env={"PATH": str(bare), "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"torch                  {torch.__version__}" in out
    assert f"transformers           {transformers.__version__}" in out
    assert "!!  sbatch                 not found" in out and "fix: SLURM client tools" in out
    assert "offline mode (HF_HUB_OFFLINE=1)" in out
    if not torch.cuda.is_available():
        assert "none visible" in out
    assert out.strip().endswith("problem(s) found")
