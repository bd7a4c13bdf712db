"""Adapters under every strategy that can hold them, on 2 CPU ranks, in one launched job.

The matrix (one process is tests/integration/test_adapters.py):
- LoRA and DoRA under DDP, FSDP2, ZeRO-2 and ZeRO-3 (ZeRO-3 with a persistence threshold of 0,
  so that it really partitions every weight of the tiny model: DoRA reads whole base weights);
- QLoRA under DDP, FSDP2, ZeRO-2 and ZeRO-3 (FSDP2 and ZeRO-3 shard the packed 4-bit weights;
  bitsandbytes keeps the quantization state on the layer). With offload it is refused by the
  recipe, see tests/unit/models/test_adapter_inputs.py.

Each cell trains 4 steps of 2 ranks x 4 and must follow the one-process curve (batch 8), write a
checkpoint at step 2 that holds only the trainable state and leave a PEFT adapter directory that
gives the run's final eval loss on the base; what each rank holds after its first step must be
within 10% of estimate-memory's figures. The LoRA and QLoRA cells also resume from that
checkpoint in a fresh run to the same end (DoRA's checkpoints take the same path).
All cells run one after another in the same two processes (strategy_driver.py --also).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.adapter_fixtures import lora_recipe
from tests.helpers import with_
from tests.integration.test_adapters import check_state_memory
from tests.integration.test_strategies import final_eval_loss, job_dir, launch, need_deepspeed, train_losses

pytestmark = pytest.mark.slow

STEPS, SAVE_AT = 4, 2
STRATEGIES: dict[str, dict[str, Any]] = {
    "ddp": {"strategy": "ddp"},
    "fsdp": {"strategy": "fsdp"},
    "zero2": {"strategy": "deepspeed", "zero_stage": 2},
    "zero3": {"strategy": "deepspeed", "zero_stage": 3},
}
CELLS: list[tuple[str, str]] = [(k, s) for k in ("lora", "dora", "qlora") for s in STRATEGIES]


def recipe_for(base: Path, kind: str, train: dict[str, Any]) -> dict[str, Any]:
    r = lora_recipe(base, type=kind)
    return with_(r, train={**r["train"], "max_steps": STEPS, "save_every": SAVE_AT, "log_every": 1, **train})


def adapter_eval_loss(base: Path, run_dir: Path) -> float:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from tests.integration.test_adapters import eval_loss

    return eval_loss(PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(base)), str(run_dir / "model")),
                     run_dir)


def saved_weight_names(ckpt: Path) -> set[str]:
    """Names of the model weights a checkpoint holds, whatever the strategy's layout."""
    import pickle

    import torch
    from safetensors.torch import load_file

    if (ckpt / "model.safetensors").is_file():  # DDP
        return set(load_file(str(ckpt / "model.safetensors")))
    if (ckpt / "shards").is_dir():  # FSDP: torch.distributed.checkpoint's metadata (written by this run)
        meta = pickle.loads((ckpt / "shards" / ".metadata").read_bytes())
        return {k[len("model."):] for k in meta.state_dict_metadata if k.startswith("model.")}
    names: set[str] = set()
    for f in (ckpt / "deepspeed").glob("*model_states.pt"):  # DeepSpeed (written by this run)
        state = torch.load(f, map_location="cpu", weights_only=False)
        names |= set(state["module"] or {})
        names |= {n for group in state.get("param_shapes") or [] for n in group}
        names |= set(state.get("frozen_param_shapes") or {})
    return names


def test_adapter_strategy_matrix(llama_base: Path, tmp_path: Path) -> None:
    import clustertune as ct

    need_deepspeed({"strategy": "deepspeed"})
    singles = {}
    for kind in ("lora", "dora", "qlora"):
        run = ct.run(ct.load_recipe(recipe_for(llama_base, kind, {})), runs_root_dir=tmp_path / "single",
                     show_progress=False)
        singles[kind] = run.paths.root
    partition_all = tmp_path / "zero3-partition-all.json"
    partition_all.write_text(json.dumps({"zero_optimization": {"stage3_param_persistence_threshold": 0}}))
    dirs, also = {}, []
    for kind, strat in CELLS:
        extra = {"deepspeed_config": str(partition_all)} if strat == "zero3" else {}
        recipe = recipe_for(llama_base, kind, {**STRATEGIES[strat], "batch_size": 4, **extra})
        full = job_dir(tmp_path / f"{kind}-{strat}", recipe, singles[kind])
        also.append(str(full))
        resumed = None
        if kind != "dora":
            resumed = job_dir(tmp_path / f"{kind}-{strat}-resumed", recipe, singles[kind])
            also.append(f"{resumed}::{full / 'checkpoints' / f'step-{SAVE_AT:08d}'}")
        dirs[kind, strat] = (full, resumed)
    launch(Path(also[0]), also=also[1:])

    for (kind, strat), (full, resumed) in dirs.items():
        cell = f"{kind} under {strat}"
        want, got = train_losses(singles[kind]), train_losses(full)
        assert sorted(got) == list(range(1, STEPS + 1)), cell
        worst = max(abs(got[s] - want[s]) for s in want)
        # 4-bit dequantisation and ZeRO's flat fp32 buffers reorder float sums; DDP/FSDP do not.
        tol = 1e-4 if strat in ("ddp", "fsdp") and kind != "qlora" else 1e-3
        assert worst < tol, f"{cell}: loss curve differs from one process by {worst}"

        ckpt = full / "checkpoints" / f"step-{SAVE_AT:08d}"
        state = json.loads((ckpt / "state.json").read_text())
        assert state["strategy"] == STRATEGIES[strat]["strategy"] and state["adapter"]["settings"]["type"] == kind
        # The adapter's weights only (and so only their optimizer state): none of the frozen base's
        # weights. (DeepSpeed's module state keeps what bitsandbytes adds to a state dict beside a
        # 4-bit weight, its quantization state: absmax, quant_map; about 3% of the 4-bit base.)
        names = saved_weight_names(ckpt)
        base = sorted(n for n in names if ".lora_" not in n and n.endswith((".weight", ".bias")))
        assert names and not base, (cell, base[:5])
        assert kind == "qlora" or all(".lora_" in n for n in names), cell
        if kind == "dora":
            assert any("lora_magnitude_vector" in n for n in names), cell
        # What each rank holds, as estimate-memory puts it for this strategy and adapter.
        check_state_memory(full, strat, 2, 0 if strat == "zero3" else None)
        if resumed is None:
            continue
        after = train_losses(resumed)
        assert sorted(after) == list(range(SAVE_AT + 1, STEPS + 1)), cell
        assert max(abs(after[s] - got[s]) for s in after) < 1e-5, cell
        assert abs(final_eval_loss(resumed) - final_eval_loss(full)) < 1e-5, cell

    for (kind, strat), (full, _) in dirs.items():
        cell = f"{kind} under {strat}"
        assert (full / "model" / "adapter_config.json").is_file(), cell
        if kind != "qlora":  # a QLoRA adapter trained against 4-bit weights, not the base's own
            assert abs(adapter_eval_loss(llama_base, full) - final_eval_loss(full)) < 1e-4, cell
