"""``train.fp8``: what it refuses before a run starts and on a rank that cannot compute in FP8,
which layers it converts, and that the converted model trains like the bf16 one (torchao's
emulated FP8 arithmetic on this CPU; the GPU kit's fp8 part measures the real multiplies).

torchao is installed off the venv's path (``.venv/fp8-extra``, by ``scripts/setup.sh test``):
where it is importable, transformers imports it in every process that loads a model. The cases
that need it run in a process of their own with that folder on its path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import clustertune as ct
from clustertune.errors import RecipeError, UserError
from clustertune.recipe.load import load_recipe
from clustertune.runs import RunState
from clustertune.train.fp8 import check_fp8_device, fp8_refusal
from tests.helpers import TINY_CAUSAL, with_

FULL = with_(TINY_CAUSAL, train={"fp8": True, "precision": "bf16"})
FP8_EXTRA = Path(__file__).resolve().parents[3] / ".venv" / "fp8-extra"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"train": {"strategy": "deepspeed"}}, "DeepSpeed's engine does not train torchao's FP8 layers"),
        ({"train": {"precision": "fp32"}}, "precision fp32 has none: use bf16 (or auto)"),
        ({"model": {"adapter": {"type": "lora"}}}, "with an adapter the base is frozen"),
    ],
)
def test_what_fp8_cannot_be_combined_with_is_named_before_the_run(change: dict, words: str) -> None:
    recipe = with_(FULL, **{k: {**FULL[k], **v} for k, v in change.items()})
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe)
    assert "train.fp8: " in str(err.value) and words in str(err.value), str(err.value)
    assert load_recipe(with_(FULL, train={"strategy": "fsdp"})).train.fp8  # full fine-tuning, bf16: accepted


def test_a_rank_that_cannot_compute_in_fp8_is_refused_with_what_would_do(runs_root: Path) -> None:
    cpu = fp8_refusal("cpu", None, "", have_torchao=True)
    assert cpu is not None and "compute capability 8.9 or later: H100, H200, L40S, RTX 4090), and this rank " \
                                 "trains on the cpu; drop train.fp8" in cpu
    assert "A100-SXM4-80GB is compute capability 8.0; FP8 tensor cores start at 8.9" in str(
        fp8_refusal("cuda", (8, 0), "NVIDIA A100-SXM4-80GB", have_torchao=True))
    assert "train.fp8 needs the torchao package, not installed here" in str(
        fp8_refusal("cuda", (9, 0), "NVIDIA H100 80GB HBM3", have_torchao=False))
    assert fp8_refusal("cuda", (9, 0), "NVIDIA H100 80GB HBM3", have_torchao=True) is None
    with pytest.raises(UserError, match="this rank trains on the cpu"):
        check_fp8_device(torch.device("cpu"))
    # A whole run on this CPU: refused on its rank before the model is built, FAILED with the reason.
    with pytest.raises(UserError, match="train.fp8: FP8 matrix multiplies need an NVIDIA GPU"):
        ct.run(load_recipe(with_(FULL, train={"max_steps": 2})), show_progress=False)
    (run,) = ct.list_runs()
    assert run.state is RunState.FAILED and "train.fp8" in (run.info.reason or "")


CONVERT_AND_TRAIN = textwrap.dedent("""
    import json, sys
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    from clustertune.errors import UserError
    from clustertune.train.fp8 import fp8_layers, to_fp8

    def llama():
        torch.manual_seed(0)
        return LlamaForCausalLM(LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                            tie_word_embeddings=False))

    out = {}
    model = llama()
    names = sorted(model.state_dict())
    out["converted"] = sorted(to_fp8(model, sharded=False, emulate=True))
    out["fp8_layers"] = fp8_layers(model)
    out["lm_head"] = type(model.lm_head).__name__
    out["names_kept"] = sorted(model.state_dict()) == names
    try:
        to_fp8(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=64, n_head=2, n_positions=32, vocab_size=96)),
               sharded=False, emulate=True)
    except UserError as exc:
        out["gpt2"] = str(exc)
    ids = torch.randint(0, 96, (8, 32), generator=torch.Generator().manual_seed(1))
    for fp8 in (False, True):
        model = llama()
        if fp8:
            to_fp8(model, sharded=False, emulate=True)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(30):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        out["fp8" if fp8 else "bf16"] = losses
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def converted_and_trained() -> dict:
    assert FP8_EXTRA.is_dir(), f"{FP8_EXTRA} is missing: `bash scripts/setup.sh test` installs torchao there"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(FP8_EXTRA), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CONVERT_AND_TRAIN], capture_output=True, text=True, env=env, timeout=300)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert out.returncode == 0 and line is not None, out.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_every_linear_layer_but_the_output_layer_is_converted_and_the_names_stay(converted_and_trained: dict) -> None:
    got = converted_and_trained
    assert got["converted"] == sorted(f"model.layers.{i}.{part}" for i in range(2) for part in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))
    assert got["fp8_layers"] == 14 and got["lm_head"] == "Linear"
    assert got["names_kept"]  # checkpoints and save_pretrained see the plain model
    assert "this model has Conv1D, Linear: GPT-2's Conv1D is not one" in got["gpt2"]


def test_the_fp8_model_trains_like_the_bf16_one(converted_and_trained: dict) -> None:
    bf16, fp8 = converted_and_trained["bf16"], converted_and_trained["fp8"]
    assert fp8[-1] < 0.5 * fp8[0], fp8  # it learns
    assert abs(fp8[-1] - bf16[-1]) <= 0.05 * bf16[-1], (bf16[-1], fp8[-1])  # as bf16 does
    assert fp8 != bf16  # and the FP8 arithmetic was really used


def test_the_suites_processes_do_not_import_torchao() -> None:
    # Where it is importable, transformers imports it with every model (tests/unit/train/test_fp8.py's docstring).
    import importlib.util

    assert importlib.util.find_spec("torchao") is None, (
        "torchao is importable in the suite's venv (installed by `setup.sh fp8`?): every process that loads a model "
        "then imports it, and run logs get its warnings; the suite installs it into .venv/fp8-extra instead")
