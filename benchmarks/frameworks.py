"""The frameworks people time against each other, side by side on the same job: plain PyTorch
DDP, Accelerate, DeepSpeed, transformers' Trainer, and clustertune's loop.

Each side is written the way its users write it (not through clustertune): the same GPT-2-shaped
model from the same seed (dropout off, so every side computes the same function), the same
random token blocks in the same order (global step k takes blocks [k*B*W, (k+1)*B*W) over the W
ranks, as DistributedSampler and Accelerate's sharded loader hand them out), AdamW without
weight decay, transformers' linear warm-up schedule and gradient clipping at 1.0. Every side
runs under torchrun on --procs ranks in a fresh process group.

Printed per side: tokens/s over the steps after --skip (all ranks), mean step time, peak memory
of rank 0 (the GPU's allocator peak, else the process's peak resident memory) and the ratio to
clustertune; then whether the loss curves agree (each step's mean loss over the ranks, relative
tolerance --tol). On CPU ranks the timings are noise; the curve check is what the smoke run
asserts. On a GPU machine: `python benchmarks/frameworks.py --procs 8 --size gpt2`.

    python benchmarks/frameworks.py --smoke           # 2 CPU ranks, tiny model, 8 steps

--smoke checks that every side still runs and computes the same curve, not a measurement: the
sides take turns in one torchrun launch (saving four launches' start-up) and share its process
group, which the first side starts; peak memory is then the launch's, not the side's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIDES = ("ddp", "accelerate", "deepspeed", "trainer", "clustertune")
SIZES = {  # layers, width, heads, sequence, vocab, per-rank batch
    "tiny": (2, 64, 2, 64, 512, 4),
    "small": (4, 256, 4, 128, 4096, 8),
    "gpt2": (12, 768, 12, 1024, 50257, 8),
}
LR = 6e-4


# -- the job, shared by every side ----------------------------------------------------------------

def _spec(args: argparse.Namespace) -> dict[str, Any]:
    layers, width, heads, seq, vocab, batch = SIZES[args.size]
    return {"layers": layers, "width": width, "heads": heads, "seq": seq, "vocab": vocab,
            "batch": args.batch or batch, "steps": args.steps, "skip": args.skip}


def _model(spec: dict[str, Any]) -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=spec["vocab"], n_positions=spec["seq"], n_embd=spec["width"], n_layer=spec["layers"],
                     n_head=spec["heads"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                     eos_token_id=0)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


def _blocks(spec: dict[str, Any], world: int) -> Any:
    import numpy as np
    import torch

    n = spec["batch"] * world * spec["steps"]
    return torch.from_numpy(np.random.default_rng(0).integers(0, spec["vocab"], size=(n, spec["seq"]), dtype=np.int64))


def _my_batch(blocks: Any, spec: dict[str, Any], step: int, rank: int, world: int) -> Any:
    """Rank ``rank``'s part of global step ``step`` (0-based): a contiguous slice of the step's blocks."""
    b = spec["batch"]
    start = (step * world + rank) * b
    return blocks[start:start + b]


def _device(local_rank: int) -> Any:
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _peak_mb() -> float:
    import resource

    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 1e6
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux


def _schedule(optimizer: Any, spec: dict[str, Any]) -> Any:
    from transformers import get_linear_schedule_with_warmup

    return get_linear_schedule_with_warmup(optimizer, spec["skip"], spec["steps"])


class Clock:
    """Wall time from the end of step ``skip`` to the end of the last step (device synced)."""

    def __init__(self, spec: dict[str, Any]):
        self.spec, self.marks = spec, {}

    def step_done(self, step: int) -> None:  # 1-based
        if step in (self.spec["skip"], self.spec["steps"]):
            _sync()
            self.marks[step] = time.perf_counter()

    def seconds(self) -> float:
        return self.marks[self.spec["steps"]] - self.marks[self.spec["skip"]]


def _mean_over_ranks(local: list[Any]) -> list[float]:
    """Each step's loss averaged over the ranks, read once at the end (no sync in the loop)."""
    import torch
    import torch.distributed as dist

    t = torch.stack([x.detach().float() for x in local])
    if dist.is_initialized():
        dist.all_reduce(t)
        t /= dist.get_world_size()
    return [float(v) for v in t.cpu()]


# -- the sides --------------------------------------------------------------------------------------

def side_ddp(spec: dict[str, Any]) -> tuple[list[float], Clock]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    local_rank = int(os.environ["LOCAL_RANK"])
    device = _device(local_rank)
    if not dist.is_initialized():  # (at the smoke size a side before it may have started it)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = DDP(_model(spec).to(device), device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    sched = _schedule(opt, spec)
    blocks, clock, losses = _blocks(spec, world), Clock(spec), []
    for step in range(spec["steps"]):
        x = _my_batch(blocks, spec, step, rank, world).to(device, non_blocking=True)
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        clock.step_done(step + 1)
    curve = _mean_over_ranks(losses)
    dist.destroy_process_group()
    return curve, clock


def side_accelerate(spec: dict[str, Any]) -> tuple[list[float], Clock]:
    import torch
    from accelerate import Accelerator

    acc = Accelerator(cpu=not torch.cuda.is_available())  # on CPU ranks it needs telling
    world = acc.num_processes
    blocks = _blocks(spec, world)
    # A plain DataLoader over the blocks: Accelerate shards it, rank r taking batch r of every W.
    loader = torch.utils.data.DataLoader(blocks, batch_size=spec["batch"], shuffle=False)
    model = _model(spec)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    # Accelerate steps a prepared scheduler once per process at every optimizer step (its loader
    # is per process), so its users give it W times the steps, as its examples do.
    sched = _schedule(opt, {**spec, "skip": spec["skip"] * world, "steps": spec["steps"] * world})
    model, opt, loader, sched = acc.prepare(model, opt, loader, sched)
    clock, losses = Clock(spec), []
    for step, x in enumerate(loader):
        loss = model(input_ids=x, labels=x).loss
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        clock.step_done(step + 1)
    curve = _mean_over_ranks(losses)
    acc.end_training()
    return curve, clock


def side_deepspeed(spec: dict[str, Any]) -> tuple[list[float], Clock]:
    import deepspeed
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    device = _device(local_rank)
    # Leaves unbuilt the op DeepSpeed compiles on a CPU machine for inference only (its steps are untouched).
    from clustertune.train.strategies.ds_ops import skip_the_cpu_shm_all_reduce

    skip_the_cpu_shm_all_reduce()
    deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = _model(spec)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    config = {"train_micro_batch_size_per_gpu": spec["batch"], "gradient_accumulation_steps": 1,
              "gradient_clipping": 1.0, "zero_optimization": {"stage": 1}, "steps_per_print": 10**9}
    engine, opt, _, sched = deepspeed.initialize(model=model, optimizer=opt, lr_scheduler=_schedule(opt, spec),
                                                 config=config)
    blocks, clock, losses = _blocks(spec, world), Clock(spec), []
    for step in range(spec["steps"]):
        x = _my_batch(blocks, spec, step, rank, world).to(engine.device)
        loss = engine(input_ids=x, labels=x).loss
        engine.backward(loss)
        engine.step()  # clips, steps the optimizer and the schedule, zeroes the gradients
        losses.append(loss.detach())
        clock.step_done(step + 1)
    return _mean_over_ranks(losses), clock


def side_trainer(spec: dict[str, Any]) -> tuple[list[float], Clock]:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    world = int(os.environ.get("WORLD_SIZE", "1"))
    blocks = _blocks(spec, world)
    clock, curve = Clock(spec), []

    class Blocks(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return len(blocks)

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"input_ids": blocks[i], "labels": blocks[i]}

    class Watch(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            clock.step_done(state.global_step)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:  # the mean over the ranks of the step just done
                # Trainer divides the summed token losses by every label position (B*T), not by
                # the B*(T-1) positions a causal LM predicts: scaled back for the comparison.
                curve.append(float(logs["loss"]) * spec["seq"] / (spec["seq"] - 1))

    cuda = torch.cuda.is_available()
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="bench-trainer-"), per_device_train_batch_size=spec["batch"],
        learning_rate=LR, weight_decay=0.0, warmup_steps=spec["skip"], lr_scheduler_type="linear",
        max_steps=spec["steps"], max_grad_norm=1.0, use_cpu=not cuda, seed=0, report_to=[], save_strategy="no",
        logging_steps=1, disable_tqdm=True, dataloader_drop_last=True, train_sampling_strategy="sequential",
        ddp_backend="nccl" if cuda else "gloo",
    )
    Trainer(model=_model(spec), args=args, train_dataset=Blocks(), callbacks=[Watch()]).train()
    return curve, clock


def side_clustertune(spec: dict[str, Any]) -> tuple[list[float], Clock]:
    import numpy as np

    from clustertune.data.prepare import Arrays
    from clustertune.recipe.load import dump_recipe, load_recipe
    from clustertune.runs.metrics_file import read_metrics
    from clustertune.runs.paths import RunPaths
    from clustertune.train.execute import make_strategy
    from clustertune.train.loop import train_loop

    world = int(os.environ.get("WORLD_SIZE", "1"))
    recipe = load_recipe({
        "name": "bench-sides", "model": {"config": "gpt2", "tokenizer": "train"},
        "data": {"dataset": "builtin:pydoc", "block_size": spec["seq"]},
        "train": {"batch_size": spec["batch"], "max_steps": spec["steps"], "log_every": 1, "lr": LR,
                  "weight_decay": 0.0, "warmup_steps": spec["skip"], "lr_scheduler": "linear", "max_grad_norm": 1.0,
                  "seed": 0, "shuffle": False, "eval_every": None, "save_every": None, "eval_at_start": False,
                  "precision": "fp32", "compile": False, "pad_vocab_multiple": 1},
    })
    blocks = _blocks(spec, world).numpy().astype(np.int32)
    root = Path(os.environ["BENCH_SIDES_DIR"]) / "clustertune"
    paths = RunPaths(root)
    root.mkdir(parents=True, exist_ok=True)
    strategy = make_strategy(recipe, paths)
    train_loop(recipe, _model(spec), Arrays(input_ids=blocks), Arrays(input_ids=blocks[: spec["batch"]]), paths,
               strategy, dump_recipe(recipe), show_progress=False)
    rows = [r for r in read_metrics(paths.metrics) if r["kind"] == "train"]
    clock = Clock(spec)
    clock.marks = {r["step"]: r["time"] for r in rows if r["step"] in (spec["skip"], spec["steps"])}
    return [float(r["loss"]) for r in rows], clock


def run_side(names: list[str], spec: dict[str, Any]) -> None:
    """Under torchrun: each side in turn (one, except at the smoke size); rank 0 prints a JSON
    line per side."""
    import torch.distributed as dist

    shared = len(names) > 1
    if shared:
        # One group for every side of the launch: the first side starts it as its users do, and
        # the others find it up (each uses a group it finds). Started a second time from
        # torchrun's store, a group can read the keys of the one before it and wait forever.
        dist.destroy_process_group = lambda *a, **k: None  # type: ignore[assignment]
    for name in names:
        curve, clock = globals()[f"side_{name}"](spec)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if dist.is_initialized():  # Trainer and DeepSpeed leave their process group up
            dist.barrier()
            dist.destroy_process_group()  # (a no-op while the sides share the group)
        if shared and "accelerate" in sys.modules:  # its process state outlives its side: the next starts afresh
            from accelerate.state import AcceleratorState

            AcceleratorState._reset_state(reset_partial_state=True)
        if int(os.environ.get("RANK", "0")) == 0:
            measured = spec["steps"] - spec["skip"]
            secs = clock.seconds()
            print("SIDE " + json.dumps({"side": name, "curve": curve, "tokens_per_s": measured * spec["batch"] * world
                                        * spec["seq"] / secs, "step_ms": 1e3 * secs / measured,
                                        "peak_mb": _peak_mb(), "world": world}), flush=True)
    # The job is done and reported. Left to the interpreter's finalizer, a rank aborts now and
    # then (a native gloo/DeepSpeed thread still alive needs the GIL while Python finalizes:
    # std::terminate, exit 134 after training finished: 2 smoke runs in 5 before
    # this line). clustertune's own ranks leave the same way (train/attempt.py, exit_rank).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# -- side by side -------------------------------------------------------------------------------------

def launch(names: list[str], spec: dict[str, Any], procs: int, workdir: Path) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}",
           __file__, "--side", ",".join(names), "--spec", json.dumps(spec)]
    env = {**os.environ, "BENCH_SIDES_DIR": str(workdir), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    found = [json.loads(line[len("SIDE "):]) for line in out.stdout.splitlines() if line.startswith("SIDE ")]
    if out.returncode != 0 or [r["side"] for r in found] != names:
        raise SystemExit(f"side {','.join(names)} failed (exit {out.returncode}):\n{out.stdout[-3000:]}\n"
                         f"{out.stderr[-3000:]}")
    return found


def curves_agree(rows: list[dict[str, Any]], tol: float) -> list[str]:
    """The steps where a side's loss is not the first side's within ``tol`` (relative)."""
    ref = rows[0]
    bad = []
    for r in rows[1:]:
        if len(r["curve"]) != len(ref["curve"]):
            bad.append(f"{r['side']}: {len(r['curve'])} losses, {ref['side']} has {len(ref['curve'])}")
            continue
        for i, (a, b) in enumerate(zip(ref["curve"], r["curve"]), 1):
            if abs(a - b) > tol * abs(a):
                bad.append(f"{r['side']} step {i}: {b:.6f} vs {ref['side']} {a:.6f}")
    return bad


def table(rows: list[dict[str, Any]], spec: dict[str, Any], procs: int) -> list[str]:
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    lines = [f"GPT-2 shape: {spec['layers']} layers, width {spec['width']}, sequence {spec['seq']}, batch "
             f"{spec['batch']} per rank x {procs} ranks on {device}; {spec['steps']} steps ({spec['skip']} not timed)",
             f"{'side':<12} {'tokens/s':>12} {'step ms':>9} {'peak MB':>9} {'final loss':>11}"]
    for r in rows:
        lines.append(f"{r['side']:<12} {r['tokens_per_s']:>12,.0f} {r['step_ms']:>9.1f} {r['peak_mb']:>9.0f} "
                     f"{r['curve'][-1]:>11.5f}")
    ours = next((r for r in rows if r["side"] == "clustertune"), None)
    if ours is not None:
        for r in rows:
            if r is not ours:
                lines.append(f"ratio clustertune / {r['side']}: {ours['tokens_per_s'] / r['tokens_per_s']:.2f}x")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--sides", default=",".join(SIDES), help="Which sides, comma-separated.")
    ap.add_argument("--procs", type=int, default=2, help="Ranks per side (one per GPU on a GPU machine).")
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--batch", type=int, default=0, help="Per-rank batch (default: the size's).")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-4, help="Relative tolerance of the loss curves.")
    ap.add_argument("--json", help="Also write the rows here.")
    ap.add_argument("--smoke", action="store_true", help="2 CPU ranks, tiny model, 8 steps.")
    args = ap.parse_args()
    if args.side:
        run_side(args.side.split(","), json.loads(args.spec))
        return
    if args.smoke:
        args.size, args.steps, args.skip, args.procs = "tiny", 8, 3, 2
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = [s for s in sides if s not in SIDES]
    if unknown or not sides:
        raise SystemExit(f"--sides: unknown {unknown}; choose from {', '.join(SIDES)}")
    spec = _spec(args)
    with tempfile.TemporaryDirectory(prefix="bench-sides-") as d:
        rows = []
        for turn in ([sides] if args.smoke else [[name] for name in sides]):
            for row in launch(turn, spec, args.procs, Path(d)):
                rows.append(row)
                print(f"  {row['side']:<12} {row['tokens_per_s']:>12,.0f} tokens/s", flush=True)
    for line in table(rows, spec, args.procs):
        print(line)
    bad = curves_agree(rows, args.tol)
    print(f"loss curves: {'the same on every side' if not bad else 'differ'} (relative tolerance {args.tol:g})")
    for line in bad[:20]:
        print(f"  {line}")
    ours = next((r for r in rows if r["side"] == "clustertune"), None)
    others = [r for r in rows if r is not ours]
    if ours is not None and others:
        # clustertune's tokens/s over the fastest other side's
        print(f"ratio={ours['tokens_per_s'] / max(r['tokens_per_s'] for r in others):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"spec": spec, "procs": args.procs, "rows": rows}, indent=2))
    if bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
