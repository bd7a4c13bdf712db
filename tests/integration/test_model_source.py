"""``model.revision`` and ``model.trust_remote_code``: a hub model read at the revision asked for
(from a real Hugging Face cache laid out on disk, offline), the commit recorded in run.json; a
model that ships its own code refused until the recipe trusts it, then trained."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

import clustertune as ct
from clustertune import api
from clustertune.errors import RecipeError
from clustertune.runs.run import Run
from clustertune.runs.state import RunState
from tests.helpers import cli
from tests.sft_fixtures import arithmetic_rows, sft_recipe, write_jsonl

MAIN, V1 = "a" * 40, "b" * 40


def _hub_cache(root: Path, base: Path) -> Path:
    """A Hugging Face hub cache holding ``tiny/gpt`` at two commits: ``main`` (2 layers) and the
    tag ``v1`` (the same model cut to 1 layer), as ``hf download`` leaves it."""
    repo = root / "models--tiny--gpt"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(MAIN)
    (repo / "refs" / "v1").write_text(V1)
    for commit, layers in ((MAIN, 2), (V1, 1)):
        snap = repo / "snapshots" / commit
        shutil.copytree(base, snap)
        config = json.loads((snap / "config.json").read_text())
        config["n_layer"] = layers
        (snap / "config.json").write_text(json.dumps(config))
    return root


def test_a_hub_revision_is_the_one_trained_and_recorded(sft_base: Path, tmp_path: Path) -> None:
    cache = _hub_cache(tmp_path / "hub", sft_base)
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "CLUSTERTUNE_RUNS": str(tmp_path / "runs")}
    recipe = sft_recipe(Path("tiny/gpt"), write_jsonl(tmp_path / "chats.jsonl", arithmetic_rows(40)))
    recipe["model"] = {"name_or_path": "tiny/gpt", "revision": "v1"}
    recipe["train"]["max_steps"] = 2
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))

    done = cli("run", str(tmp_path / "r.yaml"), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    run = Run.load(next((tmp_path / "runs").iterdir()))
    assert run.state is RunState.COMPLETED
    assert run.attempts[-1].model == {"name_or_path": "tiny/gpt", "revision": "v1", "commit": V1,
                                      "trust_remote_code": False}
    assert json.loads((run.paths.model / "config.json").read_text())["n_layer"] == 1  # v1's, not main's
    shown = cli("runs", "show", run.id, env=env)
    assert f"revision v1  commit {V1[:12]}" in shown.stdout

    # A revision the cache does not hold: validate says what it could not check, run refuses by key.
    missing = cli("validate", str(tmp_path / "r.yaml"), "model.revision=v9", env=env)
    assert missing.returncode == 0 and "nothing cached here" in missing.stdout + missing.stderr
    refused = cli("run", str(tmp_path / "r.yaml"), "model.revision=v9", env=env)
    assert refused.returncode == 2 and "model.name_or_path" in refused.stderr and "Traceback" not in refused.stderr


def test_a_revision_on_a_local_directory_is_refused(sft_base: Path, tmp_path: Path) -> None:
    recipe = sft_recipe(sft_base, write_jsonl(tmp_path / "c.jsonl", arithmetic_rows(8)))
    recipe["model"]["revision"] = "v1"
    with pytest.raises(RecipeError, match=r"model.revision: a hub revision applies to a hub name"):
        ct.load_recipe(recipe)


def _custom_code_model(root: Path, base: Path) -> Path:
    """The tiny base as a model type of its own whose classes ship beside the weights."""
    shutil.copytree(base, root)
    config = json.loads((root / "config.json").read_text())
    config.update(model_type="toygpt", architectures=["ToyForCausalLM"],
                  auto_map={"AutoConfig": "configuration_toy.ToyConfig",
                            "AutoModelForCausalLM": "modeling_toy.ToyForCausalLM"})
    (root / "config.json").write_text(json.dumps(config))
    (root / "configuration_toy.py").write_text(
        "from transformers import GPT2Config\n\n\nclass ToyConfig(GPT2Config):\n    model_type = 'toygpt'\n")
    (root / "modeling_toy.py").write_text(
        "from transformers import GPT2LMHeadModel\n\nfrom .configuration_toy import ToyConfig\n\n\n"
        "class ToyForCausalLM(GPT2LMHeadModel):\n    config_class = ToyConfig\n")
    return root


def test_a_model_with_its_own_code_needs_trust_remote_code(sft_base: Path, tmp_path: Path, runs_root: Path) -> None:
    model = _custom_code_model(tmp_path / "toy", sft_base)
    recipe = sft_recipe(model, write_jsonl(tmp_path / "c.jsonl", arithmetic_rows(40)))
    recipe["train"]["max_steps"] = 2
    before = sorted(runs_root.iterdir()) if runs_root.is_dir() else []
    with pytest.raises(RecipeError, match=r"model.trust_remote_code: .*'toygpt' model whose code ships with it "
                                          r"\(configuration_toy.ToyConfig, modeling_toy.ToyForCausalLM\)"):
        api.validate(recipe)
    with pytest.raises(RecipeError, match=r"model.trust_remote_code"):
        ct.run(ct.load_recipe(recipe), show_progress=False)
    assert (sorted(runs_root.iterdir()) if runs_root.is_dir() else []) == before

    recipe["model"]["trust_remote_code"] = True
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    assert run.attempts[-1].model["trust_remote_code"] is True
    assert json.loads((run.paths.model / "config.json").read_text())["model_type"] == "toygpt"
