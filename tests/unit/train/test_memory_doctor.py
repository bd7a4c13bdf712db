"""estimate-memory against the bytes real models hold after a step; doctor's findings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clustertune.train import held_state, memory
from tests.helpers import cli, cli_here


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

    measured = held_state.measured_state_bytes(model, opt)
    est = memory.estimate(memory.model_shape(config, "causal_lm"), "ddp", 1, activations=0)
    for kind, predicted in (("params", est.params), ("grads", est.grads), ("optimizer", est.optimizer)):
        assert abs(predicted - measured[kind]) <= 0.10 * measured[kind], (kind, predicted, measured[kind])


def test_each_strategy_holds_what_it_shards_and_keeps_small_tensors_whole_under_zero3() -> None:
    numels = (1_000_000, 50_000, 1)  # ZeRO-3 keeps tensors under 100,000 elements whole
    shape = memory.ModelShape(sum(numels), layers=2, hidden=64, vocab=100, numels=numels)
    n, shard, part, small = sum(numels), 250_000 + 12_500 + 1, -(-sum(numels) // 4), 50_001
    est = {s: memory.estimate(shape, s, 4, 0) for s in memory.STRATEGIES}
    held = {s: (e.params, e.grads, e.optimizer, e.host) for s, e in est.items()}
    assert held["ddp"] == (4 * n, 4 * n, 8 * n, 0)
    assert held["fsdp"] == (4 * shard, 4 * shard, 8 * shard, 0)
    assert held["fsdp+offload"] == (0, 0, 0, 16 * shard)
    # DeepSpeed's fp32 master copy of the partition sits beside the moments: 12 bytes.
    assert held["zero1"] == (4 * n, 4 * n, 12 * part, 0)
    assert held["zero2"] == (4 * n, 4 * part, 12 * part, 0)
    assert held["zero2+offload"] == (4 * n + 4 * part, 0, 0, 16 * part)
    assert held["zero3"] == (4 * (shard + small), 4 * shard, 12 * shard, 0)
    assert held["zero3+offload"] == (4 * small, 0, 0, 20 * shard)
    # A user's DeepSpeed JSON may lower the threshold: then everything is partitioned.
    assert memory.estimate(shape, "zero3", 4, 0, persistence_threshold=0).params == 4 * shard
    # Under mixed precision DeepSpeed's model weights are 2-byte; the master stays fp32.
    mixed = memory.estimate(shape, "zero2", 4, 0, mixed=True)
    assert (mixed.params, mixed.optimizer) == (2 * n, 12 * part)
    with pytest.raises(ValueError):
        memory.estimate(shape, "zero4", 4, 0)


def test_estimate_memory_command(tmp_path: Path) -> None:
    res = cli_here("estimate-memory", "quickstart", "--devices", "4", "--gpu", "A100")
    assert res.returncode == 0, res.stderr
    lines = {ln.split()[0]: ln.split() for ln in res.stdout.splitlines()[2:] if ln.strip() and ln.split()[0] in memory.STRATEGIES}
    assert set(lines) == set(memory.STRATEGIES)
    assert float(lines["zero3"][6]) < float(lines["ddp"][6])  # per-device total shrinks when sharded
    assert lines["ddp"][-1] == "yes"  # a 4M-parameter model fits an A100
    bad = cli_here("estimate-memory", "quickstart", "--gpu", "TPU-v9")
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
    from importlib.metadata import version

    # What adapters, QLoRA, the evaluation harness and serving run on, by version.
    for pkg in ("peft", "bitsandbytes", "lm-eval", "fastapi"):
        assert f"  ok  {pkg:<22} {version(pkg)}\n" in out, out
    assert "!!  sbatch                 not found" in out and "fix: SLURM client tools" in out
    assert "offline mode (HF_HUB_OFFLINE=1)" in out
    if not torch.cuda.is_available():
        assert "none visible" in out
    assert out.strip().endswith("problem(s) found")


def test_shared_memory_is_counted_once_for_the_first_kind_that_holds_it() -> None:
    flat = torch.zeros(100)  # one buffer, as DeepSpeed keeps weights and gradients
    tied = torch.zeros(10)
    held = held_state.distinct_bytes({
        "params": [tied, tied.view(2, 5), flat[:10]],  # a tied weight (twice) and a view
        "grads": [flat[5:30], flat[50:60]],  # overlaps the weights' view by 5 elements
        "optimizer": [flat],  # whatever of the buffer the others do not cover
    })
    assert held == {"params": (10 + 10) * 4, "grads": (20 + 10) * 4, "optimizer": 60 * 4, "host": 0}
    before = held_state.offloaded(held, ("grads", "optimizer"))
    assert (before["params"], before["grads"], before["optimizer"], before["host_grads"]) == (80, 0, 0, 120)
    # Host-side kinds are compared one by one around the step, then added up.
    after = held_state.offloaded({**held, "grads": 0, "optimizer": 300}, ("grads", "optimizer"))
    assert held_state.held_around_first_step(before, after) == {"params": 80, "grads": 0, "optimizer": 0, "host": 420}


def test_ddp_buffers_count_buckets_of_trainable_gradients_and_autocast_copies_of_matmul_weights() -> None:
    from transformers import GPT2Config

    h, v, layers, pos = 64, 512, 2, 64
    config = GPT2Config(n_layer=layers, n_embd=h, n_head=2, vocab_size=v, n_positions=pos)
    shape = memory.model_shape(config, "causal_lm")
    # By hand: per block c_attn (h x 3h + 3h), attn c_proj (h x h + h), mlp c_fc (h x 4h + 4h),
    # mlp c_proj (4h x h + h): Conv1D layers all; plus the head, tied to the token embedding
    # (v x h). Position embeddings and layer norms are not cast.
    per_block = (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    assert shape.autocast_copied == layers * per_block + v * h
    assert shape.autocast_copied < shape.n_params - pos * h  # wpe and the norms stay out
    n = shape.n_params
    # One device, fp32: no buckets, no copies; over 2 devices: a 4-byte bucket slot per
    # trainable gradient (bucket_cap_mb only splits them into 25 MB buckets); mixed adds 2
    # bytes per cast weight.
    assert memory.estimate(shape, "ddp", 1, 0).buffers == 0
    assert memory.estimate(shape, "ddp", 2, 0).buffers == 4 * n
    assert memory.estimate(shape, "ddp", 2, 0, mixed=True).buffers == 4 * n + 2 * shape.autocast_copied
    assert memory.estimate(shape, "fsdp", 2, 0, mixed=True).buffers == 0  # FSDP gathers 16-bit weights itself


def test_adapter_ddp_buffers_follow_the_trainable_weights_alone() -> None:
    numels = (1000, 100)
    shape = memory.ModelShape(1100, 2, 8, 10, numels, trainable_numels=(100,), autocast_numels=100)
    e = memory.estimate(shape, "ddp", 4, 0, mixed=True)
    assert e.buffers == 4 * 100 + 2 * 100


def test_estimate_memory_counts_auto_as_mixed_and_says_which_terms_are_gpu_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from clustertune.cli.main import main

    assert main(["estimate-memory", "quickstart", "--devices", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mixed_precision"] is True  # the quickstart's precision is auto: mixed on every GPU
    assert any(n.startswith("GPU only: precision auto") for n in out["notes"])
    ddp = next(s for s in out["strategies"] if s["strategy"] == "ddp")
    assert ddp["buffers"] > 4 * out["trainable_parameters"]  # buckets plus autocast copies
    # Said in the text output too; fp32 has no GPU-only terms.
    assert memory.gpu_notes("auto", "ddp", 2)[:2] == out["notes"][:2]
    fp32 = memory.gpu_notes("fp32", "fsdp", 2)
    assert not any(n.startswith("GPU only") for n in fp32) and any("buckets" in n for n in fp32)
    assert any("rank 0 only" in n for n in fp32)
    assert any("every rank" in n for n in memory.gpu_notes("fp32", "fsdp", 2, adapter=True))
    for key in ("zero3", "zero3+offload"):  # built into each rank's partitions
        assert any("only its fp32 partitions" in n for n in memory.gpu_notes("fp32", key, 2))
        assert any("every rank" in n for n in memory.gpu_notes("fp32", key, 2, adapter=True))
    assert any("whole fp32 model on every rank" in n for n in memory.gpu_notes("fp32", "zero2", 2))


@pytest.mark.parametrize("name", ["sgd", "adamw_8bit", "adafactor"])
def test_the_estimate_follows_the_recipes_optimizer(name: str) -> None:
    """Each optimizer's state as measured after a step, within 10% (AdamW: the test above)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.recipe.load import load_recipe
    from clustertune.train.optim import make_optimizer
    from tests.helpers import TINY_CAUSAL, with_

    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=2048, n_positions=64, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    opt = make_optimizer(load_recipe(with_(TINY_CAUSAL, train={"optimizer": name})), model)
    ids = torch.randint(0, 2048, (2, 64))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    measured = held_state.measured_state_bytes(model, opt)["optimizer"]
    est = memory.estimate(memory.model_shape(config, "causal_lm"), "ddp", 1, activations=0, optimizer=name).optimizer
    adamw = memory.estimate(memory.model_shape(config, "causal_lm"), "ddp", 1, activations=0).optimizer
    assert abs(est - measured) <= 0.10 * measured, (est, measured)
    assert est < 0.6 * adamw  # each holds much less than AdamW's two fp32 moments
