"""A conversation: history rendered whole each turn, trimmed from the oldest exchanges to fit the
context, /reset, /exit and end of input, Ctrl-C stopping a reply (a real SIGINT) but not the
program, and the typed error for a model without a chat template."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from clustertune.cli.main import main
from clustertune.errors import GenerationError, ModelError
from clustertune.use.chat import ChatSession, chat_loop
from clustertune.use.generate import Generator, Sampling
from clustertune.use.load import load_for_use

GREEDY = Sampling(temperature=0, max_new_tokens=6)


@pytest.fixture(scope="module")
def gen(chat_base: Path) -> Generator:
    return Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32"))


def _script(lines: list[str | BaseException]):  # type: ignore[no-untyped-def]
    """A stand-in for input(): the lines in order, then end of input."""
    it = iter(lines)

    def read(prompt: str) -> str:
        item = next(it, EOFError())
        if isinstance(item, BaseException):
            raise item
        return item

    return read


def test_the_whole_conversation_is_rendered_each_turn_and_reset_clears_it(gen: Generator) -> None:
    session = ChatSession(gen, GREEDY, system="Answer in one word.")
    first = session.say("Which keyword starts a loop?")
    session.say("And a function?")
    assert [m["role"] for m in session.messages()] == ["system", "user", "assistant", "user", "assistant"]
    assert session.history[1]["content"] == first.text
    rendered = gen.prompt_text(session.messages()[:-1])
    assert rendered.startswith("<|im_start|>system\nAnswer in one word.<|im_end|>\n<|im_start|>user\nWhich keyword")
    assert f"<|im_start|>assistant\n{first.text}<|im_end|>\n<|im_start|>user\nAnd a function?" in rendered
    session.reset()
    assert session.history == [] and session.messages() == [{"role": "system", "content": "Answer in one word."}]
    # after /reset the same question gets the same first answer (greedy): nothing of before remains
    assert session.say("Which keyword starts a loop?").text == first.text


def test_the_oldest_exchanges_are_dropped_to_fit_the_context_and_the_system_prompt_stays(gen: Generator) -> None:
    session = ChatSession(gen, Sampling(temperature=0, max_new_tokens=16), system="Be brief.")
    dropped = 0
    for i in range(5):
        reply = session.say(f"Question number {i}: what do the for and while statements of Python do?")
        dropped += reply.dropped
        assert len(gen.encode(session.messages()[:-1])) + 16 <= gen.context
    assert dropped > 0 and dropped % 2 == 0
    assert session.messages()[0] == {"role": "system", "content": "Be brief."}
    assert session.history[0]["role"] == "user" and "Question number 0" not in session.history[0]["content"]
    assert "Question number 4" in session.history[-2]["content"]
    before = list(session.history)
    with pytest.raises(GenerationError, match="that message is .* tokens .* send a shorter one"):
        session.say("word " * 200)
    assert session.history == before


def test_ctrl_c_stops_the_reply_not_the_program(gen: Generator) -> None:
    session = ChatSession(gen, Sampling(temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=100, seed=1))
    written: list[str] = []

    def write(text: str) -> None:
        written.append(text)
        if len(written) == 2:  # the reply has begun: the user presses Ctrl-C
            os.kill(os.getpid(), signal.SIGINT)

    rc = chat_loop(session, read=_script(["Tell me about loops.", KeyboardInterrupt(), "/reset", "/nope", "/exit",
                                          "never read"]), write=write)
    out = "".join(written)
    assert rc == 0
    assert "(reply stopped)" in out and "(Ctrl-D or /exit leaves)" in out and "(conversation cleared)" in out
    assert "unknown command /nope" in out
    assert session.history == []  # /reset after the stopped reply
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C is the program's again


def test_a_stopped_reply_keeps_what_was_written(gen: Generator) -> None:
    import threading

    session = ChatSession(gen, Sampling(temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=100, seed=1))
    stop = threading.Event()
    shown: list[str] = []

    def write(text: str) -> None:
        shown.append(text)
        stop.set()

    reply = session.say("Tell me about loops.", write=write, interrupt=stop)
    assert reply.interrupted and reply.text == "".join(shown).strip()
    assert len(gen.tokenizer(reply.text)["input_ids"]) < 100
    assert session.history[-1] == {"role": "assistant", "content": reply.text}


def test_end_of_input_leaves_with_code_0(gen: Generator) -> None:
    out: list[str] = []
    assert chat_loop(ChatSession(gen, GREEDY), read=_script(["hi"]), write=out.append) == 0
    assert "".join(out).startswith(f"chatting with {gen.loaded.target.label} on cpu; /reset clears")


def test_a_model_without_a_chat_template_is_refused_pointing_to_generate_and_template(
        plain_base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", str(plain_base), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "has no chat template" in err and "clustertune generate" in err and "--template chatml" in err
    assert "Traceback" not in err
    with pytest.raises(ModelError, match="has no chat template"):
        ChatSession(Generator(load_for_use(str(plain_base), device="cpu")), GREEDY)
    assert main(["chat", str(plain_base), "--temperature", "-2"]) == 2
    assert "--temperature -2.0" in capsys.readouterr().err
