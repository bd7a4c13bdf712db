"""Token ids of many texts, exactly as the tokenizer gives them, at library speed.

Three engines, chosen once per tokenizer and corpus by :func:`text_encoder`:

- ``gigatoken``: a Rust encoder for byte-level BPE (GPT-2, Llama 3, Qwen...) and
  SentencePiece-style BPE with byte fallback (Llama 2, Mistral...), one to two orders of
  magnitude faster than ``tokenizers`` on the same cores. It has no post-processor: the ids a
  tokenizer's template puts around every text (a BOS, ``<cls> ... <sep>``) are added here.
- ``tokenizers``: the Rust encoder of the tokenizer itself (what transformers calls), on a few
  threads; for every tokenizer gigatoken does not support (WordPiece/BERT, Unigram...) or does
  not reproduce exactly.
- ``transformers``: a slow (Python) tokenizer's own call.

Exactness wins over speed: before gigatoken is used, its ids are compared with the Rust
encoder's on a sample of the real texts plus hostile ones (whitespace of every kind, the
tokenizer's added tokens inside words, non-ASCII); any difference selects ``tokenizers``, with
one log line saying why.

gigatoken memoises every distinct pre-token it has seen and never forgets one, so on a corpus
whose vocabulary keeps growing its memory grows with the corpus: the encoder is rebuilt after
every :data:`RESET_CHARS` characters of text, which bounds it.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from clustertune.data.text_column import TextColumn, text_sizes

log = logging.getLogger("clustertune")

# Characters of text after which the gigatoken encoder (and its pre-token cache) is rebuilt.
RESET_CHARS = 32 << 20
# Characters of text per gigatoken call: bounds the ids held twice (its result and ours).
CALL_CHARS = 16 << 20
_BATCH = 1000
_PROBE_TEXTS = 256
_PROBE_CHARS = 20_000  # longer sample texts are cut (still real text, and the check stays cheap)
_HOSTILE = ["", " ", "  a  b\t\tc\n\n\r\nd\x0b\x0c\x1c\x1f\x00\x7f", "don't DON'T we'll I'M 'x''",
            "abc123def 4567.89e-3", "café naïve Ångström ß İ ﬁ ŉ", "日本語のテキスト、中文文本。",
            "emoji 😀👍🏽 ‍ \u200d\ufeff",
            "\u00a0nbsp\u2028line\u2029para\u3000wide", "x" * 3000, "e\u0301 \u0301 Ⅻ ١٢٣ ½"]


def id_dtype(vocab: int) -> Any:
    """The smallest integer type that holds every id: 2 bytes up to 65,536 tokens, else 4."""
    return np.uint16 if vocab <= np.iinfo(np.uint16).max + 1 else np.int32


@contextmanager
def tokenizers_single_threaded() -> Iterator[None]:
    """Each call encodes on one thread: parallelism comes from our worker threads (the Rust
    encoder releases the GIL), not from rayon, which is slower here and warns after a fork."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def _rust_backend(tokenizer: Any) -> Any:
    """The tokenizer's Rust pipeline as a ``tokenizers.Tokenizer``, without truncation or padding."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        backend = Tokenizer.from_str(tokenizer.to_str())
    else:
        backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()
    backend.no_padding()
    return backend


class TextEncoder:
    """Encodes lists of texts into exactly the tokenizer's ids (no truncation or padding; the
    ids its template adds around each text unless ``add_special_tokens`` is False); made by
    :func:`text_encoder`, which picks ``engine``.

    gigatoken is called on about ``call_chars`` characters at a time and rebuilt after every
    ``reset_chars`` (see the module's docstring)."""

    def __init__(self, tokenizer: Any, engine: str, workers: int = 1, backend: Any = None,
                 frame: tuple[list[int], list[int]] = ([], []), *, reset_chars: int | None = None,
                 call_chars: int | None = None):
        self.engine, self.workers = engine, max(1, workers)
        self.reset_chars = RESET_CHARS if reset_chars is None else reset_chars
        self.call_chars = CALL_CHARS if call_chars is None else call_chars
        self.rebuilds = 0  # gigatoken encoders built (each starts with an empty pre-token cache)
        self.dtype = id_dtype(len(tokenizer) if hasattr(tokenizer, "__len__") else tokenizer.get_vocab_size())
        self._tokenizer, self._backend = tokenizer, backend
        self.add_special_tokens = True  # False: only the texts' own ids, as tokenizer(..., add_special_tokens=False)
        self._prefix = np.asarray(frame[0], dtype=np.int64)
        self._suffix = np.asarray(frame[1], dtype=np.int64)
        self._giga: Any = None
        self.spec = backend.to_str() if engine == "gigatoken" else ""  # the tokenizer.json gigatoken loads
        self._giga_chars = 0

    # -- public ------------------------------------------------------------------------------

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids concatenated (``self.dtype``) and each text's id count (int64)."""
        if self.engine == "gigatoken":
            return self._by_gigatoken(texts)
        per_text = self._by_tokenizers(texts) if self.engine == "tokenizers" else self._by_transformers(texts)
        lengths = np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text))
        flat = np.fromiter(itertools.chain.from_iterable(per_text), dtype=self.dtype, count=int(lengths.sum()))
        return flat, lengths

    def encode_flat(self, texts: Sequence[str]) -> np.ndarray:
        """All texts' ids concatenated in order."""
        return self.encode(texts)[0]

    def encode_lists(self, texts: Sequence[str]) -> list[list[int]]:
        """One list of ids per text."""
        if self.engine == "tokenizers":
            return self._by_tokenizers(texts)
        if self.engine == "transformers":
            return self._by_transformers(texts)
        flat, lengths = self.encode(texts)
        ends = np.cumsum(lengths)
        return [a.tolist() for a in np.split(flat, ends[:-1])] if len(texts) else []

    # -- engines -----------------------------------------------------------------------------

    def gigatoken(self, chars: int) -> Any:
        """The gigatoken encoder for ``chars`` more characters, rebuilt (with an empty pre-token
        cache) when they would pass ``reset_chars`` since the last build."""
        import gigatoken

        if self._giga is None or self._giga_chars + chars > self.reset_chars:
            if self._giga is not None:
                self._giga, self._giga_chars = None, 0  # drop the old caches before building new ones
                _release_freed_memory()
            self._giga = gigatoken.Tokenizer.from_json(self.spec)
            self.rebuilds += 1
        self._giga_chars += chars
        return self._giga

    def _by_gigatoken(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        import awkward as ak

        flats, lens = [], []
        if not len(texts):
            return np.empty(0, self.dtype), np.empty(0, np.int64)
        for part in chunks_by_chars(texts, self.call_chars):
            chars = int(text_sizes(part).sum())
            # An Arrow column goes in as its own buffers, with no Python string per text.
            inputs = part.awkward() if isinstance(part, TextColumn) else part
            # parallel=None: gigatoken's own choice, which stays sequential in a forked child
            ids = self.gigatoken(chars).encode_batch(inputs, parallel=None if self.workers > 1 else False)
            flats.append(np.asarray(ak.flatten(ids, axis=1)).astype(self.dtype, copy=False))
            lens.append(np.asarray(ak.num(ids, axis=1), dtype=np.int64))
        flat = np.concatenate(flats) if flats else np.empty(0, self.dtype)
        lengths = np.concatenate(lens) if lens else np.empty(0, np.int64)
        if self.add_special_tokens and (len(self._prefix) or len(self._suffix)):
            flat, lengths = _framed(flat, lengths, self._prefix, self._suffix, self.dtype)
        return flat, lengths

    def _by_tokenizers(self, texts: Sequence[str]) -> list[list[int]]:
        """Per-text ids from the Rust encoder on ``workers`` threads (it releases the GIL)."""
        from concurrent.futures import ThreadPoolExecutor

        texts = list(texts)
        n = len(texts)
        workers = max(1, min(self.workers, n // 64 or 1))
        chunks = workers * 4 if workers > 1 else 1
        parts = [texts[i * n // chunks: (i + 1) * n // chunks] for i in range(chunks)]

        def encode(part: list[str]) -> list[list[int]]:
            return [e.ids for e in self._backend.encode_batch_fast(part, add_special_tokens=self.add_special_tokens)]

        with tokenizers_single_threaded():
            if workers == 1:
                done = [encode(p) for p in parts]
            else:
                with ThreadPoolExecutor(workers, thread_name_prefix="clustertune-tokenize") as ex:
                    done = list(ex.map(encode, parts))
        return list(itertools.chain.from_iterable(done))

    def _by_transformers(self, texts: Sequence[str]) -> list[list[int]]:
        out: list[list[int]] = []
        for i in range(0, len(texts), _BATCH):
            enc = self._tokenizer(list(texts[i: i + _BATCH]), add_special_tokens=self.add_special_tokens, verbose=False)
            out.extend(enc["input_ids"])
        return out


def _release_freed_memory() -> None:
    """Hand memory freed by the native encoder back to the system (glibc keeps freed blocks
    in its heaps, so a process's footprint would otherwise creep up with every rebuilt cache)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def chunks_by_chars(texts: Sequence[str], limit: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of ``texts`` of about ``limit`` characters each (at least one text):
    each ends with the text that takes it to ``limit`` or past it (sizes as :func:`text_sizes`)."""
    sizes = text_sizes(texts)
    if int(sizes.sum()) < limit:
        yield texts
        return
    ends = np.cumsum(sizes)
    start, before = 0, 0  # the first text of the next slice, and the size of all texts before it
    while start < len(texts):
        last = int(np.searchsorted(ends, before + limit))  # the first text at which the slice reaches limit
        if last >= len(texts):
            break
        yield texts[start: last + 1]
        start, before = last + 1, int(ends[last])
    if start < len(texts):
        yield texts[start:]


def _framed(flat: np.ndarray, lengths: np.ndarray, prefix: np.ndarray, suffix: np.ndarray,
            dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every text's ids with ``prefix`` before and ``suffix`` after them, in one pass."""
    n, p, s = len(lengths), len(prefix), len(suffix)
    new_lengths = lengths + (p + s)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(new_lengths[:-1], out=starts[1:])
    out = np.empty(int(new_lengths.sum()), dtype=dtype)
    doc = np.repeat(np.arange(n, dtype=np.int64), lengths)  # the text each old id belongs to
    out[np.arange(len(flat), dtype=np.int64) + doc * (p + s) + p] = flat
    if p:
        out[(starts[:, None] + np.arange(p)).ravel()] = np.tile(prefix, n)
    if s:
        out[(starts[:, None] + new_lengths[:, None] - s + np.arange(s)).ravel()] = np.tile(suffix, n)
    return out, new_lengths


def _frame_of(backend: Any) -> tuple[list[int], list[int]] | None:
    """The ids the post-processor puts before and after one text's own ids, or None when they
    are not the same for every text (then gigatoken's output cannot be completed here)."""
    frames = set()
    for probe in ("hello world", "x", "A longer probe, with punctuation: 42!"):
        core = backend.encode(probe, add_special_tokens=False).ids
        full = backend.encode(probe, add_special_tokens=True).ids
        at = next((i for i in range(len(full) - len(core) + 1) if full[i: i + len(core)] == core), None)
        if at is None or not core:
            return None
        frames.add((tuple(full[:at]), tuple(full[at + len(core):])))
    if len(frames) != 1:
        return None
    prefix, suffix = frames.pop()
    return list(prefix), list(suffix)


def spread(items: Sequence[Any], n: int = _PROBE_TEXTS) -> list[Any]:
    """Up to ``n`` of ``items`` spread evenly over them, in order (each taken by its index: a
    :class:`TextColumn` makes a Python string of those alone)."""
    return [items[i] for i in range(0, len(items), max(1, len(items) // n))[:n]]


def probe_sample(texts: Sequence[str], n: int = _PROBE_TEXTS) -> list[str]:
    """Up to ``n`` texts spread evenly over ``texts`` (long ones cut), to check an encoder on."""
    return [t[:_PROBE_CHARS] for t in spread(texts, n)]


def _gigatoken_mismatch(enc: TextEncoder, reference: TextEncoder, texts: Sequence[str],
                        supported: bool = False) -> str | None:
    """Why ``enc`` (gigatoken) cannot stand in for ``reference`` (the tokenizer's Rust encoder) on
    ``texts``, or None when it can; unless ``supported`` (known already), whether gigatoken
    takes the tokenizer at all."""
    if not supported:
        try:
            enc.gigatoken(0)
        except Exception as exc:  # it raises RuntimeError/ValueError for tokenizers it does not support
            return f"gigatoken does not support this tokenizer ({str(exc).splitlines()[0]})"
    flat, lengths = enc.encode(texts)
    want = reference.encode_lists(texts)  # on the workers' threads: the Rust encoder is the slow side
    # Compared whole first; text by text only to name one that differs.
    want_lengths = np.fromiter(map(len, want), dtype=np.int64, count=len(want))
    want_flat = np.fromiter(itertools.chain.from_iterable(want), dtype=np.int64, count=int(want_lengths.sum()))
    if np.array_equal(lengths, want_lengths) and np.array_equal(flat.astype(np.int64, copy=False), want_flat):
        return None
    for text, g, w in zip(texts, np.split(flat.astype(np.int64), np.cumsum(lengths)[:-1]), want):
        if g.tolist() != w:
            return f"gigatoken's ids differ from the tokenizer's on {text[:40]!r}"
    return "gigatoken's ids differ from the tokenizer's"


class EncoderChoice:
    """:func:`text_encoder` in two steps, so that the first can run while the texts are still
    being read: what depends on the tokenizer alone (its Rust pipeline copied, the ids its
    template adds, gigatoken built and checked on hostile texts and on every added token inside
    words) when made; the check on the real texts by :meth:`on`, once."""

    def __init__(self, tokenizer: Any, workers: int = 1, add_special_tokens: bool = True, **limits: int):
        self._add = add_special_tokens
        self._candidate: TextEncoder | None = None  # gigatoken, still to be checked on the texts
        self._chosen: TextEncoder | None = None
        if not getattr(tokenizer, "is_fast", False) and not hasattr(tokenizer, "encode_batch_fast"):
            self._chosen = self._finish(TextEncoder(tokenizer, "transformers", workers))
            return
        backend = _rust_backend(tokenizer)
        self._reference = TextEncoder(tokenizer, "tokenizers", workers, backend)  # and the fallback
        frame = _frame_of(backend)
        if frame is None:
            self._fall_back("its post-processor does not add the same ids around every text")
            return
        enc = TextEncoder(tokenizer, "gigatoken", workers, backend, frame, **limits)
        added = [t.content for _, t in sorted(backend.get_added_tokens_decoder().items()) if t.content][:64]
        why = _gigatoken_mismatch(enc, self._reference, _HOSTILE + [f"a{a}b {a} {a}{a}\n{a}" for a in added])
        if why is not None:
            self._fall_back(why)
        else:
            self._candidate = enc

    def on(self, probe: Sequence[str]) -> TextEncoder:
        """The encoder, checked on ``probe`` (a sample of the texts: :func:`probe_sample`) the first time."""
        if self._chosen is None:
            assert self._candidate is not None
            why = _gigatoken_mismatch(self._candidate, self._reference, [t for t in probe if isinstance(t, str)],
                                      supported=True)
            if why is not None:
                self._fall_back(why)
            else:
                self._chosen = self._finish(self._candidate)
        return self._chosen

    def _fall_back(self, why: str) -> None:
        log.info("data: tokenizing with the tokenizers encoder: %s", why)
        self._chosen = self._finish(self._reference)

    def _finish(self, enc: TextEncoder) -> TextEncoder:
        enc.add_special_tokens = self._add
        return enc


def text_encoder(tokenizer: Any, probe: Sequence[str] = (), workers: int = 1, add_special_tokens: bool = True,
                 **limits: int) -> TextEncoder:
    """The fastest :class:`TextEncoder` that gives exactly ``tokenizer``'s ids: gigatoken if
    it supports the tokenizer and agrees with it on ``probe`` (a sample of the texts to be
    encoded: :func:`probe_sample`) and on hostile texts, else the tokenizer's Rust encoder (or,
    for a slow tokenizer, its own call). ``limits``: ``reset_chars``, ``call_chars`` of
    :class:`TextEncoder`."""
    return EncoderChoice(tokenizer, workers, add_special_tokens, **limits).on(probe)


def encode_texts(texts: Sequence[str], tokenizer: Any, workers: int = 1,
                 add_special_tokens: bool = True) -> list[list[int]]:
    """Token ids per text, exactly ``tokenizer(texts, add_special_tokens=...)["input_ids"]``
    (no truncation or padding), through the fastest encoder that reproduces them.

    The one call for code that needs per-text ids (SFT examples, for instance). ``tokenizer``
    is a transformers tokenizer (fast or slow) or a ``tokenizers.Tokenizer``; the encoder is
    chosen and checked on these texts each call, so call it with many texts at once. With
    ``add_special_tokens=False`` the ids the tokenizer's template adds around each text (a BOS,
    ``<cls> ... <sep>``) are left out, as for text a chat template already framed.
    """
    texts = list(texts)
    return text_encoder(tokenizer, probe_sample(texts), workers, add_special_tokens).encode_lists(texts)


def encode_flat(texts: Sequence[str], tokenizer: Any, workers: int = 1) -> np.ndarray:
    """All texts' ids concatenated in order, in the smallest id dtype (see :func:`encode_texts`)."""
    return text_encoder(tokenizer, probe_sample(texts), workers).encode_flat(texts)
