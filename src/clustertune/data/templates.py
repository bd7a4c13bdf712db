"""Chat templates: which one a recipe uses, rendering, and where the assistant's tokens are.

The assistant's part of a conversation is found without ``{% generation %}`` markers: for each
assistant turn, the conversation up to it is rendered with the generation prompt, and up to and
including it without; the turn's text is what the second adds to the first, from its content to
its end-of-turn marker (trailing whitespace left out). Both renders must be prefixes of the whole
conversation's render and the content must appear where expected, else the template is one
under which the assistant's tokens cannot be found, and that is an error naming the example.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustertune.errors import DataError

# ChatML: the markers are plain text unless the tokenizer has them as tokens, so a base model
# whose vocabulary lacks them can still learn them (they are made of tokens it already has).
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Llama-3 style: role headers, a blank line, the content, an end-of-turn marker.
LLAMA3 = (
    "{% if bos_token %}{{ bos_token }}{% endif %}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

BUILTIN_TEMPLATES: dict[str, str] = {"chatml": CHATML, "llama3": LLAMA3}
KEY = "data.sft.chat_template"


def resolve_template(spec: str | None, tokenizer: Any) -> str:
    """The template text: a built-in name, a Jinja file, or the tokenizer's own."""
    if spec is None:
        own = getattr(tokenizer, "chat_template", None)
        if isinstance(own, dict):  # several named templates: the default one
            own = own.get("default")
        if not own:
            raise DataError(
                f"{KEY}: the tokenizer has no chat template and none is named; set {KEY} to a built-in "
                f"one ({', '.join(BUILTIN_TEMPLATES)}) or to a Jinja file"
            )
        return str(own)
    if spec in BUILTIN_TEMPLATES:
        return BUILTIN_TEMPLATES[spec]
    path = Path(spec).expanduser()
    if not path.is_file():
        raise DataError(
            f"{KEY}: {spec!r} is neither a built-in template ({', '.join(BUILTIN_TEMPLATES)}) "
            "nor an existing Jinja file"
        )
    return path.read_text(encoding="utf-8")


def compile_problem(spec: str | None) -> str | None:
    """What is wrong with the chat template ``spec`` names (a built-in or a Jinja file), found by
    compiling it as rendering will; None when it compiles or is the tokenizer's own (``spec``
    None: read with the tokenizer) or a file that is not there (the recipe's path check says so)."""
    if spec is None or spec in BUILTIN_TEMPLATES or not Path(spec).expanduser().is_file():
        return None
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        text = Path(spec).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"{spec!r} cannot be read as a UTF-8 Jinja file ({exc})"
    try:
        _compile_jinja_template(text)
    except Exception as exc:  # jinja2's TemplateSyntaxError and friends
        line = getattr(exc, "lineno", None)
        return f"{spec!r}{f' line {line}' if line else ''} does not compile: {exc}; fix the Jinja syntax"
    return None


def template_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Rendered:
    """A conversation rendered, with the character spans that carry the loss."""

    text: str
    spans: list[tuple[int, int]]


class ChatRenderer:
    """Renders conversations with one template, the way ``apply_chat_template`` does."""

    def __init__(self, template: str, tokenizer: Any):
        from transformers.utils.chat_template_utils import _compile_jinja_template

        try:
            self.compiled = _compile_jinja_template(template)
        except Exception as exc:  # jinja2's TemplateSyntaxError and friends
            raise DataError(f"{KEY}: the chat template does not compile: {exc}") from exc
        self.template = template
        self.kwargs = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
        # The built-in templates are also written out in Python (the same text, a test checks):
        # rendering each turn's prefixes through Jinja is most of the time prepare spends.
        self.direct = _DIRECT.get(template)

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool = False) -> str:
        return str(self.compiled.render(messages=messages, tools=None, documents=None,
                                        add_generation_prompt=add_generation_prompt, **self.kwargs))

    def end_marker(self) -> str:
        """What the template writes after an assistant's content (its end-of-turn marker)."""
        probe = "Zq7Xw"
        text = self.render([{"role": "user", "content": "hi"}, {"role": "assistant", "content": probe}])
        at = text.rfind(probe)
        return text[at + len(probe):].strip() if at >= 0 else ""

    def with_spans(self, messages: list[dict[str, str]], loss_on: str, where: str) -> Rendered:
        """The whole conversation and the spans of its trained text (see the module doc)."""
        if self.direct is not None:
            return self.direct(messages, loss_on, self.kwargs.get("bos_token", ""))
        full = self.render(messages)
        if loss_on == "all":
            return Rendered(full, [(0, len(full))])
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        if loss_on == "completion":
            turns = turns[-1:]
        spans = []
        for i in turns:
            before = self.render(messages[:i], add_generation_prompt=True)
            through = full if i == len(messages) - 1 else self.render(messages[: i + 1])
            if not full.startswith(before) or not full.startswith(through) or not through.startswith(before):
                raise DataError(
                    f"{where}: under this chat template the conversation up to assistant turn {i} does not "
                    f"render as a prefix of the whole conversation, so its tokens cannot be found; use a "
                    f"template that renders turns in order ({KEY}: {', '.join(BUILTIN_TEMPLATES)})"
                )
            content = messages[i]["content"].strip()
            at = through.find(content, len(before))
            if at < 0:
                raise DataError(
                    f"{where}: the content of assistant turn {i} does not appear in the rendered text after "
                    f"the generation prompt; the chat template changes or drops it, so the assistant's tokens "
                    f"cannot be found ({KEY}: use {', '.join(BUILTIN_TEMPLATES)} or a template that writes it)"
                )
            spans.append((at, len(through.rstrip())))
        return Rendered(full, spans)


def _direct(head: str, open_turn: str, close_turn: str, after_turn: str) -> Any:
    """A renderer for templates of the shape ``head + (open(role) + content + close + after)*``,
    giving the same text and spans as :meth:`ChatRenderer.with_spans` does through Jinja."""

    openers = {role: open_turn.format(role=role) for role in ("system", "user", "assistant")}
    tail = len(close_turn) + len(after_turn)

    def render(messages: list[dict[str, str]], loss_on: str, bos: str) -> Rendered:
        parts = [bos] if head and bos else []
        at = len(parts[0]) if parts else 0
        spans = []
        for m in messages:
            role, content = m["role"], m["content"]
            opener = openers.get(role) or open_turn.format(role=role)
            parts += (opener, content, close_turn, after_turn)
            if role == "assistant":
                start = at + len(opener) + len(content) - len(content.lstrip())
                spans.append((start, at + len(opener) + len(content) + len(close_turn)))
            at += len(opener) + len(content) + tail
        text = "".join(parts)
        if loss_on == "all":
            return Rendered(text, [(0, len(text))])
        return Rendered(text, spans[-1:] if loss_on == "completion" else spans)

    return render


_DIRECT = {
    CHATML: _direct("", "<|im_start|>{role}\n", "<|im_end|>", "\n"),
    LLAMA3: _direct("bos", "<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>", ""),
}


def end_of_turn_id(tokenizer: Any) -> int | None:
    """The token the chat template closes an assistant turn with (``<|im_end|>``), when it is
    one token of the vocabulary: generation must stop there, not only at end-of-text."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default")
    if not template:
        return None

    try:
        marker = ChatRenderer(str(template), tokenizer).end_marker()
    except Exception:  # noqa: BLE001 - a template that cannot render a probe turn has no marker to add
        return None
    ids = tokenizer(marker, add_special_tokens=False)["input_ids"] if marker else []
    return int(ids[0]) if len(ids) == 1 else None


def set_generation_ids(model: Any, tokenizer: Any) -> None:
    """bos/eos/pad ids in ``generation_config.json`` from the tokenizer the model was trained
    with (a config built from scratch carries GPT-2's 50256, outside a small vocabulary)."""
    gen = model.generation_config
    # Derived from the model's config, transformers may rebuild it from that config at
    # generate time; these ids are the ones to use.
    gen._from_model_config = False
    eos: list[int] = []
    for t in (tokenizer.eos_token_id, end_of_turn_id(tokenizer)):
        if t is not None and t not in eos:
            eos.append(int(t))
    if tokenizer.bos_token_id is not None:
        gen.bos_token_id = int(tokenizer.bos_token_id)
    if eos:
        gen.eos_token_id = eos[0] if len(eos) == 1 else eos
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else None)
    if pad is not None:
        gen.pad_token_id = int(pad)
