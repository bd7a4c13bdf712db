"""The fast encoder gives exactly the tokenizer's ids, for every family it takes, and stands
aside (with one log line) for every tokenizer it does not reproduce."""

from __future__ import annotations

import itertools
import logging
import random
from typing import Any

import numpy as np
import pytest

from clustertune.data.builtin import pydoc_paragraphs
from clustertune.data.encode import encode_flat, encode_texts, probe_sample, text_encoder
from clustertune.data.stream import BlockStream
from clustertune.models.tokenizer import train_bpe

# What a tired corpus holds: whitespace runs of every kind, contractions in both cases, digits
# glued to letters, control characters (\x1c-\x1f are whitespace to Python but not to GPT-2's
# regex), the tokenizers' own added tokens inside words, and non-ASCII of every width.
ALPHABET = list("aZ09 ") * 6 + [
    "'s", "'T", "'re", "'ve", "'m", "'ll", "'d", "''", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f",
    "\x00", "\x7f", "  ", "   ", ".", "!?", "<|endoftext|>", "<pad>", "<s>", "</s>", "<|eot_id|>", "<extra>",
    "é", "—", "日本", "😀", "👍🏽", "\u00a0", "\u2028", "\u3000", "e\u0301", "ﬁ", "Ⅻ", "١٢٣", "ß", "İ", "\ufeff",
    "\U0010ffff",
]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _corpus() -> list[str]:
    return list(itertools.islice(pydoc_paragraphs(), 300))


def _wrap(tok: Any, **specials: str) -> Any:
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok.add_tokens([AddedToken("<extra>", special=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=10**6, **specials)


def gpt2_style() -> Any:
    return train_bpe(_corpus(), 600, classification=False, model_max_length=10**6)


def llama3_style() -> Any:
    """Byte-level BPE behind Llama 3's pre-tokenizer regex, merges ignored for whole words, a BOS on every text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|begin_of_text|>", "<|eot_id|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bos = ("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                      special_tokens=[bos]),
    ])
    return _wrap(tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")


def sentencepiece_style() -> Any:
    """Llama 2's shape: "▁" for spaces and before every text, byte fallback, a BOS on every text."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tok.train_from_iterator([t.replace(" ", "▁") for t in _corpus()],
                            trainers.BpeTrainer(vocab_size=800, special_tokens=specials, show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return _wrap(tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def framed_gpt2_style() -> Any:
    return train_bpe(_corpus(), 600, classification=True, model_max_length=10**6)  # <cls> text <sep>


def bert_style() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(_corpus(), trainers.WordPieceTrainer(
        vocab_size=600, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]"], show_progress=False))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return _wrap(tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]")


FAST_FAMILIES = {"gpt2": gpt2_style, "llama3": llama3_style, "sentencepiece": sentencepiece_style,
                 "framed": framed_gpt2_style}


@pytest.fixture(scope="module")
def family_tokenizers() -> dict[str, Any]:
    return {name: make() for name, make in FAST_FAMILIES.items()}


def hostile_texts(n: int, seed: int = 0) -> list[str]:
    """Random strings over ALPHABET, the empty text, a few very long texts, and real paragraphs."""
    rng = random.Random(seed)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(n)]
    texts += ["", "", "x" * 100_000, "é" * 20_000 + " word" * 5_000, "\n\n".join(_corpus())]
    texts += _corpus()
    rng.shuffle(texts)
    return texts


def reference(texts: list[str], tok: Any) -> list[list[int]]:
    return tok(texts, verbose=False)["input_ids"]


@pytest.mark.parametrize("family", list(FAST_FAMILIES))
@pytest.mark.parametrize("workers", [1, 2])
def test_gigatoken_gives_the_tokenizers_ids(family_tokenizers: dict[str, Any], family: str, workers: int) -> None:
    tok = family_tokenizers[family]
    texts = hostile_texts(1500, seed=workers)
    enc = text_encoder(tok, probe_sample(texts), workers)
    assert enc.engine == "gigatoken"
    want = reference(texts, tok)
    flat, lengths = enc.encode(texts)
    assert lengths.tolist() == [len(w) for w in want]
    assert np.array_equal(flat.astype(np.int64), np.fromiter(itertools.chain.from_iterable(want), dtype=np.int64))
    assert enc.encode_lists(texts) == want
    assert encode_texts(texts, tok) == want  # the one call the SFT path uses
    bare = tok(texts, add_special_tokens=False, verbose=False)["input_ids"]
    assert encode_texts(texts, tok, workers, add_special_tokens=False) == bare
    assert enc.encode_lists([]) == [] and len(enc.encode_flat([])) == 0


def test_the_pre_token_cache_is_rebuilt_without_changing_ids(family_tokenizers: dict[str, Any]) -> None:
    tok = family_tokenizers["llama3"]
    texts = hostile_texts(400, seed=5)
    small = text_encoder(tok, probe_sample(texts), reset_chars=2_000, call_chars=700)  # rebuilt many times
    assert small.engine == "gigatoken"
    assert small.encode_lists(texts) == reference(texts, tok)
    assert small.rebuilds > 10


def test_wordpiece_takes_the_tokenizers_fallback(caplog: pytest.LogCaptureFixture) -> None:
    tok = bert_style()
    texts = hostile_texts(300, seed=2)
    with caplog.at_level(logging.INFO, logger="clustertune"):
        enc = text_encoder(tok, probe_sample(texts), workers=2)
    assert enc.engine == "tokenizers"
    assert "gigatoken does not support this tokenizer" in caplog.text and "WordPiece" in caplog.text
    assert enc.encode_lists(texts) == reference(texts, tok)
    bare = tok(texts, add_special_tokens=False, verbose=False)["input_ids"]
    assert encode_texts(texts, tok, add_special_tokens=False) == bare and bare != reference(texts, tok)
    flat = list(itertools.chain.from_iterable(reference(texts, tok)))
    assert encode_flat(texts, tok, 2).astype(np.int64).tolist() == flat


def test_a_difference_on_the_real_texts_selects_the_fallback(caplog: pytest.LogCaptureFixture) -> None:
    from tokenizers import AddedToken

    # An added token that may only match a whole word: gigatoken 0.10 loads it but matches it
    # inside words too. The check on the real texts must catch that before anything is encoded.
    tok = gpt2_style()
    tok.add_tokens([AddedToken("def", single_word=True)])
    texts = hostile_texts(200, seed=3) + ["undefined def deft", "def f(): pass"]
    with caplog.at_level(logging.INFO, logger="clustertune"):
        enc = text_encoder(tok, probe_sample(texts))
    assert enc.engine == "tokenizers"
    assert "gigatoken's ids differ from the tokenizer's" in caplog.text
    assert caplog.text.count("tokenizing with the tokenizers encoder") == 1
    assert enc.encode_lists(texts) == reference(texts, tok)


def test_a_slow_tokenizer_is_called_itself() -> None:
    from transformers import PreTrainedTokenizer

    class Chars(PreTrainedTokenizer):  # a minimal slow tokenizer: one id per character
        def __init__(self) -> None:
            super().__init__()

        @property
        def vocab_size(self) -> int:
            return 256

        def get_vocab(self) -> dict[str, int]:
            return {chr(i): i for i in range(256)}

        def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
            return [c if ord(c) < 256 else "?" for c in text]

        def _convert_token_to_id(self, token: str) -> int:
            return ord(token)

    tok = Chars()
    texts = ["abc", "", "dé", "x y"]
    assert text_encoder(tok, texts).engine == "transformers"
    assert encode_texts(texts, tok) == reference(texts, tok)
    assert encode_texts(texts, tok, add_special_tokens=False) == tok(texts, add_special_tokens=False)["input_ids"]


def test_streaming_blocks_match_prepared_ones(family_tokenizers: dict[str, Any]) -> None:
    tok = family_tokenizers["sentencepiece"]
    texts = hostile_texts(400, seed=4)
    stream = BlockStream(lambda: iter(texts), tok, 16, chunk_texts=64)
    blocks = np.stack([b for _, b, _ in stream.blocks()]).astype(np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(reference(texts, tok)), dtype=np.int64)
    assert len(blocks) == len(flat) // 16
    assert np.array_equal(blocks, flat[: len(blocks) * 16].reshape(-1, 16))


@pytest.mark.parametrize("arrow_type", ["string", "large_string"])
def test_an_arrow_column_is_encoded_from_its_own_buffers_into_the_same_ids(
        family_tokenizers: dict[str, Any], monkeypatch: pytest.MonkeyPatch, arrow_type: str) -> None:
    """What Arrow read from a JSON lines or parquet file reaches gigatoken as its two buffers: no
    Python string per text is made (iterating the column fails here), nulls are empty texts, and
    a slice that starts inside the buffers (a chunk of a file) keeps its place."""
    import pyarrow as pa

    from clustertune.data.text_column import TextColumn

    tok = family_tokenizers["framed"]
    texts = hostile_texts(600, seed=6)
    values: list[str | None] = ["skipped"] * 7 + [None if i % 50 == 3 else t for i, t in enumerate(texts)]
    column = TextColumn(pa.array(values, type=getattr(pa, arrow_type)())[7:])
    as_read = ["" if v is None else v for v in values[7:]]
    assert len(column) == len(as_read) and column[3] == "" and column.tolist() == as_read
    enc = text_encoder(tok, probe_sample(column), call_chars=3_000, reset_chars=20_000)  # many calls
    assert enc.engine == "gigatoken"

    def no_strings(self: TextColumn) -> Any:
        raise AssertionError("a Python string was made for every text")

    monkeypatch.setattr(TextColumn, "__iter__", no_strings)
    monkeypatch.setattr(TextColumn, "tolist", no_strings)
    flat, lengths = enc.encode(column)
    want = reference(as_read, tok)
    assert lengths.tolist() == [len(w) for w in want]
    assert np.array_equal(flat.astype(np.int64), np.fromiter(itertools.chain.from_iterable(want), dtype=np.int64))
    assert enc.rebuilds > 2
    monkeypatch.undo()
    bert = bert_style()
    fallback = text_encoder(bert, probe_sample(column), workers=2)  # the other engines take it as a list
    assert fallback.engine == "tokenizers"
    assert fallback.encode_lists(column) == reference(as_read, bert)


def test_chunks_end_at_the_text_that_reaches_the_limit() -> None:
    import pyarrow as pa

    from clustertune.data.encode import chunks_by_chars
    from clustertune.data.text_column import TextColumn

    texts = ["abc", "de", "", "fghij", "k", "lm", "nopqrs", "t"]  # sizes 3 2 0 5 1 2 6 1 (20)
    cuts = [["abc", "de"], ["", "fghij"], ["k", "lm", "nopqrs"], ["t"]]
    assert [list(c) for c in chunks_by_chars(texts, 5)] == cuts
    column = TextColumn(pa.array(texts))
    assert [list(c) for c in chunks_by_chars(column, 5)] == cuts
    assert [list(c) for c in chunks_by_chars(texts, 21)] == [texts]  # under the limit: as it is
    assert [list(c) for c in chunks_by_chars(texts, 1)] == [[t] for t in texts[:2]] + [["", "fghij"]] + [[t] for t in texts[4:]]
    assert [list(c) for c in chunks_by_chars([], 5)] == [[]]
