"""Supervised fine-tuning examples: raw rows -> conversations -> token ids and a loss mask.

Rows come in four shapes (``data.sft.format``): ``messages`` (``{role, content}`` turns),
ShareGPT ``conversations`` (``{from, value}`` turns, converted), prompt/completion columns and
Alpaca's instruction/input/output columns (each one user turn and one assistant turn). Every conversation is rendered with the chat template
(:mod:`clustertune.data.templates`), tokenized whole (so the ids are those of tokenizing the
rendered text), and a token is trained when it holds a character of a trained span: from the
token holding the span's first character to the token holding its last (how that is found
fast and exactly: :mod:`clustertune.data.sft_tokens`). The first token of an
example is never trained (nothing before it predicts it), which keeps packed rows from
predicting one example's first token from the end of the previous one.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clustertune.data.origins import Found, Origins
from clustertune.data.templates import ChatRenderer
from clustertune.errors import DataError
from clustertune.recipe.sft_schema import SFTSection
from clustertune.data.encode import id_dtype, probe_sample, spread, text_encoder
from clustertune.data.packing import build_rows
from clustertune.data.prepare import column
from clustertune.data.truncation import check_truncation
from clustertune.data.sft_tokens import ids_and_masks

log = logging.getLogger("clustertune")

ROLES = ("system", "user", "assistant")
ANY_ORDER_ROLES = ROLES + ("tool",)  # data.sft.role_order=any: function-calling data
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "system": "system", "model": "assistant", "chatgpt": "assistant", "bing": "assistant"}


def detect_format(columns: list[str], s: SFTSection, split: str) -> str:
    """The example shape: the one set, else the one whose columns the data has."""
    need = own_columns(s)
    if s.format != "auto":
        missing = [c for c in need[s.format] if c not in columns]
        if missing:
            raise DataError(f"data.sft.format: {s.format} needs column(s) {', '.join(missing)}, not in the {split} "
                            f"data; its columns are {', '.join(columns)} (set data.sft.*_column to the names it uses)")
        return s.format
    found = [f for f, cols in need.items() if all(c in columns for c in cols)]
    if not found:
        raise DataError(
            f"data.sft.format: the {split} data has none of the SFT shapes: a {s.messages_column!r} column "
            f"(messages), a {s.conversations_column!r} column (ShareGPT), {s.prompt_column!r} and "
            f"{s.completion_column!r} columns, or {s.instruction_column!r} and {s.output_column!r} (Alpaca); its "
            f"columns are {', '.join(columns)} (set data.sft.*_column)"
        )
    return found[0]


def own_columns(s: SFTSection) -> dict[str, list[str]]:
    """The columns each shape needs (Alpaca's input column is optional)."""
    return {"messages": [s.messages_column], "conversations": [s.conversations_column],
            "prompt_completion": [s.prompt_column, s.completion_column],
            "alpaca": [s.instruction_column, s.output_column]}


def _turns(raw: Any, fmt: str, where: str, roles: tuple[str, ...] = ROLES) -> list[dict[str, str]]:
    """One row's turns as messages, every problem named with the fix."""
    col = "messages" if fmt == "messages" else "conversations"
    if not isinstance(raw, (list, tuple)):
        raise DataError(f"{where}: {col} is {type(raw).__name__} {str(raw)[:60]!r}, not a list of turns; "
                        f"each example needs a list of {{role, content}} turns")
    out = []
    for j, turn in enumerate(raw):
        if not isinstance(turn, dict):
            raise DataError(f"{where}: turn {j} is {type(turn).__name__}, not a {{role, content}} object")
        if fmt == "messages":
            role, content = turn.get("role"), turn.get("content")
            if role not in roles:
                also = " (tool turns: data.sft.role_order=any)" if role == "tool" else ""
                raise DataError(f"{where}: turn {j} has role {role!r}; roles are {', '.join(roles)}{also} "
                                "(ShareGPT data with from/value: data.sft.format=conversations)")
        else:
            sender, content = turn.get("from"), turn.get("value")
            role = SHAREGPT_ROLES.get(str(sender).lower()) if sender is not None else None
            if role is None:
                raise DataError(f"{where}: turn {j} is from {sender!r}; ShareGPT senders are "
                                f"{', '.join(sorted(SHAREGPT_ROLES))}")
        if not isinstance(content, str):
            raise DataError(f"{where}: turn {j} ({role}) has content {_kind(content)}, not a string; every turn "
                            "needs text (remove the turn or the example)")
        if not content.strip():
            raise DataError(f"{where}: turn {j} ({role}) has empty content; every turn needs text "
                            "(remove the turn or the example)")
        out.append({"role": str(role), "content": content})
    if not any(t["role"] == "assistant" for t in out):
        raise DataError(f"{where}: the conversation has no assistant turn, so nothing to train on; "
                        "every example needs at least one assistant answer")
    return out


def _kind(v: Any) -> str:
    return "null" if v is None else f"{type(v).__name__} {str(v)[:40]!r}"


def order_problem(conv: list[dict[str, str]]) -> str | None:
    """Why the turns of ``conv`` do not alternate user, assistant, user, ... after one optional
    leading system turn (None: they do), as chat templates and the models trained on them expect."""
    start = 1 if conv and conv[0]["role"] == "system" else 0
    for j in range(start, len(conv)):
        want = ("user", "assistant")[(j - start) % 2]
        if conv[j]["role"] != want:
            return (f"turn {j} is {conv[j]['role']} where {want} was expected (turns alternate user, assistant, "
                    "... after one optional leading system turn)")
    return None


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and np.isnan(v))


def _valid_messages(col: Any) -> list[list[dict[str, str]]] | None:
    """The conversations of an Arrow column of ``{role, content}`` turns read column-wise, when
    every row passes the checks of :func:`_turns`; None when any might not (or the column has
    another type): then the rows go through :func:`_turns`, which names the problem."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)) or arr.null_count:
        return None
    turns = arr.flatten()
    if not pa.types.is_struct(turns.type) or turns.null_count:
        return None
    names = [turns.type.field(i).name for i in range(turns.type.num_fields)]
    if "role" not in names or "content" not in names:
        return None
    fields = turns.flatten()
    role, content = fields[names.index("role")], fields[names.index("content")]
    if not all(pa.types.is_string(a.type) or pa.types.is_large_string(a.type) for a in (role, content)):
        return None
    if role.null_count or content.null_count or not pc.all(pc.is_in(role, value_set=pa.array(ROLES))).as_py():
        return None
    contents = content.to_pylist()
    if not all(contents) or any(map(str.isspace, contents)):
        return None
    roles = role.to_pylist()
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    offsets -= offsets[0]
    answers = np.concatenate(([0], np.cumsum(np.asarray(pc.equal(role, "assistant")), dtype=np.int64)))
    if (answers[offsets[1:]] == answers[offsets[:-1]]).any():  # a conversation with no assistant turn
        return None
    msgs = [{"role": r, "content": c} for r, c in zip(roles, contents)]
    bounds = offsets.tolist()
    return [msgs[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


CONVERSATION_FIX = ("correct or remove these examples; data.sft.role_order=any accepts other turn orders and "
                    "tool turns")


def conversations(ds: Any, s: SFTSection, split: str, origins: Origins | None = None,
                  found: Found | None = None) -> list[list[dict[str, str]]]:
    """Every row of ``ds`` as a list of messages. Rows that cannot be trained on (a turn that is
    not text, no assistant turn, turns out of order) raise one DataError naming the first few
    where they were read (``origins``: their files and lines) and how many there are; with
    ``found``, they are added to it instead (the caller raises, for several splits at once)."""

    cols = list(ds.column_names)
    fmt = detect_format(cols, s, split)
    own = own_columns(s)
    if fmt == "alpaca" and s.input_column in cols:
        own["alpaca"] = [*own["alpaca"], s.input_column]
    # A column of another shape is a mixed file, unless this shape reads it too (Alpaca's input).
    others = [(f, c) for f, cs in own.items() if f != fmt for c in cs if c in cols and c not in own[fmt]]
    own_found = found is None
    found = Found(origins, split) if found is None else found.at(origins, split)
    out: list[list[dict[str, str]]] = []
    if fmt == "messages" and not others and (fast := _valid_messages(ds.with_format("arrow")[s.messages_column])):
        out = fast
    else:
        out = _slow_conversations(ds, s, fmt, own, others, found)
    if s.role_order == "alternate" and fmt not in ("prompt_completion", "alpaca"):
        for i, conv in enumerate(out):
            if conv and (problem := order_problem(conv)):
                found.add(i, problem)
    if own_found and (text := found.error_text(len(ds), "cannot be trained on", CONVERSATION_FIX)):
        raise DataError(text)
    return out


def _slow_conversations(ds: Any, s: SFTSection, fmt: str, own: dict[str, list[str]],
                        others: list[tuple[str, str]], found: Found) -> list[list[dict[str, str]]]:
    """The rows one at a time, each problem added to ``found`` (its row then holds no turns)."""
    roles = ANY_ORDER_ROLES if s.role_order == "any" else ROLES
    data = {c: column(ds, c) for c in own[fmt] + [c for _, c in others]}
    out: list[list[dict[str, str]]] = []
    for i in range(len(ds)):
        try:
            out.append(_row(data, i, s, fmt, own, others, roles))
        except DataError as exc:
            found.add(i, str(exc).removeprefix("-: "))
            out.append([])
    return out


def _row(data: dict[str, list[Any]], i: int, s: SFTSection, fmt: str, own: dict[str, list[str]],
         others: list[tuple[str, str]], roles: tuple[str, ...]) -> list[dict[str, str]]:
    where = "-"  # the caller names the row where it was read
    for f, c in others:  # a file mixing shapes has some rows in another shape
        if _present(data[c][i]) and not all(_present(data[k][i]) for k in own_columns(s)[fmt]):
            raise DataError(f"{where}: uses the {f} shape ({c!r}) while other examples use {fmt}; one "
                            "dataset must use one shape (split the file, or convert the examples)")
    if fmt == "prompt_completion":
        # CSV readers turn numeric answers into numbers: they are text here
        p, c = (str(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
                for v in (data[s.prompt_column][i], data[s.completion_column][i]))
        for name, v in ((s.prompt_column, p), (s.completion_column, c)):
            if not isinstance(v, str) or not v.strip():
                raise DataError(f"{where}: column {name!r} is empty or not text; every example needs both "
                                "a prompt and a completion")
        return [{"role": "user", "content": p}, {"role": "assistant", "content": c}]
    if fmt == "alpaca":
        inst, out = (_as_text(data[k][i]) for k in (s.instruction_column, s.output_column))
        extra = _as_text(data[s.input_column][i]) if s.input_column in data else None
        for name, v in ((s.instruction_column, inst), (s.output_column, out)):
            if not isinstance(v, str) or not v.strip():
                raise DataError(f"{where}: column {name!r} is empty or not text; every Alpaca example needs an "
                                "instruction and an output")
        if extra is not None and not isinstance(extra, str):
            raise DataError(f"{where}: column {s.input_column!r} is {type(extra).__name__}, not text")
        prompt = f"{inst}\n\n{extra}" if extra and extra.strip() else inst
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": out}]
    return _turns(data[own[fmt][0]][i], fmt, where, roles)


def _as_text(v: Any) -> Any:
    """A cell as text where a reader made a number of it (CSV); None stays None."""
    return str(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v


@dataclass
class Tokenized:
    """Examples as ragged ids and loss masks, with what was dropped and why."""

    ids: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    truncated: int = 0
    dropped_too_long: int = 0
    dropped_no_loss: int = 0
    through_offsets: int = 0  # examples tokenized with character offsets, not as segments
    trained_tokens: int = 0  # before any example was cut
    trained_tokens_cut: int = 0  # of those, in the part cut off (or in a dropped example)
    longest: int = 0  # tokens of the longest example, before any cut
    no_loss: Found | None = None  # examples with no trained token even before any cut


def sft_encoder(tokenizer: Any, texts: list[str], workers: int = 1) -> Any:
    """The encoder for the segments of :mod:`clustertune.data.sft_tokens`, chosen and checked on
    ``texts`` (gigatoken where it reproduces the tokenizer, else the tokenizer's own), or None
    for a slow tokenizer (which has no offsets either: the offsets path names the fix)."""
    if not getattr(tokenizer, "is_fast", False):
        return None
    return text_encoder(tokenizer, probe_sample(texts), workers, add_special_tokens=False)


def _choose_meanwhile(convs: list[list[dict[str, str]]], renderer: ChatRenderer, tokenizer: Any, loss_on: str,
                      workers: int) -> Any:
    """:func:`sft_encoder` on a sample of the conversations, on a thread of its own (the check
    against the tokenizer runs in Rust without the GIL while the rest are rendered): its future,
    or None when a sampled conversation does not render (the caller then names the first bad one)."""
    try:
        sample = [renderer.with_spans(c, loss_on, "").text for c in spread(convs)]
    except DataError:
        return None
    pool = ThreadPoolExecutor(1, thread_name_prefix="clustertune-sft-check")
    try:
        return pool.submit(sft_encoder, tokenizer, sample, workers)
    finally:
        pool.shutdown(wait=False)


def tokenize_conversations(convs: list[list[dict[str, str]]], renderer: ChatRenderer, tokenizer: Any,
                           s: SFTSection, max_length: int, split: str, workers: int = 1,
                           chosen: list[Any] | None = None, origins: Origins | None = None) -> Tokenized:
    """Render, tokenize and mask every conversation; truncate or drop the long ones, counting the
    trained tokens cut. ``chosen``: the encoder of an earlier split (one list shared by the
    splits), chosen here when empty. Examples with no trained token at all are gathered in
    ``no_loss`` (named where ``origins`` says they were read)."""
    chosen = [] if chosen is None else chosen
    found = Found(origins, split)
    choosing = None if chosen else _choose_meanwhile(convs, renderer, tokenizer, s.loss_on, workers)
    rendered = [renderer.with_spans(c, s.loss_on, f"data: {found.where(i)}") for i, c in enumerate(convs)]
    if not chosen:
        chosen.append(choosing.result() if choosing else sft_encoder(tokenizer, [r.text for r in rendered], workers))
    all_ids, all_masks, out_offsets = ids_and_masks(rendered, tokenizer, chosen[0], workers)
    out = Tokenized(through_offsets=out_offsets, no_loss=found)
    for i, (ids_arr, mask) in enumerate(zip(all_ids, all_masks)):
        if len(mask):
            mask[0] = 0  # nothing before an example's first token predicts it
        trained = int(np.count_nonzero(mask))
        out.trained_tokens += trained
        out.longest = max(out.longest, len(ids_arr))
        if not trained:
            found.add(i, f"no token is trained after the chat template is applied (data.sft.loss_on={s.loss_on}: "
                         "is the answer empty once rendered?)")
            continue
        if len(ids_arr) > max_length:
            if s.too_long == "drop":
                out.dropped_too_long += 1
                out.trained_tokens_cut += trained
                continue
            out.trained_tokens_cut += int(np.count_nonzero(mask[max_length:]))
            ids_arr, mask = ids_arr[:max_length], mask[:max_length]
            out.truncated += 1
        if not mask.any():
            out.dropped_no_loss += 1
            continue
        out.ids.append(ids_arr)
        out.masks.append(mask)
    return out


def generation_prompts(convs: list[list[dict[str, str]]], renderer: ChatRenderer, tokenizer: Any,
                       n: int, max_length: int, max_new_tokens: int) -> list[dict[str, Any]]:
    """Up to ``n`` held-out prompts (the conversation before its last assistant turn, with the
    generation prompt) and their reference answers, for the generation check: those that leave
    room for ``max_new_tokens`` within ``max_length`` (which fits the model's positions)."""
    out: list[dict[str, Any]] = []
    for conv in convs:
        if len(out) >= n:
            break
        last = max(i for i, m in enumerate(conv) if m["role"] == "assistant")
        text = renderer.render(conv[:last], add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        if len(ids) + max_new_tokens <= max_length:
            # The conversation itself too: a served model's own template renders it again (the
            # fidelity check of export and serve, use/fidelity.py).
            out.append({"prompt_ids": list(map(int, ids)), "reference": conv[last]["content"].strip(),
                        "messages": [{"role": m["role"], "content": m["content"]} for m in conv[:last]]})
    return out


def checked_conversations(recipe: Any, splits: dict[str, Any], origins: dict[str, Origins]
                          ) -> dict[str, list[list[dict[str, str]]]]:
    """The conversations of every split (``data.max_*_samples`` applied), the problems of all of
    them raised as one DataError: a file carved into two splits is reported whole."""
    d = recipe.data
    found = Found(None, "train")
    out, total = {}, 0
    for split, ds in splits.items():
        limit = d.max_train_samples if split == "train" else d.max_eval_samples
        if limit is not None:
            ds = ds.select(range(min(limit, len(ds))))
        if len(ds) == 0:
            raise DataError(f"data: the {split} split has no examples")
        out[split] = conversations(ds, d.sft, split, origins.get(split), found)
        total += len(ds)
    if text := found.error_text(total, "cannot be trained on", CONVERSATION_FIX, split=" and ".join(splits)):
        raise DataError(text)
    return out


def sft_split(recipe: Any, ds: Any, tokenizer: Any, split: str, renderer: ChatRenderer,
              workers: int = 1, chosen: list[Any] | None = None,
              origins: Origins | None = None, convs: list[list[dict[str, str]]] | None = None
              ) -> tuple[Any, dict[str, int]]:
    """One split as SFT rows (:class:`~clustertune.data.packing.SFTArrays`) and its counts
    (``chosen``: see :func:`tokenize_conversations`; ``origins``: where each row was read)."""

    d, s = recipe.data, recipe.data.sft
    limit = d.max_train_samples if split == "train" else d.max_eval_samples
    if limit is not None:
        ds = ds.select(range(min(limit, len(ds))))
    if len(ds) == 0:
        raise DataError(f"data: the {split} split has no examples")
    convs = conversations(ds, s, split, origins) if convs is None else convs
    tok = tokenize_conversations(convs, renderer, tokenizer, s, d.max_length, split, workers, chosen, origins)
    if tok.no_loss is not None and (text := tok.no_loss.error_text(
            len(convs), "have nothing to train on",
            "give every example an assistant answer that the template renders, or remove these examples")):
        raise DataError(text)
    counts = {"truncated": tok.truncated, "dropped_too_long": tok.dropped_too_long,
              "dropped_no_loss": tok.dropped_no_loss, "examples_read": len(convs),
              "tokens_before_cut": tok.trained_tokens, "tokens_cut": tok.trained_tokens_cut, "longest": tok.longest}
    if not tok.ids:
        raise DataError(
            f"data.max_length: every one of the {len(convs)} {split} examples was dropped "
            f"({tok.dropped_too_long} longer than {d.max_length} tokens with data.sft.too_long=drop, "
            f"{tok.dropped_no_loss} with no trained token left after truncation); raise data.max_length "
            "or set data.sft.too_long=truncate"
        )
    check_truncation(recipe, split, counts)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    arrays = build_rows(tok.ids, tok.masks, d.max_length, s.packing, pad, id_dtype(len(tokenizer)))
    counts["trained_tokens"] = int(np.count_nonzero(arrays.loss_mask))
    if split == "validation" and s.generation_samples:
        arrays.generation = generation_prompts(convs, renderer, tokenizer, s.generation_samples, d.max_length,
                                               s.max_new_tokens)
        arrays.end_marker = renderer.end_marker()
    counts["examples_kept"] = len(tok.ids)
    log.info("data: %s: %d examples -> %d rows (%d truncated, %d dropped as too long, %d dropped with no trained "
             "token)", split, len(convs), len(arrays), tok.truncated, tok.dropped_too_long, tok.dropped_no_loss)
    if tok.through_offsets and chosen and getattr(chosen[0], "engine", "") == "gigatoken":
        log.info("data: %s: %d of %d examples tokenized through character offsets (a span edge inside a token)",
                 split, tok.through_offsets, len(convs))
    return arrays, counts
