"""DDP, FSDP2 and DeepSpeed ZeRO-2/3 (and ZeRO-2 and FSDP2 with CPU offload) on 2 CPU ranks.

For each strategy, in its own launched job (Accelerate and DeepSpeed keep process-wide state):
- the 20-step loss curve is within 1e-3 of single-process training on the same global batch;
- the checkpoint of step 10 was written by every rank and sealed (state.json names the
  strategy); a second job resumes from it and continues the same curve to the same eval loss;
- the final ``model/`` directory is plain ``save_pretrained`` output, gathered from the shards:
  it loads here, in a process without any strategy, and gives the run's final eval loss;
- each rank's host memory after building the model is measured against estimate-memory (under
  ZeRO-3 each rank builds only its partitions, fresh and pretrained).

Each job is ``python -m torch.distributed.run --standalone --nproc_per_node 2`` on
``strategy_driver.py``, which runs clustertune's node side on every rank.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import HF_ZERO2, HF_ZERO3, SGD_64, TINY_CAUSAL, read_jsonl, with_

pytestmark = [pytest.mark.slow, pytest.mark.ranks]

DRIVER = Path(__file__).with_name("strategy_driver.py")
STEPS, SAVE_AT = 20, 10
NO_DROPOUT = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}  # same maths at any batch split
# 33 evaluation samples: on 2 ranks at batch 4, 17 and 16, so 5 and 4 batches before padding.
# Under FSDP and ZeRO-3 every forward is a collective: uneven shares would hang the evaluation.
BASE = with_(
    TINY_CAUSAL,
    model={"config_overrides": {**TINY_CAUSAL["model"]["config_overrides"], **NO_DROPOUT}},
    data={**TINY_CAUSAL["data"], "max_eval_samples": 33},
    train={"batch_size": 8, "max_steps": STEPS, "log_every": 1, "save_every": SAVE_AT,
           "eval_at_start": False},
)
# 2 ranks x 4 = the single process's batch of 8, in the same order (see data/loader.py).
STRATEGIES: dict[str, dict[str, Any]] = {
    "ddp": {"strategy": "ddp"},
    "fsdp": {"strategy": "fsdp"},
    "zero2": {"strategy": "deepspeed", "zero_stage": 2},
    "zero3": {"strategy": "deepspeed", "zero_stage": 3},
}


def need_deepspeed(train: dict[str, Any]) -> None:
    if train["strategy"] != "deepspeed" or importlib.util.find_spec("deepspeed") is not None:
        return
    msg = "DeepSpeed is not installed: `bash scripts/setup.sh test` installs it (DS_BUILD_OPS=0)"
    if os.environ.get("CLUSTERTUNE_REQUIRE_SERVICES") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def train_losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"}


def final_eval_loss(run_dir: Path) -> float:
    return float(json.loads((run_dir / "summary.json").read_text())["final_eval"]["eval_loss"])


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import clustertune as ct

    root = tmp_path_factory.mktemp("single")
    run = ct.run(ct.load_recipe(BASE), runs_root_dir=root, show_progress=False)
    return run.paths.root


def job_dir(where: Path, recipe: dict[str, Any], baseline: Path) -> Path:
    """A run directory as the submitting side leaves it: resolved recipe (a DeepSpeed JSON's values
    in it, for the 2 ranks of :func:`launch`), tokenizer and the reference to the prepared data
    (the baseline's: the strategy does not change the data)."""
    import clustertune as ct
    from clustertune.recipe.ds_config import resolve_deepspeed_json

    where.mkdir(parents=True)
    resolved = resolve_deepspeed_json(ct.load_recipe(recipe), 2).recipe
    (where / "recipe.yaml").write_text(yaml.safe_dump(resolved.to_plain()))
    shutil.copytree(baseline / "tokenizer", where / "tokenizer")
    shutil.copy2(baseline / "data.json", where / "data.json")
    return where


def launch(run_dir: Path, resume: Path | None = None, sizes: str = "", also: list[str] | None = None) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(DRIVER), str(run_dir)] + ([str(resume)] if resume else []) + (["--sizes", sizes] if sizes else [])
    cmd += ["--also", *also] if also else []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=DRIVER.parents[2])
    assert out.returncode == 0, f"{' '.join(cmd)} failed:\n{out.stdout[-4000:]}\n{out.stderr[-8000:]}"


# estimate-memory is checked against what each rank really holds after its first step, on three
# model sizes: the recipe's own (2 layers x 64) and two more that the same launch trains for one
# step after the 20-step run (strategy_driver.py --sizes), in the same processes. A DeepSpeed
# engine is destroyed at the end of each run, so one process can build the next; piggy-backing
# costs a few seconds per size where a launch per size would cost a torch import and a process
# group each. The sizes are chosen so that the largest tensors cross ZeRO-3's persistence
# threshold (100,000 elements: smaller ones stay whole on every rank) at the larger sizes.
SIZES = "4x128,6x256"
MEMORY_KEY = {"fsdp": "fsdp", "zero2": "zero2", "zero3": "zero3"}


def check_state_memory(run_dir: Path, key: str) -> None:
    """Each rank's measured bytes of weights, gradients and optimizer state (device and host)
    within 10% of ``estimate`` for the strategy, at each model size the launch trained."""
    from transformers import AutoConfig

    from clustertune.train import held_state, memory

    dirs = [run_dir, *sorted((run_dir / "sizes").glob("*x*"))]
    assert len(dirs) == 3, dirs
    sizes = []
    for d in dirs:
        shape = memory.model_shape(AutoConfig.from_pretrained(d / "model"), "causal_lm")
        est = memory.estimate(shape, key, 2, activations=0)
        rows = [r for r in read_jsonl(d / "metrics.jsonl") if r["kind"] == "state_memory"]
        assert len(rows) == 1 and rows[0]["step"] == 1 and len(rows[0]["ranks"]) == 2, rows
        for rank, held in enumerate(rows[0]["ranks"]):
            for kind in held_state.KINDS:
                want, got = getattr(est, kind), held[kind]
                assert abs(got - want) <= 0.10 * want if want else got == 0, (d.name, key, rank, kind, got, want)
            # Host memory the model took at build: under FSDP rank 1 built it on the meta device
            # (nothing) and received its shards from rank 0; every other way each rank built it whole.
            want = memory.build_host_bytes(shape, key, 2, rank)
            assert abs(held["built"] - want) <= 0.10 * want if want else held["built"] == 0, (d.name, key, rank, held)
        if key.startswith("fsdp"):
            assert rows[0]["ranks"][1]["built"] == 0 < rows[0]["ranks"][0]["built"]
        sizes.append(shape.n_params)
    assert len(set(sizes)) == 3 and max(sizes) > 30 * min(sizes)  # three sizes, far apart


def plain_eval_loss(model_dir: Path, run_dir: Path) -> float:
    """Eval loss of a save_pretrained directory, computed with transformers alone."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import clustertune as ct
    from clustertune.data.prepare import prepare_split
    from clustertune.data.sources import load_raw

    recipe = ct.load_recipe(run_dir / "recipe.yaml")
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    blocks = prepare_split(recipe, load_raw(recipe.data, recipe.train.seed).validation, tok, "validation")
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    ids = torch.from_numpy(blocks.input_ids.astype("int64"))
    with torch.no_grad():
        return float(model(input_ids=ids, labels=ids).loss)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_strategy_matches_single_process_resumes_and_saves_plain_model(
    name: str, baseline: Path, tmp_path: Path
) -> None:
    train = {**STRATEGIES[name], "batch_size": 4}
    need_deepspeed(train)
    recipe = with_(BASE, train=train)
    full = job_dir(tmp_path / "full", recipe, baseline)
    # ZeRO-3 also fine-tunes the baseline's model, loaded straight into each rank's partitions.
    pretrained = job_dir(tmp_path / "pretrained", with_({**BASE, "model": {"name_or_path": str(baseline / "model")}}, train={
        **train, "max_steps": 1, "save_every": None, "eval_at_start": True}), baseline) if name == "zero3" else None
    launch(full, sizes=SIZES if name in MEMORY_KEY else "", also=[f"{pretrained}::"] if pretrained else None)

    want, got = train_losses(baseline), train_losses(full)
    assert sorted(got) == list(range(1, STEPS + 1))
    worst = max(abs(got[s] - want[s]) for s in want)
    assert worst < 1e-3, f"{name}: loss curve differs from single-process by {worst}"
    assert got[STEPS] < got[1] - 0.3  # it learnt something: the comparison is not of two flat lines

    ckpt = full / "checkpoints" / f"step-{SAVE_AT:08d}"
    state = json.loads((ckpt / "state.json").read_text())
    assert state["strategy"] == train["strategy"] and state["world_size"] == 2
    assert all((ckpt / f).is_file() for f in state["files"])  # shards of both ranks listed and present
    assert not list((full / "checkpoints").glob(".tmp-*"))
    # RUN@step-N of a sharded run (generate, eval, export, a base): its shards gathered on this one
    # CPU, without the ranks, are the single process's weights at that step.
    from safetensors.torch import load_file

    from clustertune.train.gather import gathered_state, sharded_by

    assert sharded_by(ckpt) == {"ddp": None, "fsdp": "fsdp"}.get(name, "deepspeed")
    gathered, single = gathered_state(ckpt), load_file(str(baseline / "checkpoints" / ckpt.name / "model.safetensors"))
    common = set(gathered) & set(single)
    assert len(common) >= len(single) - 1, (sorted(single), sorted(gathered))  # a tied weight under one name or two
    worst_w = max(float((gathered[k] - single[k]).abs().max()) for k in common)
    assert worst_w < 1e-3, f"{name}: gathered weights differ from single-process by {worst_w}"
    # ... and they load into the model the run's recipe builds, as RUN@step-N loads them.
    from clustertune.models.build import build_model, resolve_config
    from clustertune.models.tokenizer import load_tokenizer
    from clustertune.recipe.load import load_recipe
    from clustertune.train.gather import weights_file
    from clustertune.train.trainable import load_weights

    built = load_recipe(recipe)
    tok = load_tokenizer(str(full / "tokenizer"))
    model = build_model(built, resolve_config(built, tok, None), tok)
    with weights_file(ckpt) as file:
        load_weights(model, file)
    loaded = model.state_dict()
    assert max(float((loaded[k] - single[k]).abs().max()) for k in single) < 1e-3

    # Resume from step 10 in a fresh job: the same curve from step 11 and the same end.
    resumed = job_dir(tmp_path / "resumed", recipe, baseline)
    (resumed / "checkpoints").mkdir()
    shutil.copytree(ckpt, resumed / "checkpoints" / ckpt.name)
    launch(resumed, resumed / "checkpoints" / ckpt.name)
    after = train_losses(resumed)
    assert sorted(after) == list(range(SAVE_AT + 1, STEPS + 1))
    assert max(abs(after[s] - got[s]) for s in after) < 1e-4
    assert abs(final_eval_loss(resumed) - final_eval_loss(full)) < 1e-4

    # The final model, gathered from the shards, is a plain save_pretrained directory.
    assert (full / "model" / "config.json").is_file()
    assert abs(plain_eval_loss(full / "model", full) - final_eval_loss(full)) < 1e-4
    if name in MEMORY_KEY:
        check_state_memory(full, MEMORY_KEY[name])
    if pretrained is not None:
        check_loaded_into_partitions(pretrained, baseline)


def check_loaded_into_partitions(run_dir: Path, baseline: Path) -> None:
    """A pretrained model under ZeRO-3 on 2 ranks: each rank built only its half of the weights,
    and they are the checkpoint's (the evaluation before any step gives the baseline's final loss)."""
    from transformers import AutoConfig

    from clustertune.train import memory

    (first,) = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "eval" and r["step"] == 0]
    assert abs(first["eval_loss"] - final_eval_loss(baseline)) < 1e-4, (first, final_eval_loss(baseline))
    shape = memory.model_shape(AutoConfig.from_pretrained(baseline / "model"), "causal_lm")
    (row,) = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "state_memory"]
    for rank, held in enumerate(row["ranks"]):
        assert abs(held["built"] - shape.sharded_weight_bytes(2)) <= 0.05 * shape.sharded_weight_bytes(2), (rank, held)
        assert held["built"] < 0.6 * shape.whole_weight_bytes()  # half the model, not all of it


def test_zero2_with_cpu_optimizer_offload_matches_single_process(baseline: Path, tmp_path: Path) -> None:
    train = {"strategy": "deepspeed", "zero_stage": 2, "offload": "optimizer", "batch_size": 4}
    need_deepspeed(train)
    run_dir = job_dir(tmp_path / "offload", with_(BASE, train=train), baseline)
    launch(run_dir, sizes=SIZES)  # DeepSpeed's CPU Adam compiles on first use here (cached afterwards)
    want, got = train_losses(baseline), train_losses(run_dir)
    worst = max(abs(got[s] - want[s]) for s in want)
    assert worst < 1e-3, f"zero2 + offload: loss curve differs from single-process by {worst}"
    assert abs(plain_eval_loss(run_dir / "model", run_dir) - final_eval_loss(run_dir)) < 1e-4
    check_state_memory(run_dir, "zero2+offload")


def test_fsdp_with_cpu_offload_matches_single_process(baseline: Path, tmp_path: Path) -> None:
    # FSDP2's CPUOffloadPolicy on CPU with gloo: the shards, their gradients and the optimizer
    # state are host memory (where, on CPU, everything is); the maths must not change.
    train = {"strategy": "fsdp", "offload": "params", "batch_size": 4}
    run_dir = job_dir(tmp_path / "fsdp-offload", with_(BASE, train=train), baseline)
    launch(run_dir, sizes=SIZES)
    want, got = train_losses(baseline), train_losses(run_dir)
    worst = max(abs(got[s] - want[s]) for s in want)
    assert worst < 1e-3, f"fsdp + offload: loss curve differs from single-process by {worst}"
    assert abs(plain_eval_loss(run_dir / "model", run_dir) - final_eval_loss(run_dir)) < 1e-4
    check_state_memory(run_dir, "fsdp+offload")


def test_fsdp_with_gradient_accumulation_keeps_gradients_sharded(baseline: Path, tmp_path: Path) -> None:
    # Two micro-batches of 2 per rank: the same global batch of 8 as the single process. FSDP
    # reduce-scatters after each micro-batch, so between them every rank holds only its shard
    # of the gradients (the loop measures them there too, whole gradients FSDP keeps on its
    # unsharded parameters included), as estimate-memory counts; the curve is unchanged.
    steps = STEPS  # the learning-rate schedule follows the run's length: the baseline's
    train = {"strategy": "fsdp", "batch_size": 2, "gradient_accumulation_steps": 2, "save_every": None}
    run_dir = job_dir(tmp_path / "fsdp-accum", with_(BASE, train=train), baseline)
    launch(run_dir)
    want, got = train_losses(baseline), train_losses(run_dir)
    assert sorted(got) == list(range(1, steps + 1))
    worst = max(abs(got[s] - want[s]) for s in got)
    assert worst < 1e-3, f"fsdp with accumulation: loss curve differs from single-process by {worst}"

    from transformers import AutoConfig

    from clustertune.train import memory

    shape = memory.model_shape(AutoConfig.from_pretrained(run_dir / "model"), "causal_lm")
    est = memory.estimate(shape, "fsdp", 2, activations=0)
    (row,) = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "state_memory"]
    for rank, held in enumerate(row["ranks"]):
        assert abs(held["grads"] - est.grads) <= 0.10 * est.grads, (rank, held, est)
        assert held["grads"] < 0.6 * 4 * shape.n_params  # half the whole gradients, not all of them


# DeepSpeed JSONs as users bring them, one per optimizer DeepSpeed runs on CPU: the JSON decides
# the ZeRO stage, the optimizer and (WarmupCosineLR) the scheduler; "auto" comes from the recipe.
AUTO_LR = {"lr": "auto"}
DS_JSONS: dict[str, dict[str, Any]] = {
    "sgd-no-zero": {"zero_optimization": False, "optimizer": {"type": "SGD", "params": {**AUTO_LR, "momentum": 0.9}}},
    "adam-zero1": {"zero_optimization": {"stage": 1},
                   "optimizer": {"type": "Adam", "params": {**AUTO_LR, "betas": "auto", "eps": "auto"}},
                   "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": "auto",
                                                                      "total_num_steps": "auto"}}},
    "adamw-zero2": {"zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"},
                    "optimizer": {"type": "AdamW", "params": {**AUTO_LR, "weight_decay": 0.01}}},
    "adagrad-zero2": {"zero_optimization": {"stage": 2}, "optimizer": {"type": "Adagrad", "params": {"lr": 0.01}}},
}


def test_each_cpu_optimizer_of_a_users_deepspeed_json_trains_on_two_ranks(baseline: Path, tmp_path: Path) -> None:
    train = {"strategy": "deepspeed", "batch_size": 4, "max_steps": 4, "save_every": None, "warmup_steps": 1}
    need_deepspeed(train)
    dirs = []
    for name, ds in DS_JSONS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(ds))
        recipe = with_(BASE, train={**train, "deepspeed_config": str(tmp_path / f"{name}.json")})
        if ds["optimizer"]["params"]["lr"] != "auto":
            del recipe["train"]["lr"]  # the JSON's own rate: the recipe leaves it to the JSON
        dirs.append(job_dir(tmp_path / name, recipe, baseline))
    launch(dirs[0], also=[str(d) for d in dirs[1:]])  # one launch: 4 runs in the same 2 processes
    curves = {d.name: train_losses(d) for d in dirs}
    for name, curve in curves.items():
        assert sorted(curve) == [1, 2, 3, 4] and curve[4] < curve[1], (name, curve)
    # The same model and first batch; then each optimizer takes its own path.
    assert len({round(c[1], 5) for c in curves.values()}) == 1, curves
    assert len({round(c[4], 5) for c in curves.values()}) == len(DS_JSONS), curves
    # The JSON's scheduler ran (DeepSpeed's WarmupCosineLR): the logged rate warms up to the recipe's lr.
    lrs = {r["step"]: r["lr"] for r in read_jsonl(tmp_path / "adam-zero1" / "metrics.jsonl") if r["kind"] == "train"}
    assert lrs[1] < lrs[2] and abs(max(lrs.values()) - BASE["train"]["lr"]) < 1e-9 * BASE["train"]["lr"] + 1e-12, lrs
    # The Adagrad JSON's own rate, not the recipe's.
    lrs = {r["step"]: r["lr"] for r in read_jsonl(tmp_path / "adagrad-zero2" / "metrics.jsonl") if r["kind"] == "train"}
    assert max(lrs.values()) == pytest.approx(0.01), lrs
    for d in dirs:
        assert abs(plain_eval_loss(d / "model", d) - final_eval_loss(d)) < 1e-4, d.name


# Users' own DeepSpeed JSONs as they come: the transformers docs' ZeRO-2 and ZeRO-3 (offload, "auto"
# everywhere the Trainer fills a value) and a plain-DDP SGD JSON fixing the global batch at 64.
USERS_JSONS = {
    "hf-zero2-stock": (HF_ZERO2, ("deepspeed", 2, "optimizer", 5e-5)),
    "hf-zero3-stock": (HF_ZERO3, ("deepspeed", 3, "params", 5e-5)),
    "sgd-64": (SGD_64, ("deepspeed", 0, None, 0.05)),  # the JSON's rate (DeepSpeed builds its SGD)
}


@pytest.mark.parametrize("name", list(USERS_JSONS))
def test_a_users_deepspeed_json_runs_on_two_local_ranks_as_it_validated(name: str, runs_root: Path,
                                                                        tmp_path: Path) -> None:
    """A recipe that names only the JSON: `clustertune run` on 2 local ranks trains it to
    COMPLETED, with the recipe it validated (strategy, stage, offload, learning rate, batch and
    schedule from the JSON), and the saved model is the one the run evaluated."""
    import clustertune as ct
    from clustertune import api
    from clustertune.runs.state import RunState

    need_deepspeed({"strategy": "deepspeed"})
    content, (strategy, stage, offload, lr) = USERS_JSONS[name]
    (tmp_path / "ds.json").write_text(json.dumps(content))
    recipe = {**BASE, "train": {"deepspeed_config": "ds.json", "precision": "fp32", "max_steps": 3, "log_every": 1,
                                "cpu_threads": 1},
              "launch": {"procs_per_node": 2}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    validated = api.validate(str(tmp_path / "r.yaml")).recipe
    run = ct.run(str(tmp_path / "r.yaml"), show_progress=False)  # DeepSpeed's CPU Adam builds on first use
    assert run.state is RunState.COMPLETED, run.info.reason
    assert sorted(train_losses(run.paths.root)) == [1, 2, 3]
    ran = ct.load_recipe(run.paths.recipe).train
    assert ran == validated.train.model_copy(update={"deepspeed_config": ran.deepspeed_config})  # its own copy
    assert (ran.strategy, ran.zero_stage, ran.offload, ran.lr) == (strategy, stage, offload, lr)
    if name == "sgd-64":  # 64 = the micro batch x accumulation x 2 processes
        assert ran.batch_size * ran.gradient_accumulation_steps * 2 == 64
    assert abs(plain_eval_loss(run.paths.model, run.paths.root) - final_eval_loss(run.paths.root)) < 1e-4
