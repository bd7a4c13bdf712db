"""Byte-level BPE encoding memoised by pre-token: the same ids as the Rust tokenizer, faster.

A byte-level BPE tokenizer (GPT-2's kind, and the ones clustertune trains on the spot) cuts a
text into pre-tokens with one regular expression, then encodes each pre-token on its own: the
ids of a text are the concatenation of its pre-tokens' ids. Natural text repeats its
pre-tokens (" the", " of", "." ...) so heavily that encoding each distinct one once and
looking the rest up costs far less than the Rust encoder's per-call work (building an
``Encoding`` with token strings, offsets and masks for every text).

The pre-token pattern is GPT-2's, written for ASCII text with the character classes Oniguruma
gives it there (``\\s`` is tab, newline, vertical tab, form feed, carriage return and space;
letters and digits are ASCII's). Only what provably behaves the same takes this path:

- the tokenizer: no normalizer, a ``ByteLevel`` pre-tokenizer with the regex on and no prefix
  space, a BPE model without dropout, and a post-processor that adds no ids to a single text;
- the text: ASCII only, and containing none of the tokenizer's added tokens.

Everything else goes to the Rust encoder, and :func:`piece_encoder` checks the fast path
against it on a sample of the real texts before it is used.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("clustertune")

_WS = r"\t\n\x0b\x0c\r "
# GPT-2's pre-tokenizer pattern with \p{L} -> [A-Za-z], \p{N} -> [0-9], \s -> _WS, \S -> [^_WS]:
# exact for ASCII text. Alternation order matters (the first alternative that matches wins), as in
# the original.
ASCII_PRETOKENS = re.compile(
    rf"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^{_WS}A-Za-z0-9]+|[{_WS}]+(?![^{_WS}])|[{_WS}]+"
)
_PROBE_TEXTS = 64


class PieceEncoder:
    """Encodes eligible texts by pre-token lookups; ``None`` from :meth:`encode` means "not eligible"."""

    def __init__(self, backend: Any, added: Sequence[str]):
        self._model = backend.model
        # Each ASCII character as the ByteLevel pre-tokenizer rewrites it ("Ġ" for a space...),
        # asked of the pre-tokenizer itself: a pre-token's model input is its translation.
        pre = backend.pre_tokenizer
        self._bytes = str.maketrans({chr(b): pre.pre_tokenize_str(chr(b))[0][0] for b in range(128)})
        self._cache: dict[str, list[int]] = {}
        self._added = re.compile("|".join(map(re.escape, added))) if added else None
        self.misses = 0

    def eligible(self, text: str) -> bool:
        return text.isascii() and (self._added is None or self._added.search(text) is None)

    def extend(self, out: list[int], text: str) -> None:
        """Append ``text``'s ids to ``out`` (the caller checked :meth:`eligible`)."""
        get, extend = self._cache.get, out.extend
        for piece in ASCII_PRETOKENS.findall(text):
            ids = get(piece)
            if ids is None:  # first sight of this pre-token: the BPE model's answer, kept
                ids = self._cache[piece] = [t.id for t in self._model.tokenize(piece.translate(self._bytes))]
                self.misses += 1
            extend(ids)

    def encode(self, text: str) -> list[int] | None:
        if not self.eligible(text):
            return None
        out: list[int] = []
        self.extend(out, text)
        return out

    @property
    def distinct_pieces(self) -> int:
        return len(self._cache)


def _shape_allows(spec: dict[str, Any]) -> str | None:
    """Why this tokenizer's pipeline cannot take the fast path, or None if it can."""
    pre = spec.get("pre_tokenizer") or {}
    model = spec.get("model") or {}
    if spec.get("normalizer") is not None:
        return "it has a normalizer"
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) or pre.get("add_prefix_space"):
        return "its pre-tokenizer is not GPT-2's ByteLevel regex without a prefix space"
    if model.get("type") != "BPE" or model.get("dropout"):
        return "its model is not a BPE without dropout"
    return None


def piece_encoder(backend: Any, probe: Sequence[str] = ()) -> PieceEncoder | None:
    """A :class:`PieceEncoder` for the Rust tokenizer ``backend`` (``tokenizers.Tokenizer``), or
    None where the fast path does not apply or disagrees with ``backend`` on ``probe`` texts."""
    spec = json.loads(backend.to_str())
    why = _shape_allows(spec)
    if why is None:
        sample = ["Hello world", "a  b\t\n c", "don't 42x"]
        if any(backend.encode(s).ids != backend.encode(s, add_special_tokens=False).ids for s in sample):
            why = "its post-processor adds tokens to each text"
    if why is not None:
        log.debug("data: tokenizing with the Rust encoder only: %s", why)
        return None
    enc = PieceEncoder(backend, [t["content"] for t in spec.get("added_tokens") or [] if t.get("content")])
    checks = [t for t in probe if enc.eligible(t)][:_PROBE_TEXTS]
    expected = [e.ids for e in backend.encode_batch_fast(checks, add_special_tokens=True)] if checks else []
    for text, want in zip(checks, expected):
        if enc.encode(text) != want:  # never expected; if it happens, exactness wins over speed
            log.warning("data: the pre-token cache disagrees with the tokenizer on %r...; using the Rust "
                        "encoder for everything", text[:60])
            return None
    return enc
