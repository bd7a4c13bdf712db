"""Pretrained weights into a model of another shape: a new classification head is
re-initialised and logged; a body that changed size is a typed error unless asked for."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from clustertune.errors import ModelError
from clustertune.models import build_model, load_tokenizer, resolve_config, train_bpe
from clustertune.recipe.load import load_recipe
from tests.helpers import TINY_CLS, with_

TEXTS = [f"sentence {i} about kind {i % 3}" for i in range(60)]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved 2-label classifier (bert, 2 layers, width 64) with its tokenizer."""
    out = tmp_path_factory.mktemp("cls") / "m"
    tok = train_bpe(TEXTS, 300, classification=True, model_max_length=32)
    r = load_recipe(TINY_CLS)
    build_model(r, resolve_config(r, tok), tok).save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def load(path: Path, **model):
    r = load_recipe(with_(TINY_CLS, model={"config": None, "config_overrides": {}, "tokenizer": None,
                                           "name_or_path": str(path), **model}))
    tok = load_tokenizer(str(path))
    return build_model(r, resolve_config(r, tok), tok)


def test_a_head_with_other_labels_is_reinitialised_and_the_body_kept(classifier: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="clustertune"):
        model = load(classifier, num_labels=3)
    assert model.classifier.weight.shape[0] == 3
    assert "re-initialised (shape changed): classifier.bias [2] -> [3], classifier.weight [2, 64] -> [3, 64]" in caplog.text
    same = load(classifier, num_labels=2)
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, same.bert.embeddings.word_embeddings.weight)


def test_a_body_that_changed_size_is_refused_naming_tensors_unless_asked(classifier: Path) -> None:
    with pytest.raises(ModelError) as err:
        load(classifier, config_overrides={"hidden_size": 32, "intermediate_size": 64})
    text = str(err.value)
    assert "bert.embeddings.word_embeddings.weight [300, 64] in the checkpoint, [300, 32] in the model" in text
    assert "model.ignore_mismatched_sizes=true" in text
    model = load(classifier, config_overrides={"hidden_size": 32, "intermediate_size": 64}, ignore_mismatched_sizes=True)
    assert model.bert.embeddings.word_embeddings.weight.shape == (300, 32)
