"""The preflight's meta build of a model, remembered per config (models/meta_check.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clustertune.models import meta_check
from clustertune.models.meta_check import MODEL_CHECKS, meta_build_error


def gpt2(**sizes: Any) -> Any:
    from transformers import AutoConfig

    return AutoConfig.for_model("gpt2", **{"n_layer": 2, "n_embd": 64, "n_head": 2, "n_positions": 64,
                                           "vocab_size": 512, **sizes})


def builds_counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every model class the checks build from here on, by head."""
    built: list[str] = []
    real = meta_check.auto_class

    def counting(head: str) -> Any:
        built.append(head)
        return real(head)

    monkeypatch.setattr(meta_check, "auto_class", counting)
    return built


def test_a_config_that_built_is_not_built_again_until_it_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = builds_counted(monkeypatch)
    good = tmp_path / MODEL_CHECKS
    assert meta_build_error(gpt2(), "causal_lm", False, good) is None
    assert meta_build_error(gpt2(), "causal_lm", False, good) is None
    assert built == ["causal_lm"] and len(list(good.iterdir())) == 1
    # Another size, another head: each built once more.
    assert meta_build_error(gpt2(n_embd=128), "causal_lm", False, good) is None
    assert meta_build_error(gpt2(), "classifier", False, good) is None
    assert built == ["causal_lm", "causal_lm", "classifier"] and len(list(good.iterdir())) == 3


def test_a_config_that_fails_is_built_and_told_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = builds_counted(monkeypatch)
    good = tmp_path / MODEL_CHECKS
    bad = gpt2(n_embd=66, n_head=4)  # 66 is not divisible by 4 heads
    for _ in range(2):
        exc = meta_build_error(bad, "causal_lm", False, good)
        assert exc is not None and "66" in str(exc)
    assert len(built) == 2 and not good.exists()


def test_remote_code_and_a_missing_cache_root_remember_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = builds_counted(monkeypatch)
    good = tmp_path / MODEL_CHECKS
    for _ in range(2):
        assert meta_build_error(gpt2(), "causal_lm", True, good) is None  # its code may change under one config
    assert len(built) == 2 and not good.exists()
    gone = tmp_path / "not-there" / MODEL_CHECKS  # a cache root named for a cluster, absent here
    for _ in range(2):
        assert meta_build_error(gpt2(), "causal_lm", False, gone) is None
    assert len(built) == 4 and not (tmp_path / "not-there").exists()


def test_a_second_check_of_the_same_model_imports_neither_transformers_nor_torch(tmp_path: Path) -> None:
    """What it is for: the launching process of a rerun (here with another train setting) checks
    the recipe without importing the model's code (torch's compiler comes with it), nor even
    transformers' config classes and torch (about 1.5 s here), in a fresh interpreter as
    `clustertune` runs."""
    import yaml

    from tests.helpers import TINY_CAUSAL

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(TINY_CAUSAL))
    (tmp_path / "cache").mkdir()
    modules = ("transformers.modeling_utils", "torch._dynamo", "transformers.configuration_utils", "torch")
    env = {**os.environ, "CLUSTERTUNE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    seen = []
    for overrides in ([], ["train.max_steps=3"]):
        code = ("import json, sys\nfrom clustertune import api\n"
                f"api.validate({str(recipe)!r}, {overrides!r})\n"
                f"print(json.dumps([m in sys.modules for m in {modules!r}]))")
        seen.append(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                              check=True, timeout=120).stdout.splitlines()[-1]))
    assert seen == [[True] * 4, [False] * 4], seen
    # The config's build and the recipe's whole model check, one marker each.
    assert sorted(p.name.startswith("checks-") for p in (tmp_path / "cache" / MODEL_CHECKS).iterdir()) == [False, True]


def _validate_counted(recipe: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Any]:
    """Validate ``recipe`` in a cache of its own; the list counts the configs resolved."""
    import yaml

    from clustertune import api
    from clustertune.api import preflight

    monkeypatch.setenv("CLUSTERTUNE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir(exist_ok=True)
    resolved: list[int] = []
    real = preflight.resolve_config

    def counting(*args: Any) -> Any:
        resolved.append(1)
        return real(*args)

    monkeypatch.setattr(preflight, "resolve_config", counting)
    path = tmp_path / "r.yaml"

    def validate(*overrides: str) -> Any:
        path.write_text(yaml.safe_dump(recipe))
        return api.validate(str(path), list(overrides))

    return resolved, validate


def test_a_model_check_is_remembered_by_what_it_reads_and_a_failure_never(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.errors import RecipeError
    from tests.helpers import TINY_CAUSAL

    config = tmp_path / "model"
    gpt2().save_pretrained(config)
    recipe = {**TINY_CAUSAL, "model": {**TINY_CAUSAL["model"], "config": str(config), "config_overrides": {}}}
    resolved, validate = _validate_counted(recipe, tmp_path, monkeypatch)
    validate()
    validate("train.lr=1e-4")  # nothing of the model changed
    assert len(resolved) == 1
    validate("data.block_size=32")  # the length checked against its positions
    validate("model.config_overrides.n_layer=3")
    assert len(resolved) == 3
    # The config file's bytes, not its path: 64 positions become 32, under the block of 64.
    (config / "config.json").write_text((config / "config.json").read_text().replace('"n_positions": 64',
                                                                                      '"n_positions": 32'))
    for n in (4, 5):
        with pytest.raises(RecipeError, match="data.block_size: 64 is longer than the 32 positions"):
            validate()
        assert len(resolved) == n  # told every time
    validate("data.block_size=32")
    validate("data.block_size=32")
    assert len(resolved) == 6


def test_qlora_checked_once_is_refused_when_bitsandbytes_cannot_be_imported(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          llama_base: Path) -> None:
    """What the check found importable is part of what it remembers."""
    from clustertune.errors import RecipeError
    from tests.adapter_fixtures import lora_recipe

    pytest.importorskip("bitsandbytes")
    resolved, validate = _validate_counted(lora_recipe(llama_base, type="qlora"), tmp_path, monkeypatch)
    validate()
    validate()
    assert len(resolved) == 1
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # as if it were not installed: import fails
    with pytest.raises(RecipeError, match="bitsandbytes"):
        validate()
