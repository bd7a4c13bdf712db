"""SFT ids and loss masks: segments through gigatoken give exactly what character offsets give,
and a conversation whose segments disagree with its whole text goes through the offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clustertune.data.packing import best_fit_decreasing, build_rows
from clustertune.data.sft import sft_encoder, tokenize_conversations
from clustertune.data.sft_tokens import by_offsets, by_segments, ids_and_masks
from clustertune.data.templates import BUILTIN_TEMPLATES, ChatRenderer, resolve_template
from clustertune.recipe.sft_schema import SFTSection
from tests.sft_fixtures import CHATS

# A tokenizer's own template, rendered through Jinja: role tags on their own line, the
# end-of-text token closing each turn.
OWN = (
    "{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + eos_token + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
# Answers that start with a space: under every template here, the space before the answer's
# first word is one token with the word in the whole text, but the span starts at the word,
# so that conversation's segments do not agree and it is tokenized through the offsets.
SPACED = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"},
          {"role": "assistant", "content": " the four."}, {"role": "user", "content": "And 3 + 3?"},
          {"role": "assistant", "content": " the six."}]
CONVS = CHATS + [SPACED] + [
    [{"role": "user", "content": f"Say {w} twice."}, {"role": "assistant", "content": f"{w} {w}"},
     {"role": "user", "content": "Again, with a café."}, {"role": "assistant", "content": f"{w}, {w} (ça va) \n"}]
    for w in ("yield", "lambda", "def", "naïve")
]


def _tok(base: Path, template: str | None = None) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base))
    if template:
        tok.chat_template = template
    return tok


@pytest.fixture(scope="module")
def unmarked_tok() -> Any:
    """A tokenizer without the templates' markers as tokens: they are tokenized as plain text."""
    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    return train_bpe(pydoc_paragraphs(), 512, classification=False, model_max_length=128)


@pytest.mark.parametrize("loss_on", ["assistant", "completion"])
def test_markers_as_plain_text_give_the_ids_and_masks_of_the_offsets(unmarked_tok: Any, loss_on: str) -> None:
    tok = unmarked_tok
    for template in BUILTIN_TEMPLATES.values():
        renderer = ChatRenderer(template, tok)
        rendered = [renderer.with_spans(c, loss_on, f"example {i}") for i, c in enumerate(CONVS)]
        encoder = sft_encoder(tok, [r.text for r in rendered])
        ids, masks, through_offsets = ids_and_masks(rendered, tok, encoder)
        want = by_offsets(rendered, tok)
        assert [x.tolist() for x in ids] == [w.tolist() for w, _ in want]
        assert [m.tolist() for m in masks] == [w.tolist() for _, w in want]
        assert encoder.engine == "gigatoken" and 0 < through_offsets < len(CONVS)  # both ways taken


@pytest.mark.parametrize("name", ["chatml", "llama3", "own"])
@pytest.mark.parametrize("loss_on", ["assistant", "completion", "all"])
def test_segments_give_the_ids_and_masks_of_the_offsets(sft_base: Path, name: str, loss_on: str) -> None:
    tok = _tok(sft_base, OWN if name == "own" else None)
    template = resolve_template(None if name == "own" else name, tok)
    renderer = ChatRenderer(template, tok)
    assert (renderer.direct is None) == (name == "own")  # the tokenizer's own one goes through Jinja
    rendered = [renderer.with_spans(c, loss_on, f"example {i}") for i, c in enumerate(CONVS)]
    encoder = sft_encoder(tok, [r.text for r in rendered])
    assert encoder.engine == "gigatoken"
    want = by_offsets(rendered, tok)
    ids, masks, through_offsets = ids_and_masks(rendered, tok, encoder)
    for i, (w_ids, w_mask) in enumerate(want):
        assert ids[i].tolist() == w_ids.tolist(), (name, i)
        assert masks[i].tolist() == w_mask.tolist(), (name, i)
    assert all(m.any() for m in masks)
    seg_ids, _ = by_segments(rendered, encoder)
    fell_back = [i for i, x in enumerate(seg_ids) if x is None]
    assert through_offsets == len(fell_back)
    if loss_on == "all":  # one segment, the whole text: it always agrees
        assert fell_back == []
    else:  # the conversation whose answers start with a space disagrees; the others agree
        assert fell_back == [CONVS.index(SPACED)]


def test_tokenize_conversations_falls_back_per_conversation_and_for_tokenizers_gigatoken_cannot_run(
        sft_base: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from clustertune.data.builtin import pydoc_paragraphs

    section = SFTSection()
    tok = _tok(sft_base)
    renderer = ChatRenderer(BUILTIN_TEMPLATES["chatml"], tok)
    out = tokenize_conversations(CONVS, renderer, tok, section, 10_000, "train")
    assert out.through_offsets == 1
    want = by_offsets([renderer.with_spans(c, "assistant", "") for c in CONVS], tok)
    for got_ids, got_mask, (w_ids, w_mask) in zip(out.ids, out.masks, want):
        w_mask = w_mask.copy()
        w_mask[0] = 0
        assert got_ids.tolist() == w_ids.tolist() and got_mask.tolist() == w_mask.tolist()
    # WordPiece (BERT-style): gigatoken does not reproduce it, so every conversation goes through
    # the offsets, with the same result as they give.
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.train_from_iterator(pydoc_paragraphs()[:300], trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=["[UNK]", "[PAD]", "<|im_start|>", "<|im_end|>"]))
    bert = PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]", pad_token="[PAD]",
                                   additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    bert_renderer = ChatRenderer(BUILTIN_TEMPLATES["chatml"], bert)
    chosen: list[Any] = []
    out = tokenize_conversations(CONVS, bert_renderer, bert, section, 10_000, "train", chosen=chosen)
    assert chosen[0].engine != "gigatoken" and out.through_offsets == len(CONVS)
    want = by_offsets([bert_renderer.with_spans(c, "assistant", "") for c in CONVS], bert)
    assert [x.tolist() for x in out.ids] == [w.tolist() for w, _ in want]


def _rows_one_by_one(ids: list[np.ndarray], masks: list[np.ndarray], width: int,
                     groups: list[list[int]]) -> tuple[np.ndarray, ...]:
    """Rows built the plain way, one example at a time: what build_rows must equal."""
    n = len(groups)
    out_ids, out_mask = np.full((n, width), 7, np.int64), np.zeros((n, width), np.int64)
    pos, lengths = np.zeros((n, width), np.int64), np.zeros(n, np.int64)
    for r, group in enumerate(groups):
        at = 0
        for i in group:
            k = len(ids[i])
            out_ids[r, at: at + k], out_mask[r, at: at + k], pos[r, at: at + k] = ids[i], masks[i], np.arange(k)
            at += k
        pos[r, at:] = np.arange(width - at)
        lengths[r] = at
    return out_ids, out_mask, pos, lengths


@pytest.mark.parametrize("packed", [True, False])
def test_rows_hold_every_example_in_place(packed: bool) -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        cap = int(rng.integers(1, 30))
        ids = [rng.integers(0, 500, int(rng.integers(1, cap + 1))) for _ in range(int(rng.integers(1, 25)))]
        masks = [(rng.random(len(x)) < 0.5).astype(np.uint8) for x in ids]
        rows = build_rows(ids, masks, cap, packed, 7, np.uint16)
        groups = best_fit_decreasing([len(x) for x in ids], cap) if packed else [[i] for i in range(len(ids))]
        width = cap if packed else max(len(x) for x in ids)  # unpacked: as wide as the longest example
        want = _rows_one_by_one(ids, masks, width, groups)
        got = (rows.input_ids, rows.loss_mask, rows.position_ids, rows.lengths)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        assert rows.input_ids.dtype == np.uint16 and rows.n_tokens == sum(map(len, ids))
