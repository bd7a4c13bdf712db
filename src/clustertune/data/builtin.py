"""Builtin offline corpora, made from Python's own reference documentation.

``pydoc_data.topics`` ships with every CPython: 79 topics, about 465k characters. No network,
no files to carry, and the same bytes on every node with the same Python version.

- ``builtin:pydoc``: its paragraphs as text examples (causal LM).
- ``builtin:pydoc-kinds``: its lines labelled ``prose`` (0) or ``code`` (1), balanced, with the
  indentation stripped so the model has to read the words. The majority baseline is 0.5.
- ``builtin:pydoc-topics``: chat examples for instruction tuning: the opening words of a
  paragraph, and the answer naming the topic of the reference it comes from (one of
  :data:`SFT_TOPICS`, up to 100 passages each). The answer is never in the prompt: it has to be inferred.
- ``builtin:pydoc-preferences``: preference pairs (prompt, chosen, rejected) for reward models
  and DPO: :func:`builtin_rl_rows`.
"""

from __future__ import annotations

import platform
import random
import re
from clustertune.errors import DataError
from clustertune.rewards import char_fraction

BUILTIN_PREFIX = "builtin:"
BUILTINS = ("pydoc", "pydoc-kinds", "pydoc-topics", "pydoc-preferences")
# Preference pairs for rlhf and reward_model (see builtin_rl_rows).
PROMPT_WORDS = 4
CONTINUATION_WORDS = 6
PAIR_MARGIN = 0.05
# The pairing of builtin:pydoc-preferences as prepared data: fixed, as its fingerprint names no seed.
PAIRS_SEED = 0
KIND_LABELS = ("prose", "code")

_CODE_START = (">>>", "...", "def ", "class ", "import ", "from ", "for ", "if ", "print(", "return", "while ",
               "try:", "except", "with ", "raise ", "yield", "elif ", "else:", "lambda", "@")


def corpus_version() -> str:
    """Identity of the builtin corpus: it changes only with the Python release."""
    return f"pydoc_data/python-{platform.python_version()}"


def _topics() -> dict[str, str]:
    from pydoc_data.topics import topics

    return topics


def pydoc_paragraphs() -> list[str]:
    """All non-empty paragraphs, topics in sorted order."""
    out = []
    topics = _topics()
    for name in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[name]):
            if para.strip():
                out.append(para.strip("\n"))
    return out


def _is_code_paragraph(para: str) -> bool:
    lines = [ln for ln in para.split("\n") if ln.strip()]
    if "::=" in para:  # grammar rules are neither prose nor code
        return False
    if not all(ln.startswith("   ") for ln in lines):
        return False
    # Indented blocks are also used for descriptions under signatures: those read as words.
    wordy = sum(_reads_as_words(ln.strip()) for ln in lines)
    return wordy <= 0.3 * len(lines) and any(
        ln.strip().startswith(_CODE_START) or "(" in ln or "=" in ln for ln in lines
    )


def _reads_as_words(text: str) -> bool:
    words = text.split()
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return len(words) >= 4 and letters >= 0.85 * len(text)


def pydoc_kinds(seed: int = 0) -> list[dict[str, object]]:
    """Balanced ``{"text", "label"}`` rows: lines of prose (0) and of code examples (1)."""
    prose, code = [], []
    for para in pydoc_paragraphs():
        if "::=" in para:
            continue
        bucket = code if _is_code_paragraph(para) else prose
        for ln in para.split("\n"):
            text = ln.strip()
            # Headings' underlines and one-word lines carry no signal either way, and prose
            # paragraphs also hold signatures such as "class dict(**kwargs)": prose lines
            # must read as words, and code lines must not.
            if len(text) < 8 or set(text) <= set("*=-~^"):
                continue
            if (bucket is prose) != _reads_as_words(text):
                continue
            bucket.append(text)
    rng = random.Random(seed)
    n = min(len(prose), len(code))
    rows = [{"text": t, "label": 0} for t in rng.sample(prose, n)] + [{"text": t, "label": 1} for t in rng.sample(code, n)]
    rng.shuffle(rows)
    return rows


# Four topics whose vocabularies differ enough that the opening words decide the answer: a
# bag-of-words classifier fitted on the training rows names the held-out topics 9 times in 10
# (with six topics, adding typesmapping and compound, under 7 in 10).
SFT_TOPICS = ("debugger", "string-methods", "formatstrings", "specialnames")
SFT_QUESTION = "Which topic of the Python reference is this from?"
SFT_WORDS = 24  # words of the paragraph in the prompt


def pydoc_topics(seed: int = 0, per_topic: int = 100) -> list[dict[str, object]]:
    """Chat rows: a passage's opening words -> the name of its topic (up to ``per_topic`` each)."""
    topics = _topics()
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    for name in SFT_TOPICS:
        seen, paras = set(), []
        for para in re.split(r"\n\s*\n", topics[name]):
            words = para.split()
            text = " ".join(words[:SFT_WORDS])
            # Short lines (headings) say little, and a passage that names its topic is a copy task.
            if len(words) >= 8 and name not in text.lower() and text not in seen:
                seen.add(text)
                paras.append(text)
        for text in rng.sample(paras, min(per_topic, len(paras))):
            rows.append({"messages": [{"role": "user", "content": f"{SFT_QUESTION}\n{text}"},
                                      {"role": "assistant", "content": name}]})
    rng.shuffle(rows)
    return rows


def short_name(dataset: str) -> str:
    """``builtin:NAME`` -> ``NAME``, or a DataError listing the builtin corpora."""

    short = dataset[len(BUILTIN_PREFIX):]
    if short not in BUILTINS:
        raise DataError(
            f"data.dataset: unknown builtin corpus {dataset!r}; available: "
            + ", ".join(BUILTIN_PREFIX + b for b in BUILTINS)
        )
    return short


def builtin_rows(name: str) -> list[dict[str, object]]:
    """Rows of a builtin corpus by name (without the ``builtin:`` prefix)."""
    if name == "pydoc":
        return [{"text": p} for p in pydoc_paragraphs()]
    if name == "pydoc-kinds":
        return pydoc_kinds()
    if name == "pydoc-topics":
        return pydoc_topics()
    if name == "pydoc-preferences":
        return builtin_rl_rows(name, PAIRS_SEED)  # type: ignore[return-value]
    raise KeyError(name)


def _prose_windows() -> list[list[str]]:
    """Runs of PROMPT_WORDS + CONTINUATION_WORDS words from the prose of the builtin corpus."""
    need = PROMPT_WORDS + CONTINUATION_WORDS
    out = []
    for para in pydoc_paragraphs():
        words: list[str] = []
        for ln in para.split("\n"):
            text = ln.strip()
            letters = sum(c.isalpha() or c.isspace() for c in text)
            if len(text.split()) >= 4 and letters >= 0.85 * len(text):  # prose, not code or tables
                words.extend(text.split())
        out.extend(words[i:i + need] for i in range(0, len(words) - need + 1, need))
    return out


def builtin_rl_rows(name: str, seed: int) -> list[dict[str, str]]:
    """Rows of ``builtin:pydoc-prompts`` or ``builtin:pydoc-preferences``.

    A preference pair offers two real continuations for one prompt (its own and another
    window's) and prefers the one the shipped ``char_fraction`` reward scores higher (more
    letters ``e``), keeping only pairs it separates clearly: a labeller with a consistent taste
    that a small policy can learn, so held-out accuracy starts near chance and has to be earned.
    """

    windows = _prose_windows()
    rng = random.Random(seed)
    rows = []
    for w in windows:
        prompt = " ".join(w[:PROMPT_WORDS])
        if name == "pydoc-prompts":
            rows.append({"prompt": prompt})
            continue
        own = " " + " ".join(w[PROMPT_WORDS:])
        other = " " + " ".join(rng.choice(windows)[PROMPT_WORDS:])
        a, b = char_fraction([prompt] * 2, [own, other])
        if abs(a - b) >= PAIR_MARGIN:
            chosen, rejected = (own, other) if a > b else (other, own)
            rows.append({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    rng.shuffle(rows)
    return rows

