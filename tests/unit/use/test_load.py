"""Finding and loading what a user names for inference: a model directory, an adapter directory
(onto its base, unmerged or merged), a run id; and the typed errors for what cannot be used."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from clustertune.errors import ModelError, RunError
from clustertune.runs.run import Run
from clustertune.use.load import find_target, load_for_use, pick_device, torch_dtype
from tests.sft_fixtures import make_base


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_base(tmp_path_factory.mktemp("use-base"), chat_template=None)


@pytest.fixture(scope="module", params=[["c_attn"], ["c_attn", "wte"]], ids=["linear", "tied-embedding"])
def adapter(base: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """LoRA on a linear layer, and also on the input embedding (which the base ties to its output)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base)),
                           LoraConfig(r=4, target_modules=request.param, fan_in_fan_out=True, init_lora_weights=False))
    out = tmp_path_factory.mktemp("use-adapter")
    model.save_pretrained(str(out))
    return out


def test_a_model_directory_loads_in_eval_mode_with_its_tokenizer(base: Path) -> None:
    loaded = load_for_use(str(base), device="cpu", dtype="fp32")
    assert loaded.target.run is None and not loaded.target.adapter and not loaded.target.classifier
    assert loaded.device == "cpu" and not loaded.model.training
    ids = loaded.tokenizer("def f():", return_tensors="pt").input_ids
    assert loaded.model(ids).logits.shape[-1] == len(loaded.tokenizer)


def test_an_adapter_loads_onto_its_base_unmerged_and_merged_the_same(adapter: Path, base: Path) -> None:
    from peft import PeftModel

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        unmerged = load_for_use(str(adapter), device="cpu", dtype="fp32")
    # What generate and chat print: no library deprecation notice the user cannot act on.
    assert not [w for w in seen if issubclass(w.category, FutureWarning)], [str(w.message) for w in seen]
    merged = load_for_use(str(adapter), device="cpu", dtype="fp32", merge=True)
    assert unmerged.target.adapter and isinstance(unmerged.model, PeftModel)
    assert not isinstance(merged.model, PeftModel)
    ids = unmerged.tokenizer("class A:", return_tensors="pt").input_ids  # the base's tokenizer
    with torch.no_grad():
        a, b = unmerged.model(ids).logits, merged.model(ids).logits
        plain = load_for_use(str(base), device="cpu", dtype="fp32").model(ids).logits
    assert torch.allclose(a, b, atol=1e-5)
    assert not torch.allclose(a, plain, atol=1e-3)  # the adapter changes what the base says


def test_a_run_id_names_its_final_model_and_a_run_without_one_says_what_to_do(base: Path, tmp_path: Path) -> None:
    import shutil

    run = Run.create(tmp_path, "demo", "causal_lm", None, ["clustertune", "run"])
    with pytest.raises(RunError, match=f"run {run.id} is CREATED and has no final model yet.*--resume {run.id}"):
        find_target(run.id[:12], tmp_path)
    shutil.copytree(base, run.paths.model)
    target = find_target(run.id[:12], tmp_path)
    assert target.run is not None and target.run.id == run.id and target.path == run.paths.model.resolve()
    assert target.label == f"run {run.id}"
    by_path = find_target(str(run.paths.root))  # the run's directory, as a user pastes it from the output
    assert by_path.run is not None and by_path.run.id == run.id and by_path.path == target.path


def test_a_running_run_offers_its_newest_checkpoint_and_a_checkpoint_directory_names_it(tmp_path: Path) -> None:
    """What a user does while a run trains: `generate RUN` says where the model is not yet and
    which checkpoint is; the checkpoint's directory, pasted as a path, names RUN@step-N."""
    from clustertune.runs.state import RunState
    from clustertune.train.checkpoint import _seal

    run = Run.create(tmp_path, "demo", "causal_lm", None, ["clustertune", "run"])
    run.start_attempt(job_id="local", state=RunState.RUNNING)
    with pytest.raises(RunError, match=f"run {run.id} is RUNNING: its final model comes when it ends, and it has no "
                                       "checkpoint yet"):
        find_target(run.id, tmp_path)
    for step in (10, 20):
        tmp = run.paths.checkpoints / f".tmp-{step}"
        tmp.mkdir(parents=True)
        (tmp / "model.safetensors").write_bytes(b"")
        _seal(tmp, run.paths.checkpoint(step), step, {"strategy": "ddp", "world_size": 1}, "name: demo\n", hashed={})
    with pytest.raises(RunError, match=rf"is RUNNING: .*its newest checkpoint is `{run.id}@step-20`"):
        find_target(run.id, tmp_path)
    from tests.helpers import TINY_CAUSAL

    (run.paths.root / "recipe.yaml").write_text(yaml.safe_dump(TINY_CAUSAL))
    by_dir = find_target(str(run.paths.checkpoint(10)))
    assert by_dir.step == 10 and by_dir.run is not None and by_dir.run.id == run.id
    assert by_dir.label == f"run {run.id}@step-10"


def test_what_cannot_be_used_gets_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no such directory"):
        find_target(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="not a model directory.*save_pretrained"):
        find_target(str(tmp_path / "empty"))
    with pytest.raises(RunError, match="no run 'nosuchrun'"):
        find_target("nosuchrun", tmp_path)
    with pytest.raises(RunError, match="name a run id"):
        find_target("  ")
    with pytest.raises(ModelError, match="not a device torch knows"):
        pick_device("gpu0")
    with pytest.raises(ModelError, match="choose one of auto, fp32, bf16, fp16"):
        torch_dtype("float32", "cpu")
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    assert find_target(str(tmp_path / "cls")).classifier


def test_two_threads_loading_at_once_each_get_a_whole_model_in_their_dtype(base: Path) -> None:
    """A server loads on two threads (its OpenAI model, a Tinker base). transformers switches
    process-wide state while it builds a model, so two loads at once left parameters on the meta
    device or in the other load's dtype, and the server stopped."""
    import threading

    from clustertune.use.load import load_model_for

    target = find_target(str(base))
    problems: list[str] = []

    def load(dtype: str, want: torch.dtype) -> None:
        for _ in range(6):
            model = load_model_for(target, device="cpu", dtype=dtype)
            kinds = {(p.device.type, p.dtype) for p in model.parameters()}
            if kinds != {("cpu", want)}:
                problems.append(f"{dtype}: {kinds}")

    threads = [threading.Thread(target=load, args=a) for a in (("fp32", torch.float32), ("bf16", torch.bfloat16))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not problems, problems
    assert torch.get_default_dtype() == torch.float32
