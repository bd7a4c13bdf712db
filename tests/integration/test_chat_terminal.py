"""`clustertune chat` in a real terminal (tmux), as a person uses it: the reply appears after the
question, /reset forgets the conversation, Ctrl-C at the prompt does not leave, Ctrl-D leaves
with exit code 0."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from clustertune.use.chat import ChatSession
from clustertune.use.generate import Generator, Sampling
from clustertune.use.load import load_for_use
from tests.services.terminal import Terminal

QUESTION = "Which keyword starts a loop?"


def test_chat_in_a_real_terminal(chat_base: Path, terminal: Terminal) -> None:
    greedy = Sampling(temperature=0, max_new_tokens=8)
    session = ChatSession(Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32")), greedy)
    first = session.say(QUESTION).text
    second = session.say(QUESTION).text  # the same question again, with the first exchange before it

    env = {k: os.environ[k] for k in ("PATH", "HOME", "CLUSTERTUNE_CACHE") if k in os.environ}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", TERM="xterm-256color")
    exe = str(Path(sys.executable).with_name("clustertune"))
    terminal.start([exe, "chat", str(chat_base), "--temperature", "0", "--max-new-tokens", "8", "--device", "cpu",
                    "--dtype", "fp32"], env)
    terminal.wait_for(lambda s: s.endswith("\n>"), "the banner and the prompt")
    assert "/reset clears the conversation, /exit or Ctrl-D leaves" in terminal.screen()

    def ask_and_expect(reply: str) -> None:
        seen = terminal.screen().count(f"> {QUESTION}")
        terminal.type_line(QUESTION)
        terminal.wait_for(lambda s: s.count(f"> {QUESTION}") > seen and s.endswith("\n>"), "the reply and a new prompt")
        last = terminal.screen().rsplit(f"> {QUESTION}\n", 1)[1]
        assert last == f"{reply}\n>", last

    ask_and_expect(first)
    ask_and_expect(second)  # the history is kept: as in the in-process conversation
    terminal.type_line("/reset")
    terminal.wait_for(lambda s: s.endswith("(conversation cleared)\n>"), "the reset confirmation")
    ask_and_expect(first)  # nothing of before remains
    terminal.send("C-c")
    terminal.wait_for(lambda s: s.endswith("(Ctrl-D or /exit leaves)\n>"), "the hint after Ctrl-C")
    assert terminal.exit_code is None  # Ctrl-C at the prompt did not end it
    terminal.send("C-d")
    assert terminal.wait_exit() == 0
