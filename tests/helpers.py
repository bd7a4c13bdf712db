"""What tests share: tiny recipes, the CLI in a fresh process, small file readers.

Tests import these from here; fixtures stay in conftest.py.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The test recipes pin fp32: ``train.precision: auto`` is bf16 on a CPU with bf16 instructions,
# and the suite's figures must not depend on which machine runs it.
TINY_CAUSAL: dict[str, Any] = {
    "name": "tiny",
    "task": "causal_lm",
    "model": {
        "config": "gpt2",
        "config_overrides": {"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 64},
        "tokenizer": "train",
        "tokenizer_vocab_size": 512,
    },
    "data": {"dataset": "builtin:pydoc", "block_size": 64, "max_eval_samples": 32},
    "train": {"precision": "fp32", "batch_size": 8, "lr": 3e-3, "max_steps": 12, "log_every": 4, "eval_at_start": True,
              "warmup_steps": 2, "lr_scheduler": "cosine", "cpu_threads": 1},
}

TINY_CLS: dict[str, Any] = {
    "name": "tinycls",
    "task": "sequence_classification",
    "model": {
        "config": "bert",
        "config_overrides": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                             "intermediate_size": 128, "max_position_embeddings": 64},
        "tokenizer": "train",
        "tokenizer_vocab_size": 512,
        "num_labels": 2,
    },
    # A quarter of the examples are longer than 32 tokens of this 512-token vocabulary: cut on purpose.
    "data": {"dataset": "builtin:pydoc-kinds", "max_length": 32, "validation_fraction": 0.1, "truncation": "allow"},
    "train": {"precision": "fp32", "batch_size": 16, "lr": 2e-3, "max_steps": 12, "log_every": 4, "cpu_threads": 1},
}

# Hugging Face's stock DeepSpeed JSONs (the transformers docs' ZeRO-2 and ZeRO-3 examples, the
# second with the docs' WarmupDecayLR, whose total_num_steps is "auto" too): "auto" wherever the
# Trainer fills a value, the optimizer (and the parameters) offloaded to the CPU.
HF_AUTO: dict[str, Any] = {
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
             "hysteresis": 2, "min_loss_scale": 1},
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                 "warmup_num_steps": "auto"}},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto", "steps_per_print": 2000,
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": False,
}
HF_ZERO2: dict[str, Any] = {**HF_AUTO, "zero_optimization": {
    "stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}, "allgather_partitions": True,
    "allgather_bucket_size": 2e8, "overlap_comm": True, "reduce_scatter": True, "reduce_bucket_size": 2e8,
    "contiguous_gradients": True}}
HF_ZERO3: dict[str, Any] = {**HF_AUTO, "zero_optimization": {
    "stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
    "offload_param": {"device": "cpu", "pin_memory": True}, "overlap_comm": True, "contiguous_gradients": True,
    "sub_group_size": 1e9, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": True},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                      "warmup_num_steps": "auto", "total_num_steps": "auto"}}}

# A user's own DeepSpeed JSON: plain data parallel (no ZeRO) with SGD, 64 samples a step in all.
SGD_64: dict[str, Any] = {"zero_optimization": False,
                          "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
                          "train_batch_size": 64}


def with_(base: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with some keys of some sections replaced."""
    out = copy.deepcopy(base)
    for sec, values in sections.items():
        if isinstance(values, dict):
            out.setdefault(sec, {}).update(values)
        else:
            out[sec] = values
    return out


def as_from_a_terminal() -> None:
    """``preexec_fn`` for a process a test treats as started from a terminal: Ctrl-C (SIGINT)
    acts on it. A test suite started in the background by a shell without job control inherits
    SIGINT ignored, and an ignored signal stays ignored across exec: Python then installs no
    KeyboardInterrupt handler, and a test's Ctrl-C or `clustertune cancel` would do nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `clustertune` console entry point in a fresh process."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    exe = Path(sys.executable).with_name("clustertune")
    return subprocess.run([str(exe), *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def cli_here(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`clustertune ARGS` through the CLI's ``main()`` in this process, with what it prints and its
    exit code, as :func:`cli` gives them. A check of bad input or a dry run then costs no new
    interpreter (importing torch and transformers: about 5 s on these machines); the console entry
    point itself is exercised in fresh processes by the tests that use :func:`cli`. ``env`` and
    ``cwd`` hold for the call and are restored after it."""
    import contextlib
    import io

    from clustertune.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["clustertune", *args], rc, out.getvalue(), err.getvalue())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (to prove nothing changed)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def wait_for_step(metrics: Path, at_least: int, timeout: float = 180) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = read_jsonl(metrics) if metrics.is_file() else []
        steps = [r["step"] for r in rows if r.get("kind") == "train"]
        if steps and steps[-1] >= at_least:
            return steps[-1]
        time.sleep(0.1)
    raise AssertionError(f"training did not reach step {at_least} in {timeout} s")


def final_weights(run_dir: Path) -> dict[str, Any]:
    """The finished model's tensors (model/model.safetensors of a run directory)."""
    from safetensors.torch import load_file

    return load_file(str(run_dir / "model" / "model.safetensors"))


def weight_difference(a: Path, b: Path) -> float:
    """The largest absolute difference between two runs' final weights (0.0: bit-exact)."""
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys()
    return max(float((wa[k].double() - wb[k].double()).abs().max()) for k in wa)


def steps_redone(run_dir: Path) -> list[int]:
    """For each resume of a run (a restart, a requeue, `--resume`), how many optimizer steps of
    the lost attempt it redid: the metric rows it dropped (with ``train.log_every: 1``)."""
    import re

    text = (run_dir / "logs" / "run.log").read_text(encoding="utf-8", errors="replace")
    return [int(n) for n in re.findall(r"resumed from step-\d+ .*dropped (\d+) metric rows", text)]


def start_and_inject(start: Any, metrics_of: Any, at_step: int, inject: Any, timeout: float = 180) -> Any:
    """Start a run (``start()`` returns a handle: a Run, a job, a process), wait until its
    metrics (``metrics_of(handle)``, a metrics.jsonl path) show ``at_step``, then ``inject(handle)``
    (a kill, a scancel, a dead host); returns the handle. The fault lands while training goes on,
    wherever in a step that happens to be."""
    handle = start()
    wait_for_step(metrics_of(handle), at_step, timeout)
    inject(handle)
    return handle
