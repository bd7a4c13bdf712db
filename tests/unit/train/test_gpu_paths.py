"""The GPU paths' mechanisms that exist on CPU, and the configuration of those that do not:
process group and device setup, fp32 loading, even evaluation shares, per-rank RNG, the split
checkpoint seal, the fp16 scaler, FSDP's mixed-precision policy and the compile fallback."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from clustertune.data.loader import eval_batches
from clustertune.data.prepare import Arrays
from clustertune.recipe.load import load_recipe
from clustertune.train import checkpoint as ckpt
from clustertune.train.strategies import group
from tests.helpers import TINY_CAUSAL, with_


def recipe(**train: object):
    return load_recipe(with_(TINY_CAUSAL, train=train))


# -- process group, device, precision probe, TF32 ---------------------------------------------


def test_group_backend_adds_gloo_for_offloaded_state_on_gpus() -> None:
    assert group.group_backend(cuda=True, offload=True) == "cuda:nccl,cpu:gloo"
    assert group.group_backend(cuda=True, offload=False) == "nccl"
    assert group.group_backend(cuda=False, offload=True) == "gloo"


def test_each_rank_uses_its_local_gpu_and_native_bf16_only() -> None:
    assert group.local_device(True, {"LOCAL_RANK": "3"}) == torch.device("cuda", 3)
    assert group.local_device(True, {}) == torch.device("cuda", 0)
    assert group.local_device(False, {"LOCAL_RANK": "3"}) == torch.device("cpu")
    # V100/T4 emulate bf16: auto means fp16 there.
    assert group.auto_precision(cuda=True, native_bf16=True) == "bf16"
    assert group.auto_precision(cuda=True, native_bf16=False) == "fp16"
    assert group.auto_precision(cuda=False, native_bf16=False) == "no"
    assert group.native_bf16() is torch.cuda.is_available()  # never True on a CPU host


ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu vme sse2 avx2 avx512f avx512bw avx512_bf16 "
        "avx512_vnni\nbugs\t\t: sysret_ss_attrs\n")
SKYLAKE_X = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512vl avx512dq\n"
SAPPHIRE = "flags\t\t: fpu avx512f amx_tile amx_int8 amx_bf16\n"


def test_auto_is_bf16_on_a_cpu_with_bf16_instructions_and_fp32_on_one_that_emulates_it() -> None:
    assert group.cpu_bf16(ZEN4) and group.cpu_bf16(SAPPHIRE)
    assert not group.cpu_bf16(SKYLAKE_X)  # AVX-512 without bf16: emulated, slower than fp32
    assert not group.cpu_bf16("")  # no flags line (not Linux, or an unreadable file)
    assert group.auto_precision(cuda=False, native_bf16=False, cpu_bf16=True) == "bf16"
    assert group.auto_precision(cuda=False, native_bf16=False, cpu_bf16=False) == "no"
    # A GPU host decides by its GPU, whatever the CPU has.
    assert group.auto_precision(cuda=True, native_bf16=False, cpu_bf16=True) == "fp16"


def test_auto_resolves_by_this_cpus_flags_and_a_pinned_precision_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.train import precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU's case, on any host
    for flags, want in ((ZEN4, "bf16"), (SKYLAKE_X, "fp32")):
        monkeypatch.setattr(precision, "cpu_bf16", lambda f=flags: group.cpu_bf16(f))
        assert precision.precision_name(recipe(precision="auto")) == want
        assert precision.precision_name(recipe(precision="fp32")) == "fp32"
        # DeepSpeed's CPU ranks are for tests; auto keeps them in fp32
        assert precision.precision_name(recipe(precision="auto", strategy="deepspeed")) == "fp32"


def test_tf32_on_gpus_by_default_and_switchable() -> None:
    assert group.fp32_matmul_precision(None, cuda=True) == "high"
    assert group.fp32_matmul_precision(False, cuda=True) == "highest"
    assert group.fp32_matmul_precision(True, cuda=False) == "highest"
    t = recipe(tf32=False, collective_timeout_minutes=90).train
    assert t.tf32 is False and t.collective_timeout_minutes == 90
    assert recipe().train.collective_timeout_minutes == 30


def test_a_sharded_strategy_gets_a_group_of_one_without_a_launcher() -> None:
    import torch.distributed as dist

    env: dict[str, str] = {}
    assert group.start_process_group(sharded=False, offload=False, timeout_minutes=1, env=env) is None
    assert not dist.is_initialized()
    own = group.start_process_group(sharded=True, offload=False, timeout_minutes=1, env=env)
    try:
        assert own is not None and dist.is_initialized() and dist.get_world_size() == 1
        assert "RANK" not in env  # on CPU Accelerate must not see a launcher
    finally:
        own.close()
    assert not dist.is_initialized()


# -- pretrained weights load in fp32 ----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_pretrained_models_load_in_fp32_whatever_their_saved_dtype(tmp_path: Path, dtype: str) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.models.build import build_model, resolve_config

    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64, vocab_size=512, bos_token_id=0, eos_token_id=0)
    saved = GPT2LMHeadModel(cfg).to(getattr(torch, dtype))
    saved.config.dtype = dtype  # as a bf16 Llama or an fp16 Pythia checkpoint says
    saved.save_pretrained(str(tmp_path / "m"))
    r = load_recipe(with_(TINY_CAUSAL, model={"config": None, "name_or_path": str(tmp_path / "m"),
                                              "tokenizer": "train", "config_overrides": {}}))

    class Tok:
        def __len__(self) -> int:
            return 512

    model = build_model(r, resolve_config(r), Tok())
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.get_input_embeddings().num_embeddings == 512  # the tokenizer fits: no resize

    class Bigger(Tok):
        def __len__(self) -> int:
            return 515

    r64 = load_recipe(with_(r.to_plain(), train={**r.to_plain()["train"], "pad_vocab_multiple": 64}))
    grown = build_model(r64, resolve_config(r64), Bigger())
    assert grown.get_input_embeddings().num_embeddings == 576  # 515 rounded up to a multiple of 64
    fresh = build_model(recipe(), resolve_config(recipe()), Tok())
    assert {p.dtype for p in fresh.parameters()} == {torch.float32}


# -- evaluation: the same number of batches on every rank -------------------------------------


@pytest.mark.parametrize(("n", "world", "bs"), [(33, 2, 4), (1001, 8, 5), (3, 4, 8), (16, 2, 4)])
def test_every_rank_gets_the_same_eval_batches_and_each_sample_once(n: int, world: int, bs: int) -> None:
    arrays = Arrays(input_ids=np.arange(n * 4, dtype=np.uint16).reshape(n, 4))
    cpu = torch.device("cpu")
    shapes, seen = set(), []
    counts = []
    for rank in range(world):
        batches = list(eval_batches(arrays, bs, rank, world, cpu))
        counts.append(len(batches))
        for batch, real in batches:
            shapes.add(tuple(batch["input_ids"].shape))
            seen += (batch["input_ids"][:real, 0] // 4).tolist()
            labels = batch["labels"]
            assert (labels[real:] == -100).all() and (labels[:real] == batch["input_ids"][:real]).all()
            assert (batch["input_ids"] >= 0).all()
    assert len(set(counts)) == 1  # no rank waits in a forward the others never run
    from clustertune.data.loader import to_batch

    plain = to_batch(arrays, np.arange(min(n, 2)), cpu)
    assert plain["labels"] is plain["input_ids"]  # one tensor: pinned and copied to the device once
    assert len(shapes) == 1  # one shape: no recompile for a short last batch
    assert sorted(seen) == list(range(n))


# -- per-rank RNG -------------------------------------------------------------------------------


def _draw() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_each_rank_resumes_its_own_rng_at_the_same_and_another_world_size(tmp_path: Path) -> None:
    states = {}
    for rank in (0, 1):
        random.seed(rank)
        np.random.seed(rank)
        torch.manual_seed(rank)
        torch.save(ckpt.rng_state(), tmp_path / ckpt.rank_rng_name(rank))
        states[rank] = _draw()
    for rank in (0, 1):  # the same world size: each rank its own generators
        ckpt.set_rng_state(ckpt.load_tensors(ckpt.rng_file(tmp_path, rank)))
        assert _draw() == states[rank]
    # More ranks than were saved: the new ones start from rank 0's; no IndexError, no crash.
    ckpt.set_rng_state(ckpt.load_tensors(ckpt.rng_file(tmp_path, 5)))
    assert _draw() == states[0]
    assert "cuda" not in ckpt.rng_state()  # on a GPU only the current device's state is saved
    with pytest.raises(ckpt.CheckpointError, match="no RNG state"):
        ckpt.rng_file(tmp_path / "nothing", 0)


# -- the checkpoint seal, split across ranks --------------------------------------------------


def test_the_seal_hashes_each_file_once_spread_over_the_ranks(tmp_path: Path) -> None:
    tmp, final = tmp_path / ".tmp-step-00000001", tmp_path / "step-00000001"
    (tmp / "shards").mkdir(parents=True)
    sizes = {"shards/__0_0.distcp": 9000, "shards/__1_0.distcp": 8000, "shards/.metadata": 300,
             "scheduler.pt": 100, "rng-0.pt": 50, "rng-1.pt": 50}
    for name, size in sizes.items():
        if name.endswith(".pt"):  # ours: read back with weights_only=True when verified
            torch.save(torch.arange(size), tmp / name)
        else:
            (tmp / name).write_bytes(bytes(range(256)) * (size // 256) + b"x" * (size % 256))
    shares = ckpt.split_shares(sizes, 2)
    assert sorted(shares[0] + shares[1]) == sorted(sizes)  # every file in exactly one share
    loads = [sum(sizes[f] for f in s) for s in shares]
    assert max(loads) < 0.6 * sum(loads)  # the two big shards went to different ranks
    for rank in (0, 1):
        ckpt.hash_share(tmp, rank, 2)
    ckpt._seal(tmp, final, 1, {"world_size": 2}, "name: x\n", hashed=ckpt.collect_shares(tmp))
    state = ckpt.verify_checkpoint(final)  # every checksum right
    assert set(state["files"]) == set(sizes) | {"recipe.yaml"}
    assert not list(final.glob(".digests-*")) and not (final / ckpt.RNG).exists()


# -- fp16: the scaler is checkpointed and a skipped step leaves the schedule -------------------


def test_grad_scaler_state_round_trips_and_a_skipped_step_does_not_move_the_schedule(tmp_path: Path) -> None:
    from accelerate import Accelerator

    from clustertune.train.precision import reset_accelerate_state
    from clustertune.train.strategies.accel import SCALER, AccelerateStrategy

    acc = Accelerator(cpu=True)
    try:
        # Accelerate makes a GradScaler only for fp16 on a GPU; the same object on the CPU
        # drives the same code (scaled backward, step_was_skipped).
        acc.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
        strat = AccelerateStrategy(recipe(), acc, sharded=False)
        model = torch.nn.Linear(4, 1)
        model, opt, sched = strat.prepare(
            model, lambda m: torch.optim.SGD(m.parameters(), lr=1.0),
            lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / (s + 1)))
        x = torch.ones(2, 4)
        strat.backward(model(x).sum())
        strat.step(model, opt, sched, None)
        assert sched.last_epoch == 1
        weights = model.weight.detach().clone()
        strat.backward(model(x).sum() * float("inf"))  # overflow: the scaler skips this step
        strat.step(model, opt, sched, None)
        assert opt.step_was_skipped and sched.last_epoch == 1 and torch.equal(model.weight, weights)
        assert acc.scaler.get_scale() == 2.0**7
        strat.save_state(model, opt, sched, tmp_path)
        assert (tmp_path / SCALER).is_file()
        acc.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        strat.load_state(model, opt, sched, tmp_path)
        assert acc.scaler.get_scale() == 2.0**7
    finally:
        reset_accelerate_state()


# -- FSDP's mixed precision ---------------------------------------------------------------------


def test_fsdp_gets_bf16_compute_with_fp32_gradient_reduction() -> None:
    from clustertune.train.strategies.accel import fsdp_plugin, mixed_precision_policy

    policy = fsdp_plugin(recipe(strategy="fsdp"), "bf16").mixed_precision_policy
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert mixed_precision_policy("fp16").reduce_dtype == torch.float32
    assert mixed_precision_policy("no") is None and fsdp_plugin(recipe(strategy="fsdp")).mixed_precision_policy is None


def test_fsdp_plugin_loads_from_rank0_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    # On GPUs Accelerate's plugin shards the model: with rank 0 holding the only real weights,
    # its CPU-RAM-efficient loading broadcasts them into every rank's shards.
    from clustertune.train.strategies.accel import fsdp_plugin

    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "False")  # the plugin writes it: put back afterwards
    assert fsdp_plugin(recipe(strategy="fsdp"), "bf16", from_rank0=True).cpu_ram_efficient_loading is True
    assert fsdp_plugin(recipe(strategy="fsdp"), "bf16").cpu_ram_efficient_loading is False


# -- torch.compile's fallback -----------------------------------------------------------------


def test_out_of_memory_in_the_first_compiled_step_propagates(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import torch._dynamo

    from clustertune.train.fastpath import compile_with_fallback

    class Hungry(torch.nn.Module):
        """Runs out of memory once, as a first step at the edge of the device's memory can."""

        calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            Hungry.calls += 1
            if Hungry.calls == 1:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
            return x * 2

    monkeypatch.setattr(logging.getLogger("clustertune"), "propagate", True)
    torch._dynamo.reset()
    model = Hungry()
    compile_with_fallback(model)
    with caplog.at_level("WARNING", logger="clustertune"):
        with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate"):
            model(torch.ones(2))
    assert Hungry.calls == 1  # raised as it was, not retried in eager mode
    assert not [r for r in caplog.records if "torch.compile failed" in r.getMessage()]
    torch._dynamo.reset()


def test_fsdp_policy_reduces_gradients_in_fp32_where_accelerates_default_rounds_them() -> None:
    """Accelerate's default bf16 policy reduces gradients across ranks in bf16 (each rank's
    gradient and their sum rounded to 8 bits of mantissa); ours computes in bf16 and reduces in
    fp32. One rank reduces nothing, so here the run shows that ours trains (fp32 loss and sharded
    fp32 gradients) and the policies are compared for the dtype the reduction uses."""
    from accelerate import FullyShardedDataParallelPlugin
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.train.strategies.accel import mixed_precision_policy, shard_model

    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64, vocab_size=512, bos_token_id=0, eos_token_id=0)
    ids = torch.randint(0, 512, (2, 16), generator=torch.Generator().manual_seed(0))
    default = FullyShardedDataParallelPlugin(fsdp_version=2)
    default.set_mixed_precision("bf16")  # what Accelerate's plugin does when given no policy
    ours = mixed_precision_policy("bf16")
    assert (ours.param_dtype, ours.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert default.mixed_precision_policy.reduce_dtype == torch.bfloat16  # else ours is no longer needed
    own = group.start_process_group(sharded=True, offload=False, timeout_minutes=1, env={})
    try:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(cfg)
        shard_model(model, offload=False, mp_policy=ours)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        assert loss.dtype == torch.float32 and torch.isfinite(loss)
        assert {p.grad.dtype for p in model.parameters() if p.grad is not None} == {torch.float32}
    finally:
        own.close()


def _graph_breaks_under_fsdp(regional: bool) -> int:
    """Graph breaks of two training steps and one evaluation of a tiny GPT-2 sharded by FSDP2,
    compiled as clustertune compiles it (dynamo's own graph capture, no code generation)."""
    import torch._dynamo
    import torch._dynamo.utils
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.models.heads import name_the_loss
    from clustertune.train.fastpath import compile_with_fallback
    from clustertune.train.strategies.accel import shard_model

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=3, n_embd=32, n_head=2, n_positions=32, vocab_size=128,
                                       bos_token_id=0, eos_token_id=0))
    name_the_loss(model, "causal_lm")
    compile_with_fallback(model, regional=regional, backend="eager")
    shard_model(model, offload=False)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    for _ in range(2):
        model(input_ids=ids, labels=ids).loss.backward()
    model.eval()
    with torch.no_grad():
        model(input_ids=ids, labels=ids)
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.reset()
    return breaks


def test_fsdp_compiles_each_block_so_its_hooks_break_no_graph() -> None:
    # On an H100, GPT-2 124M compiled whole and then sharded broke its graph 13 times: once at
    # each FSDP-hooked module. Compiled block by block, the hooks stay between the graphs.
    own = group.start_process_group(sharded=True, offload=False, timeout_minutes=1, env={})
    try:
        assert _graph_breaks_under_fsdp(regional=False) > 0  # what the check below guards against
        assert _graph_breaks_under_fsdp(regional=True) == 0
    finally:
        own.close()


def test_a_gpt2_model_names_its_loss_so_transformers_does_not_warn_at_the_first_forward() -> None:
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

    from clustertune.models.heads import name_the_loss

    cfg = GPT2Config(n_layer=1, n_embd=16, n_head=2, n_positions=16, vocab_size=64, pad_token_id=0)
    lm = GPT2LMHeadModel(cfg)
    assert lm.loss_type is None  # transformers finds no loss in the class name
    name_the_loss(lm, "causal_lm")
    assert lm.loss_type == "ForCausalLM"
    classifier = GPT2ForSequenceClassification(cfg)
    before = classifier.loss_type
    name_the_loss(classifier, "classifier")
    assert classifier.loss_type == before  # a classifier's loss is left to transformers


def test_peak_flops_tell_h100_variants_and_newer_gpus_apart() -> None:
    from clustertune.train.throughput import peak_flops_of

    assert peak_flops_of("NVIDIA H100 80GB HBM3") == 989e12
    assert peak_flops_of("NVIDIA H100 PCIe") == 756e12 and peak_flops_of("NVIDIA H100 NVL") == 835e12
    assert peak_flops_of("NVIDIA A100-SXM4-80GB") == 312e12 and peak_flops_of("NVIDIA A10G") == 70e12
    assert peak_flops_of("NVIDIA A10") == 125e12 and peak_flops_of("NVIDIA L4") == 121e12
    assert peak_flops_of("NVIDIA L40S") == 362e12 and peak_flops_of("NVIDIA B200") == 2250e12


def test_offloaded_deepspeed_state_is_pinned_only_where_there_is_a_gpu() -> None:
    from clustertune.recipe.ds_config import build_config

    cfg, _ = build_config(recipe(strategy="deepspeed", deepspeed_preset="zero3-offload").train, 2, "no")
    zero = cfg["zero_optimization"]
    assert zero["offload_optimizer"]["pin_memory"] is torch.cuda.is_available()
    assert zero["offload_param"]["pin_memory"] is torch.cuda.is_available()


def test_prefetch_keeps_order_passes_errors_and_stops_with_its_consumer() -> None:
    import threading

    from clustertune.data.loader import prefetched

    assert list(prefetched(iter(range(50)), 2)) == list(range(50))
    assert list(prefetched(iter(range(5)), 0)) == list(range(5))

    def broken():
        yield 1
        raise ValueError("text unreadable")

    with pytest.raises(ValueError, match="text unreadable"):
        list(prefetched(broken(), 2))
    before = threading.active_count()
    it = prefetched(iter(range(10**9)), 2)
    assert next(it) == 0
    it.close()
    for _ in range(50):  # the producer notices within its 0.1 s put timeout
        if threading.active_count() <= before:
            break
        threading.Event().wait(0.05)
    assert threading.active_count() <= before


def test_estimate_memory_counts_activation_bytes_once_and_gpu_working_copies() -> None:
    from clustertune.train import memory

    shape = memory.ModelShape(1_000_000, layers=2, hidden=64, vocab=100, numels=(1_000_000,))
    tokens = 4 * 32
    # 34·h bytes per token and layer for 16-bit activations, twice that in fp32.
    assert memory.activation_bytes(shape, 4, 32, True, False, False) == tokens * 2 * 34 * 64
    assert memory.activation_bytes(shape, 4, 32, False, False, False) == tokens * 2 * 68 * 64
    # Logits: fp32 and their gradient (8 bytes), plus the 16-bit pair under mixed precision.
    assert memory.activation_bytes(shape, 4, 32, True, False, True) - tokens * 2 * 34 * 64 == tokens * 100 * 12
    n = shape.n_params
    assert memory.estimate(shape, "ddp", 2, 0, mixed=True).buffers == 4 * n + 2 * n  # buckets + autocast copies
    assert memory.estimate(shape, "ddp", 1, 0).buffers == 0
    assert memory.estimate(shape, "fsdp", 2, 0, mixed=True).buffers == 0


def test_device_failures_that_are_out_of_memory_get_the_advice() -> None:
    from clustertune.train.strategies.base import OutOfMemory, explain_out_of_memory
    from clustertune.models.build import resolve_config

    r = recipe()
    config = resolve_config(r)
    for err in (RuntimeError("CUDA error: out of memory\\nCUDA kernel errors might be asynchronously reported"),
                RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")):
        with pytest.raises(OutOfMemory, match="train.batch_size"):
            with explain_out_of_memory(r, config, 1, True, 64):
                raise err
    with pytest.raises(RuntimeError, match="shape mismatch"):
        with explain_out_of_memory(r, config, 1, True, 64):
            raise RuntimeError("shape mismatch")
