"""What a streamed answer shows (serve/text_cut.py): token by token it adds up to the whole
answer decoded at once, for byte-level, Llama 3 and sentencepiece-shaped tokenizers, with
characters split across tokens, spaces cleaned up before punctuation, stop strings across tokens
and an end-of-text token; and a stream decodes each token a bounded number of times, not its
whole answer again per token."""

from __future__ import annotations

from typing import Any

import pytest

from clustertune.serve.text_cut import TextCut
from tests.unit.data.test_encode import bert_style, gpt2_style, llama3_style, sentencepiece_style

TEXT = ("def naïve(x):  # café, 東京 and 🙂 are bytes split over tokens\n    return x , y . z\n"
        "Stop here: END and never this.")
FAMILIES = {"gpt2": gpt2_style, "llama3": llama3_style, "sentencepiece": sentencepiece_style}


class Counting:
    """A tokenizer that counts how many token ids it was asked to decode."""

    def __init__(self, tok: Any):
        self.tok, self.decoded = tok, 0

    def decode(self, ids: list[int], **kw: Any) -> str:
        self.decoded += len(ids)
        return self.tok.decode(ids, **kw)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def tok(request: pytest.FixtureRequest) -> Any:
    return FAMILIES[request.param]()


def streamed(cut: TextCut, ids: list[int]) -> str:
    out = []
    for k in range(1, len(ids) + 1):
        delta, done = cut.feed(ids[:k], final=k == len(ids))
        out.append(delta)
        if done:
            break
    return "".join(out)


def ids_of(tok: Any, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_a_stream_adds_up_to_the_answer_decoded_whole(tok: Any) -> None:
    ids = ids_of(tok, TEXT)
    whole = tok.decode(ids, skip_special_tokens=True)
    assert streamed(TextCut(tok, [], [], strip=False), ids) == whole
    assert streamed(TextCut(tok, [], [], strip=True), ids) == whole.strip()


def test_a_stop_string_across_tokens_and_an_end_of_text_token_end_it(tok: Any) -> None:
    ids = ids_of(tok, TEXT)
    whole = tok.decode(ids, skip_special_tokens=True)
    cut = TextCut(tok, ["never", "END"], [], strip=False)
    assert streamed(cut, ids) == whole[: whole.index("END")] and cut.stopped
    eos = tok.eos_token_id
    half = len(ids) // 2
    cut = TextCut(tok, [], [eos], strip=False)
    assert streamed(cut, ids[:half] + [eos] + ids[half:]) == tok.decode(ids[:half], skip_special_tokens=True)


def test_a_long_stream_decodes_each_token_a_bounded_number_of_times() -> None:
    tok = Counting(gpt2_style())
    ids = ids_of(tok.tok, TEXT * 12 + " FIN, what follows is cut")
    assert len(ids) > 400
    whole = tok.tok.decode(ids)
    assert streamed(TextCut(tok, ["FIN"], [], strip=False), ids) == whole[: whole.index("FIN")]
    # Decoded whole per token, a stream of n tokens decodes about n * n / 2 ids; in pieces, a few per token.
    assert tok.decoded < 8 * len(ids), tok.decoded


def test_pieces_add_up_where_the_tokenizer_cleans_up_spaces_before_punctuation() -> None:
    tok = bert_style()  # transformers cleans up spaces for WordPiece tokenizers only
    tok.clean_up_tokenization_spaces = True
    ids = ids_of(tok, TEXT)
    whole = tok.decode(ids, skip_special_tokens=True)
    assert " , " not in whole  # cleaned up: "x" then "," decodes to "x," only beside the piece before
    assert streamed(TextCut(tok, [], [], strip=False), ids) == whole
