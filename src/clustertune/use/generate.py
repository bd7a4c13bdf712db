"""Text from a trained causal LM: prompts written the way the model was tuned, sampled, streamed.

A prompt becomes one user turn, rendered with the model's chat template and the generation
prompt, when the tokenizer has a template (SFT runs save theirs) or one is named (``chatml``,
``llama3`` or a Jinja file); ``raw`` sends the text as it is. Rendering is the one SFT training
used (:class:`~clustertune.data.templates.ChatRenderer`, no special tokens added on encoding),
so the model sees prompts shaped as in training. An answer ends at the end-of-text token or
the template's end-of-turn marker: as a token id where the marker is one token, as a stop string
where it is spelled in several. Prompt and answer together never exceed the model's context:
``max_new_tokens`` shrinks to what is left. Batches are padded on the left.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from clustertune.errors import GenerationError, ModelError
from clustertune.use.load import Loaded, Target
from clustertune.data.templates import ChatRenderer
from clustertune.data.templates import BUILTIN_TEMPLATES

Messages = list[dict[str, str]]
Prompt = Union[str, Messages]
ROLES = ("system", "user", "assistant")
_NO_LIMIT = 1_000_000  # tokenizers without a limit report model_max_length as ~1e30


@dataclass(frozen=True)
class Sampling:
    """How answers are drawn. ``temperature`` 0 is greedy (top-p and top-k then play no part);
    ``top_k`` 0 means no top-k cut. The same ``seed`` gives the same text on the same machine."""

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 50
    max_new_tokens: int = 256
    seed: int | None = None

    def check(self) -> Sampling:
        bad = []
        if not self.temperature >= 0 or self.temperature == float("inf"):
            bad.append(f"--temperature {self.temperature}: use 0 (greedy) or a positive number such as 0.7")
        if not 0 < self.top_p <= 1:
            bad.append(f"--top-p {self.top_p}: use a number in (0, 1], 1 keeps every token")
        if self.top_k < 0:
            bad.append(f"--top-k {self.top_k}: use 0 (no cut) or a positive count")
        if self.max_new_tokens < 1:
            bad.append(f"--max-new-tokens {self.max_new_tokens}: use a positive count")
        if self.seed is not None and not 0 <= self.seed < 2**32:
            bad.append(f"--seed {self.seed}: use a whole number from 0 to {2**32 - 1}")
        if bad:
            raise GenerationError("; ".join(bad))
        return self

    def generate_kwargs(self) -> dict[str, Any]:
        if self.temperature == 0:
            return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}


def resolve_chat_template(name: str | None, tokenizer: Any) -> str | None:
    """The template prompts are rendered with: ``name`` (a built-in or a Jinja file) where given,
    else the tokenizer's own, else None (the model continues plain text)."""

    if name:
        if name in BUILTIN_TEMPLATES:
            return BUILTIN_TEMPLATES[name]
        path = Path(name).expanduser()
        if not path.is_file():
            raise GenerationError(f"--template {name!r}: neither a built-in template "
                                  f"({', '.join(BUILTIN_TEMPLATES)}) nor an existing Jinja file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise GenerationError(f"--template {name!r}: unreadable ({exc})") from None
        _check_jinja(name, text)
        return text
    own = getattr(tokenizer, "chat_template", None)
    if isinstance(own, dict):  # several named templates: the default one
        own = own.get("default")
    return str(own) if own else None


def _check_jinja(name: str, text: str) -> None:
    """A template file that is not Jinja is refused when named, not when the first prompt comes."""
    import jinja2

    try:
        jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise GenerationError(f"--template {name!r}: not a Jinja template (line {exc.lineno}: {exc.message})") from None


class PromptTooLong(GenerationError):
    """A prompt of more tokens than the model reads."""

    def __init__(self, tokens: int, most: int, label: str = "the model"):
        super().__init__(f"the prompt is {tokens} tokens and {label} reads at most {most}: shorten it")
        self.tokens, self.most = tokens, most


def text_ids(tokenizer: Any, text: str, *, add_special_tokens: bool, most: int | None = None) -> list[int]:
    """``text``'s token ids; :class:`PromptTooLong` when there are more than ``most``.

    Written for a server's thread pool: a fast tokenizer's Rust side encodes a batch with
    Python's lock released, and a prompt too long to answer is counted there without a Python
    list of its ids. transformers' own call holds the lock while it builds its Python objects
    (about 0.15 s per million tokens), which stalled the event loop under one large prompt."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    # A tokenizer file may carry its own truncation or padding, which transformers' call turns
    # off and a plain encode would apply: such a tokenizer takes the slow road.
    if backend is not None and backend.truncation is None and backend.padding is None:
        encoding = backend.encode_batch([text], add_special_tokens=add_special_tokens)[0]
        if most is not None and len(encoding) > most:
            raise PromptTooLong(len(encoding), most)
        return encoding.ids
    ids = [int(i) for i in tokenizer(text, add_special_tokens=add_special_tokens, verbose=False)["input_ids"]]
    if most is not None and len(ids) > most:
        raise PromptTooLong(len(ids), most)
    return ids


def context_length(model: Any, tokenizer: Any) -> int | None:
    """How many tokens the model reads at most (its position table), else the tokenizer's limit."""
    n = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    if isinstance(n, int) and n > 0:
        return n
    n = getattr(tokenizer, "model_max_length", None)
    return int(n) if isinstance(n, int) and 0 < n < _NO_LIMIT else None


class _InterruptFlag:
    """A stopping criterion that ends generation at the next token once ``event`` is set."""

    def __init__(self, event: threading.Event):
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)


def _make_streamer(tokenizer: Any, write: Callable[[str], Any], stops: list[str], strip: bool) -> Any:
    """A ``TextStreamer`` that writes through ``write`` and shows exactly the answer: nothing from
    a stop string on, nothing that may be the start of one until it is known not to be, and (for
    chat answers) no leading whitespace."""
    from transformers import TextStreamer

    class _Streamer(TextStreamer):
        def __init__(self) -> None:
            super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
            self.text, self.shown, self.stopped, self.written = "", 0, False, False

        def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
            if self.stopped:
                return
            self.text += text
            if strip and not self.written:  # no leading whitespace, however many chunks carry it
                self.shown = len(self.text) - len(self.text.lstrip())
            end = len(self.text)
            for s in stops:
                if (k := self.text.find(s)) >= 0:
                    end, self.stopped = min(end, k), True
            if not self.stopped:
                for s in stops:
                    partial = next((n for n in range(len(s) - 1, 0, -1) if self.text.endswith(s[:n])), 0)
                    end = min(end, len(self.text) - partial)
            if strip:  # whitespace waits for the text after it: an answer's last word ends it
                end = len(self.text[:end].rstrip())
            if end > self.shown:
                write(self.text[self.shown:end])
                self.shown, self.written = end, True

    return _Streamer()


def _cut(text: str, stops: list[str], strip: bool) -> str:
    # Deferred: importing it pulls in numpy, torch, which this module's importers do not need.
    from clustertune.train.sft_eval import cut_answer

    return cut_answer(text, stops) if strip else text


class Generator:
    """A loaded causal LM and how prompts are written for it (see the module doc)."""

    def __init__(self, loaded: Loaded, template: str | None = None, raw: bool = False):
        refuse_classifier(loaded.target)

        self.loaded = loaded
        self.model, self.tokenizer, self.device = loaded.model, loaded.tokenizer, loaded.device
        self.raw = raw
        self.template = None if raw else resolve_chat_template(template, self.tokenizer)
        self.renderer = ChatRenderer(self.template, self.tokenizer) if self.template else None
        marker = self.renderer.end_marker() if self.renderer else ""
        self.stops = [marker] if marker else []
        self.eos_ids = self._eos_ids(marker)
        self.context = context_length(self.model, self.tokenizer)

    @property
    def chat(self) -> bool:
        """Whether prompts are rendered as conversations."""
        return self.renderer is not None

    def _eos_ids(self, marker: str) -> list[int]:
        ids: list[int] = []
        if marker:
            enc = self.tokenizer(marker, add_special_tokens=False)["input_ids"]
            if len(enc) == 1:
                ids.append(int(enc[0]))
        for e in (self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            for i in (e if isinstance(e, list) else [e]):
                if i is not None and int(i) not in ids:
                    ids.append(int(i))
        return ids

    def marker_is_token(self) -> bool:
        """Whether the end-of-turn marker is one token (then it ends answers as an end-of-text id)."""
        return bool(self.stops) and len(self.tokenizer(self.stops[0], add_special_tokens=False)["input_ids"]) == 1

    def prompt_text(self, prompt: Prompt) -> str:
        """What the model reads for ``prompt`` (a text, or a conversation of role/content turns)."""
        if self.renderer is None:
            if isinstance(prompt, list):
                raise GenerationError("a conversation ({\"messages\": [...]}) needs a chat template: "
                                      + ("drop --raw" if self.raw else "this model has none; name one with "
                                         "--template chatml|llama3|FILE.jinja, or give {\"prompt\": TEXT}"))
            return prompt
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return self.renderer.render(messages, add_generation_prompt=True)

    def encode(self, prompt: Prompt, most: int | None = None) -> list[int]:
        """``prompt``'s token ids; :class:`PromptTooLong` past ``most`` tokens (None: any length)."""
        text = self.prompt_text(prompt)
        # A rendered template carries its own special tokens (a BOS where it writes one).
        try:
            return text_ids(self.tokenizer, text, add_special_tokens=not self.chat, most=most)
        except PromptTooLong as exc:
            raise PromptTooLong(exc.tokens, exc.most, self.loaded.target.label) from None

    def room(self, prompt_len: int, max_new_tokens: int) -> int:
        """New tokens that fit after a prompt of ``prompt_len`` tokens (an error if none do)."""
        if self.context is None:
            return max_new_tokens
        if prompt_len >= self.context:
            raise GenerationError(f"the prompt is {prompt_len} tokens and {self.loaded.target.label} reads at most "
                                  f"{self.context}: shorten it")
        return min(max_new_tokens, self.context - prompt_len)

    def generate_ids(self, batch: list[list[int]], sampling: Sampling, *, write: Callable[[str], Any] | None = None,
                     interrupt: threading.Event | None = None) -> list[str]:
        """Answers to already encoded prompts, in one ``generate`` call (left-padded); ``write``
        streams the answer of a single prompt as it comes; ``interrupt`` stops at the next token."""
        import torch
        from transformers import StoppingCriteriaList

        longest = max(len(ids) for ids in batch)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (self.eos_ids or [0])[0]
        input_ids = torch.tensor([[pad] * (longest - len(ids)) + ids for ids in batch], device=self.device)
        mask = torch.tensor([[0] * (longest - len(ids)) + [1] * len(ids) for ids in batch], device=self.device)
        kwargs: dict[str, Any] = dict(sampling.generate_kwargs(), max_new_tokens=self.room(longest, sampling.max_new_tokens),
                                      pad_token_id=pad, eos_token_id=self.eos_ids or None)
        if self.stops and not self.marker_is_token():  # a marker spelled in plain-text tokens
            kwargs.update(stop_strings=self.stops, tokenizer=self.tokenizer)
        if write is not None:
            assert len(batch) == 1, "streaming is for one prompt at a time"
            kwargs["streamer"] = _make_streamer(self.tokenizer, write, self.stops, strip=self.chat)
        if interrupt is not None:
            kwargs["stopping_criteria"] = StoppingCriteriaList([_InterruptFlag(interrupt)])
        with torch.inference_mode():
            out = self.model.generate(input_ids=input_ids, attention_mask=mask, **kwargs)
        answers = []
        for row in out[:, longest:].tolist():
            end = next((k for k, t in enumerate(row) if t in self.eos_ids), len(row))
            text = self.tokenizer.decode(row[:end], skip_special_tokens=True)
            answers.append(_cut(text, self.stops, strip=self.chat))
        return answers

    def complete(self, prompts: list[Prompt], sampling: Sampling, *, batch_size: int = 8,
                 write: Callable[[str], Any] | None = None) -> list[str]:
        """Answers to ``prompts`` in order. Sampling is seeded once, before the first prompt."""
        sampling.check()
        if batch_size < 1:
            raise GenerationError(f"--batch-size {batch_size}: use a positive count")
        encoded = []
        for n, p in enumerate(prompts, 1):  # every prompt checked before any is answered
            try:
                encoded.append(self.encode(p))
                self.room(len(encoded[-1]), sampling.max_new_tokens)
            except GenerationError as exc:
                raise GenerationError(f"prompt {n} of {len(prompts)}: {exc}" if len(prompts) > 1 else str(exc)) from None
        seed(sampling.seed)
        step = 1 if write is not None else batch_size
        out: list[str] = []
        for i in range(0, len(encoded), step):
            out += self.generate_ids(encoded[i:i + step], sampling, write=write)
        return out


def seed(value: int | None) -> None:
    """Seed every generator sampling draws from (Python, NumPy, torch, CUDA)."""
    if value is not None:
        from transformers import set_seed

        set_seed(value)


def refuse_classifier(target: Target) -> None:
    """Sequence classifiers label text; writing it is for causal LMs."""
    if target.classifier:
        ref = target.run.id if target.run is not None else str(target.path)
        raise ModelError(f"{target.label} is a sequence classifier: it labels text, it does not write it; "
                         f"score it with `clustertune eval {ref}`")


def read_prompts_file(path: Path) -> list[dict[str, Any]]:
    """The rows of a prompts file: JSON objects with ``prompt`` (text) or ``messages`` (turns)."""
    import json

    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GenerationError(f"--input {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        line = Path(path).read_bytes()[:exc.start].count(b"\n") + 1
        raise GenerationError(f"--input {path}: not UTF-8 text (line {line}); give a JSONL file of "
                              "{\"prompt\": ...} or {\"messages\": [...]} rows, saved as UTF-8") from None
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise GenerationError(f"{where}: not a JSON line ({exc})") from None
        if not isinstance(row, dict) or ("prompt" in row) == ("messages" in row):
            raise GenerationError(f"{where}: each line needs exactly one of \"prompt\" (text) or \"messages\" "
                                  "(a list of {\"role\", \"content\"} turns)")
        if "prompt" in row and not isinstance(row["prompt"], str):
            raise GenerationError(f"{where}: \"prompt\" must be text")
        if "messages" in row:
            _check_messages(row["messages"], where)
        rows.append(row)
    if not rows:
        raise GenerationError(f"--input {path}: no prompts in it (one JSON object per line)")
    return rows


def _check_messages(messages: Any, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise GenerationError(f"{where}: \"messages\" must be a non-empty list of {{\"role\", \"content\"}} turns")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise GenerationError(f"{where}: messages[{i}] must be {{\"role\": {'|'.join(ROLES)}, "
                                  f"\"content\": TEXT}}, not {m!r}")


def row_prompt(row: dict[str, Any]) -> Prompt:
    return row["messages"] if "messages" in row else row["prompt"]
