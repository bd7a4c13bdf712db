"""The largest model that trains: plain single-device training vs ZeRO-3 + offload (and FSDP +
offload), stepping up a ladder of GPT-2-shaped sizes, each size in a fresh process.

    .venv/bin/python benchmarks/largest_model.py                  # on a GPU: 124M ... 13B, seq 1024
    .venv/bin/python benchmarks/largest_model.py --toy            # on CPU: tiny ladder, 4 MiB "device"

For each setup the ladder is climbed until a size fails (out of memory, or over the budget);
the table gives the largest size that trained, its tokens/s, and the ratio of the largest sizes
(offload / plain; the goal on a GPU is >= 1.5x). On a GPU the limit is the GPU itself: CUDA's
out-of-memory error ends a setup's climb. On CPU there is no device to run out of, so
``--max-bytes`` stands for the device: a size fails when the weights, gradients and optimizer
state this process holds on the "device" after the first step (measured, as estimate-memory's
tests measure them) exceed it; ``--host-bytes`` does the same for offloaded state. Activations
are not counted in that mode, so CPU runs are smoke runs of the comparison, not results.

The setups (one process, world size 1, AdamW; bf16 autocast on a GPU):
- ``plain``: the model and AdamW on the device;
- ``zero3-offload``: DeepSpeed ZeRO-3 with parameters and optimizer state in host memory, the
  DeepSpeed config clustertune builds for ``train.deepspeed_preset=zero3-offload``;
- ``fsdp-offload``: FSDP2 with CPUOffloadPolicy, sharded as clustertune shards it.
It needs torch, transformers and (for ZeRO) deepspeed; no hub, no datasets (random tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# (layers, width, heads): GPT-2 small, medium, large, XL, then wider ones in the GPT-3 family's shapes.
GPU_LADDER = [(12, 768, 12), (24, 1024, 16), (36, 1280, 20), (48, 1600, 25), (32, 2560, 32),
              (32, 3072, 32), (34, 3584, 28), (36, 4096, 32), (40, 5120, 40)]
TOY_LADDER = [(2, 64, 2), (2, 128, 2), (4, 128, 4), (4, 192, 4), (6, 256, 4), (8, 320, 4), (8, 384, 6)]
SETUPS = ("plain", "zero3-offload", "fsdp-offload")


def n_params(layers: int, width: int, vocab: int, seq: int) -> int:
    return 12 * layers * width * width + 13 * layers * width + (vocab + seq) * width + 2 * width


# -- one size, one setup, in this process -----------------------------------------------------

def _process_group() -> None:
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"})
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    if torch.cuda.is_available():
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def _zero3_offload_config(batch: int, mixed: bool, threshold: int | None) -> dict[str, Any]:
    from clustertune.recipe.load import load_recipe
    from clustertune.recipe.ds_config import build_config

    recipe = load_recipe({"name": "largest", "task": "causal_lm",
                          "model": {"config": "gpt2", "tokenizer": "train"},
                          "data": {"dataset": "builtin:pydoc"},
                          "train": {"batch_size": batch, "strategy": "deepspeed", "deepspeed_preset": "zero3-offload",
                                    "lr": 1e-4}})
    cfg, _ = build_config(recipe.train, 1, "bf16" if mixed else "no")
    if threshold is not None:
        cfg["zero_optimization"]["stage3_param_persistence_threshold"] = threshold
    return cfg


def run_one(setup: str, layers: int, width: int, heads: int, a: argparse.Namespace) -> dict[str, Any]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.train import held_state

    gpu = torch.cuda.is_available()
    device = torch.device("cuda" if gpu else "cpu")
    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=a.vocab, n_positions=a.seq,
                        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    if a.checkpointing:
        model.gradient_checkpointing_enable()
    params = sum(p.numel() for p in model.parameters())
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if gpu else torch.autocast("cpu", enabled=False)
    engine = None
    if setup == "plain":
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=gpu)
    elif setup == "fsdp-offload":
        from clustertune.train.strategies.accel import shard_model

        _process_group()
        shard_model(model, offload=True)  # from host memory: the whole model never visits the device
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    else:
        import deepspeed

        from clustertune.train.strategies.ds_ops import skip_the_cpu_shm_all_reduce

        skip_the_cpu_shm_all_reduce()  # an op for inference only, compiled on CPU machines otherwise
        _process_group()
        deepspeed.init_distributed(dist_backend="nccl" if gpu else "gloo")
        engine, opt, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                 config=_zero3_offload_config(a.batch, gpu, a.persistence_threshold),
                                                 dist_init_required=False)
        model = engine
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), device=device)
    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        if engine is not None:
            engine.backward(loss)
            before = _held(setup, engine.module, opt) if step == 0 else None
            engine.step()
        else:
            loss.backward()
            before = _held(setup, model, opt) if step == 0 else None
            opt.step()
            opt.zero_grad(set_to_none=True)
        if step == 0:
            held = held_state.held_around_first_step(before, _held(setup, engine.module if engine else model, opt))
            device_bytes = held["params"] + held["grads"] + held["optimizer"]
            if a.max_bytes and device_bytes > a.max_bytes:
                return {"ok": False, "params": params, "why": f"device state {device_bytes:,} B > --max-bytes"}
            if a.host_bytes and held["host"] > a.host_bytes:
                return {"ok": False, "params": params, "why": f"host state {held['host']:,} B > --host-bytes"}
        if gpu:
            torch.cuda.synchronize()  # timing only: the step is over when the GPU is done
        times.append(time.perf_counter() - t0)
    counted = times[1:] or times  # the first step builds buffers (and DeepSpeed's CPU Adam)
    return {"ok": True, "params": params, "tokens_per_s": a.batch * a.seq * len(counted) / sum(counted),
            "state": held, "peak_gpu_bytes": torch.cuda.max_memory_allocated() if gpu else None}


def _held(setup: str, model: Any, opt: Any) -> dict[str, int]:
    from clustertune.train import held_state

    if setup == "zero3-offload":
        from clustertune.train.strategies.zero import zero_state_bytes

        return zero_state_bytes(model, opt, 3, "params")
    held = held_state.measured_state_bytes(model, opt)
    return held_state.offloaded(held, ("params", "grads", "optimizer")) if setup == "fsdp-offload" else held


def child(a: argparse.Namespace) -> None:
    import torch

    setup, layers, width, heads = a.one[0], *(int(x) for x in a.one[1:])
    try:
        out = run_one(setup, layers, width, heads, a)
    except torch.OutOfMemoryError as exc:  # CUDA's; the same type on every build
        out = {"ok": False, "why": f"out of memory: {str(exc).splitlines()[0][:120]}"}
    print("RESULT " + json.dumps(out), flush=True)


# -- the ladder ---------------------------------------------------------------------------------

def climb(setup: str, ladder: list[tuple[int, int, int]], a: argparse.Namespace, passthrough: list[str]) -> list[dict[str, Any]]:
    rows = []
    for layers, width, heads in ladder:
        cmd = [sys.executable, __file__, "--one", setup, str(layers), str(width), str(heads), *passthrough]
        env = {**os.environ, "MASTER_PORT": str(29500 + len(rows) + 17 * SETUPS.index(setup))}
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            res = json.loads(line[7:]) if line else {"ok": False, "why": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] }"}
        except subprocess.TimeoutExpired:
            res = {"ok": False, "why": f"over {a.timeout}s"}
        res.setdefault("params", n_params(layers, width, a.vocab, a.seq))
        rows.append({"setup": setup, "shape": f"{layers}x{width}", **res})
        tps = f"{res['tokens_per_s']:,.0f} tokens/s" if res.get("ok") else res.get("why", "failed")
        print(f"  {setup:<14} {layers:>3} layers x {width:<5} {res['params'] / 1e6:>9.2f}M  {tps}", flush=True)
        if not res.get("ok"):
            break
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--toy", action="store_true", help="the CPU smoke ladder: tiny sizes, vocab 512, seq 64, 4 MiB device")
    p.add_argument("--setups", default="plain,zero3-offload,fsdp-offload")
    p.add_argument("--vocab", type=int, default=None)
    p.add_argument("--seq", type=int, default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--steps", type=int, default=4, help="steps per size; the first is not timed")
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing in every setup")
    p.add_argument("--max-bytes", type=int, default=None, help="device budget for weights+grads+optimizer (CPU runs)")
    p.add_argument("--host-bytes", type=int, default=None, help="host budget for offloaded state (CPU runs)")
    p.add_argument("--persistence-threshold", type=int, default=None,
                   help="ZeRO-3 stage3_param_persistence_threshold (default DeepSpeed's; --toy: 0)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per size")
    p.add_argument("--json", default=None, help="also write the rows here")
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    p.add_argument("--one", nargs=4, default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.smoke and not a.one:
        a.toy, a.steps, a.setups = True, 2, "plain"
    toy = a.toy
    a.vocab = a.vocab or (512 if toy else 50304)
    a.seq = a.seq or (64 if toy else 1024)
    a.batch = a.batch or (4 if toy else 1)  # batch 1: the question is what the state leaves room for
    if toy:
        a.max_bytes = a.max_bytes or 4 * 2**20
        a.host_bytes = a.host_bytes or 64 * 2**20
        # Toy tensors are all under DeepSpeed's 100,000-element threshold: without this
        # ZeRO-3 would keep every one of them whole on the device.
        a.persistence_threshold = 0 if a.persistence_threshold is None else a.persistence_threshold
    if a.one:
        child(a)
        return
    passthrough = ["--vocab", str(a.vocab), "--seq", str(a.seq), "--batch", str(a.batch), "--steps", str(a.steps)]
    for flag, value in (("--max-bytes", a.max_bytes), ("--host-bytes", a.host_bytes),
                        ("--persistence-threshold", a.persistence_threshold)):
        if value is not None:
            passthrough += [flag, str(value)]
    if a.checkpointing:
        passthrough.append("--checkpointing")
    ladder = TOY_LADDER if toy else GPU_LADDER
    print(f"ladder: {len(ladder)} GPT-2-shaped sizes, vocab {a.vocab}, seq {a.seq}, batch {a.batch}, {a.steps} steps each"
          + (f", device budget {a.max_bytes:,} B" if a.max_bytes else "") + (f", host budget {a.host_bytes:,} B" if a.host_bytes else ""))
    rows, best = [], {}
    for setup in [s for s in a.setups.split(",") if s]:
        climbed = climb(setup, ladder, a, passthrough)
        rows += climbed
        ok = [r for r in climbed if r.get("ok")]
        best[setup] = ok[-1] if ok else None
    print("\nsetup           largest that trains      tokens/s")
    for setup, r in best.items():
        print(f"{setup:<15} " + (f"{r['shape']:>8} {r['params'] / 1e6:>10.2f}M  {r['tokens_per_s']:>10,.0f}" if r else "none"))
    if best.get("plain"):
        for setup in ("zero3-offload", "fsdp-offload"):
            if best.get(setup):
                print(f"{setup} / plain, largest size: {best[setup]['params'] / best['plain']['params']:.2f}x (goal on a GPU >= 1.5x)")
        grown = [best[s]["params"] / best["plain"]["params"] for s in ("zero3-offload", "fsdp-offload") if best.get(s)]
        if grown:
            print(f"ratio={max(grown):.2f}")  # the largest size an offloading setup trains over plain's
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump({"args": {k: v for k, v in vars(a).items() if k != "one"}, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
