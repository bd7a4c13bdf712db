"""builtin:pydoc-topics: the SFT demo's data must be answerable from the question alone."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict

from clustertune.data.builtin import SFT_QUESTION, SFT_TOPICS, pydoc_topics


def _split(row: dict) -> tuple[str, str]:
    user, assistant = row["messages"]
    return user["content"], assistant["content"]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z_]+|\S", text.lower())


def test_rows_name_a_topic_absent_from_the_question_and_never_repeat_a_question() -> None:
    rows = pydoc_topics()
    pairs = [_split(r) for r in rows]
    assert {a for _, a in pairs} == set(SFT_TOPICS)
    assert all(q.startswith(SFT_QUESTION + "\n") and a not in q.lower() for q, a in pairs)
    assert len({q for q, _ in pairs}) == len(pairs)
    assert max(Counter(a for _, a in pairs).values()) <= 100


def test_the_opening_words_decide_the_topic_for_held_out_passages() -> None:
    # A naive Bayes over the words of the training rows' questions names the topic of most
    # held-out questions: the exact match the SFT demo asks of its model is within reach.
    pairs = [_split(r) for r in pydoc_topics()]
    held, train = pairs[:len(pairs) // 5], pairs[len(pairs) // 5:]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    prior: Counter[str] = Counter()
    for q, a in train:
        prior[a] += 1
        counts[a].update(_words(q.split("\n", 1)[1]))
    vocab = len({w for c in counts.values() for w in c})

    def guess(q: str) -> str:
        def logp(a: str) -> float:
            total = sum(counts[a].values()) + vocab
            return math.log(prior[a]) + sum(math.log((counts[a][w] + 1) / total) for w in _words(q))
        return max(prior, key=logp)

    right = sum(guess(q.split("\n", 1)[1]) == a for q, a in held)
    majority = max(Counter(a for _, a in held).values())
    assert right >= 0.8 * len(held) > majority
