"""The pre-token cache gives exactly the Rust tokenizer's ids, and stands aside where it cannot."""

from __future__ import annotations

import itertools
import logging
import random
import re
from typing import Any

import numpy as np
import pytest

from clustertune.data import piece_cache
from clustertune.data.builtin import pydoc_paragraphs
from clustertune.data.prepare import encode_flat
from clustertune.data.stream import BlockStream
from clustertune.models.tokenizer import train_bpe

# What a tired corpus holds: whitespace runs of every kind, contractions in both cases, digits
# glued to letters, control characters (\x1c-\x1f are whitespace to Python but not to the
# tokenizer's regex), the tokenizer's own special tokens inside the text, and non-ASCII.
ALPHABET = list("aZ09 ") * 6 + ["'s", "'T", "'re", "'ve", "'m", "'ll", "'d", "''", "\t", "\n", "\r\n", "\x0b", "\x0c",
                                 "\x1c", "\x1f", "\x00", "\x7f", "  ", "   ", ".", "!?", "<|endoftext|>", "<pad>",
                                 "é", "—", "日本", "😀", "\u00a0", "\u2028"]


def _tokenizer(**kw: Any) -> Any:
    texts = list(itertools.islice(pydoc_paragraphs(), 400))
    return train_bpe(texts, 600, classification=kw.get("classification", False), model_max_length=10**6)


@pytest.fixture(scope="module")
def tok() -> Any:
    return _tokenizer()


def _fuzz(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def _reference(texts: list[str], tok: Any) -> np.ndarray:
    ids = tok(texts, verbose=False)["input_ids"]
    return np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64)


@pytest.mark.parametrize("workers", [1, 2])
def test_same_ids_as_the_tokenizer_on_hostile_and_real_text(tok: Any, workers: int) -> None:
    texts = _fuzz(3000) + list(itertools.islice(pydoc_paragraphs(), 300))
    random.Random(1).shuffle(texts)
    assert piece_cache.piece_encoder(_backend(tok), probe=texts) is not None  # the fast path is taken
    got = encode_flat(texts, tok, workers)
    assert np.array_equal(got.astype(np.int64), _reference(texts, tok))


def _backend(tok: Any) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(tok.backend_tokenizer.to_str())


def test_ineligible_texts_and_pieces_are_left_to_the_rust_encoder(tok: Any) -> None:
    enc = piece_cache.piece_encoder(_backend(tok))
    assert enc is not None
    assert enc.encode("caf\u00e9 au lait") is None  # non-ASCII
    assert enc.encode("end<|endoftext|>start") is None  # an added token inside
    assert enc.encode("plain ascii, twice: plain ascii") == tok("plain ascii, twice: plain ascii")["input_ids"]
    assert 0 < enc.distinct_pieces == enc.misses < 8  # repeated pre-tokens were looked up, not re-encoded


def test_tokenizers_of_another_shape_do_not_take_the_fast_path(caplog: pytest.LogCaptureFixture) -> None:
    from tokenizers import normalizers

    framed = _tokenizer(classification=True)  # its post-processor adds <cls> ... <sep> to every text
    lowered = _tokenizer()
    lowered.backend_tokenizer.normalizer = normalizers.Lowercase()
    texts = _fuzz(300, seed=2)
    for t in (framed, lowered):
        with caplog.at_level(logging.DEBUG, logger="clustertune"):
            assert piece_cache.piece_encoder(_backend(t), probe=texts) is None
        assert np.array_equal(encode_flat(texts, t, 2).astype(np.int64), _reference(texts, t))
    assert "adds tokens to each text" in caplog.text and "has a normalizer" in caplog.text


def test_a_disagreement_on_the_probe_turns_the_fast_path_off(tok: Any, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    # A pre-token pattern that differs from the tokenizer's (it keeps letters and digits together):
    # the check against the Rust encoder on the real texts must catch it before any text is encoded.
    monkeypatch.setattr(piece_cache, "ASCII_PRETOKENS", re.compile(r" ?[A-Za-z0-9]+|[^A-Za-z0-9 ]+| +"))
    texts = ["abc123 def", "x9 y8"] + _fuzz(50, seed=3)
    with caplog.at_level(logging.WARNING, logger="clustertune"):
        assert piece_cache.piece_encoder(_backend(tok), probe=texts) is None
        got = encode_flat(texts, tok, 1)
    assert "disagrees with the tokenizer" in caplog.text
    assert np.array_equal(got.astype(np.int64), _reference(texts, tok))


def test_streaming_blocks_match_prepared_ones_through_the_cache(tok: Any) -> None:
    texts = _fuzz(400, seed=4) + list(itertools.islice(pydoc_paragraphs(), 100))
    stream = BlockStream(lambda: iter(texts), tok, 16, chunk_texts=64)
    blocks = np.stack([b for _, b, _ in stream.blocks()]).astype(np.int64)
    flat = _reference(texts, tok)
    assert np.array_equal(blocks, flat[: len(blocks) * 16].reshape(-1, 16)) and len(blocks) == len(flat) // 16
