"""A conversation with a chat model in the terminal.

Every turn renders the whole conversation with the model's chat template. When it would not
leave room for an answer within the model's context (``max_new_tokens``, at most half the
context), the oldest exchanges are dropped, a user turn and the replies after it at a time; a
system prompt is always kept. Ctrl-C while the model writes ends that reply at the next token
(what was written stays in the conversation); at the prompt it only reminds how to leave.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from clustertune.errors import GenerationError, ModelError
from clustertune.use.generate import Generator, Messages, Sampling, seed

HELP = "/reset clears the conversation, /exit or Ctrl-D leaves, Ctrl-C stops a reply"


def require_chat_template(gen: Generator) -> None:
    if not gen.chat:
        raise ModelError(f"{gen.loaded.target.label} has no chat template, so it cannot hold a conversation: "
                         "continue plain text with `clustertune generate MODEL \"text\"`, or name a template "
                         "with --template chatml|llama3|FILE.jinja")


@dataclass
class Reply:
    text: str
    dropped: int  # earlier turns dropped to fit the context
    interrupted: bool


class ChatSession:
    """The conversation so far and how each reply is drawn."""

    def __init__(self, gen: Generator, sampling: Sampling, system: str | None = None):
        require_chat_template(gen)
        self.gen, self.sampling, self.system = gen, sampling.check(), system
        self.history: Messages = []
        seed(sampling.seed)

    def reset(self) -> None:
        self.history = []

    def messages(self) -> Messages:
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + self.history

    def _reserve(self) -> int:
        """Tokens kept free for the answer when older turns are dropped: --max-new-tokens, at most
        an eighth of the context (a longer answer stops where the context ends), so a short
        context keeps several turns of history."""
        ctx = self.gen.context
        return max(1, min(self.sampling.max_new_tokens, ctx // 8)) if ctx else 0

    def _fit(self) -> tuple[list[int], int]:
        """The conversation's tokens, after dropping the oldest exchanges that do not fit."""
        ctx, dropped = self.gen.context, 0
        while True:
            ids = self.gen.encode(self.messages())
            if ctx is None or len(ids) + self._reserve() <= ctx:
                return ids, dropped
            # the newest user turn alone fits (say() checked), so an earlier one exists
            nxt = next(i for i, m in enumerate(self.history) if i > 0 and m["role"] == "user")
            del self.history[:nxt]
            dropped += nxt

    def say(self, text: str, *, write: Callable[[str], Any] | None = None,
            interrupt: threading.Event | None = None) -> Reply:
        """Add the user's turn and answer it (streamed through ``write``)."""
        turn = {"role": "user", "content": text}
        ctx = self.gen.context
        alone = len(self.gen.encode(([{"role": "system", "content": self.system}] if self.system else []) + [turn]))
        if ctx is not None and alone + self._reserve() > ctx:
            raise GenerationError(f"that message is {alone} tokens with the template; {self.gen.loaded.target.label} "
                                  f"reads {ctx} and keeps {self._reserve()} for its answer: send a shorter one")
        self.history.append(turn)
        ids, dropped = self._fit()
        interrupt = interrupt or threading.Event()
        answer = self.gen.generate_ids([ids], self.sampling, write=write, interrupt=interrupt)[0]
        self.history.append({"role": "assistant", "content": answer})
        return Reply(answer, dropped, interrupt.is_set())


@contextmanager
def ctrl_c_sets(event: threading.Event) -> Iterator[None]:
    """While inside, SIGINT sets ``event`` instead of raising KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: event.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def chat_loop(session: ChatSession, *, read: Callable[[str], str] = input,
              write: Callable[[str], Any], prompt: str = "> ") -> int:
    """Read a line, answer it, until /exit or end of input; returns the exit code (0)."""
    write(f"chatting with {session.gen.loaded.target.label} on {session.gen.device}; {HELP}\n")
    while True:
        try:
            line = read(prompt)
        except EOFError:
            write("\n")
            return 0
        except KeyboardInterrupt:
            write("\n(Ctrl-D or /exit leaves)\n")
            continue
        cmd = line.strip()
        if not cmd:
            continue
        if cmd in ("/exit", "/quit"):
            return 0
        if cmd == "/reset":
            session.reset()
            write("(conversation cleared)\n")
            continue
        if cmd.startswith("/") and " " not in cmd:
            write(f"unknown command {cmd}: {HELP}\n")
            continue
        interrupt = threading.Event()
        try:
            with ctrl_c_sets(interrupt):
                reply = session.say(line, write=write, interrupt=interrupt)
        except GenerationError as exc:
            write(f"error: {exc}\n")
            continue
        write("\n")
        if reply.interrupted:
            write("(reply stopped)\n")
        if reply.dropped:
            write(f"(the {reply.dropped} oldest messages were dropped to fit the model's "
                  f"{session.gen.context}-token context)\n")
