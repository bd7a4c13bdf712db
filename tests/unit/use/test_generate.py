"""Generating with what a run trained: prompts shaped by the chat template (or not), seeded
sampling, streaming that shows exactly the answer, left-padded batches, prompts files through
the CLI, and typed errors for what cannot be generated from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clustertune.cli.main import main
from clustertune.errors import GenerationError, ModelError
from clustertune.runs.run import Run
from clustertune.use.generate import Generator, Sampling, _make_streamer
from clustertune.use.load import load_for_use
from tests.helpers import read_jsonl

CHATML_HI = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def chat_gen(chat_base: Path) -> Generator:
    return Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32"))


@pytest.fixture(scope="module")
def plain_gen(plain_base: Path) -> Generator:
    return Generator(load_for_use(str(plain_base), device="cpu", dtype="fp32"))


def test_a_prompt_is_one_user_turn_under_the_template_unless_raw(chat_gen: Generator, plain_gen: Generator) -> None:
    assert chat_gen.chat and chat_gen.prompt_text("hi") == CHATML_HI
    assert chat_gen.prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n" + CHATML_HI)
    # the rendered markers are single tokens and no special tokens are added around them
    ids = chat_gen.encode("hi")
    assert chat_gen.tokenizer.decode(ids) == CHATML_HI and len(ids) < len(CHATML_HI) // 2
    raw = Generator(chat_gen.loaded, raw=True)
    assert not raw.chat and raw.prompt_text("hi") == "hi"
    assert not plain_gen.chat and plain_gen.prompt_text("hi") == "hi"
    assert Generator(plain_gen.loaded, template="chatml").prompt_text("hi") == CHATML_HI
    llama = Generator(plain_gen.loaded, template="llama3").prompt_text("hi")
    assert llama.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n") and "hi<|eot_id|>" in llama
    with pytest.raises(GenerationError, match=r"needs a chat template: this model has none.*--template"):
        plain_gen.prompt_text([{"role": "user", "content": "hi"}])
    with pytest.raises(GenerationError, match="drop --raw"):
        raw.prompt_text([{"role": "user", "content": "hi"}])


def test_the_same_seed_gives_the_same_text_and_another_seed_other_text(chat_gen: Generator) -> None:
    def sample(seed: int) -> list[str]:
        return chat_gen.complete(["Which keyword starts a loop?", "hi"],
                                 Sampling(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=16, seed=seed))

    first = sample(7)
    assert first == sample(7)
    assert first != sample(8)
    assert all("<|im_end|>" not in a for a in first)


def test_streamed_text_is_the_returned_answer(plain_gen: Generator) -> None:
    chunks: list[str] = []
    answer = plain_gen.complete(["The for statement"], Sampling(temperature=0, max_new_tokens=24),
                                write=chunks.append)[0]
    assert len(answer) > 0 and "".join(chunks) == answer
    assert len(chunks) > 1  # written as it came, not at the end


def test_the_streamer_shows_nothing_from_a_stop_string_on(plain_gen: Generator) -> None:
    # An end-of-turn marker spelled in plain-text tokens: the stream holds back what may begin it
    # until it knows, stops writing at it, and shows what the returned answer holds.
    import torch

    from clustertune.train.sft_eval import cut_answer

    tok = plain_gen.tokenizer
    for text in ("  Loops repeat.END!\nmore text", " a b EN", " a, b; EXIT"):
        shown: list[str] = []
        streamer = _make_streamer(tok, shown.append, ["END!"], strip=True)
        streamer.put(torch.tensor([[1, 2]]))  # the prompt: skipped
        for t in tok(text, add_special_tokens=False)["input_ids"]:
            streamer.put(torch.tensor([t]))
        streamer.end()
        assert "".join(shown) == cut_answer(text, ["END!"]), text
    assert cut_answer("  Loops repeat.END!\nmore text", ["END!"]) == "Loops repeat."


def test_a_template_file_whose_marker_is_plain_text_stops_on_the_spelled_marker(plain_gen: Generator,
                                                                                 tmp_path: Path) -> None:
    jinja = tmp_path / "turns.jinja"
    jinja.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} END!\n{% endfor %}"
                     "{% if add_generation_prompt %}assistant:{% endif %}")
    gen = Generator(plain_gen.loaded, template=str(jinja))
    assert gen.prompt_text("hi") == "user: hi END!\nassistant:"
    assert gen.stops == ["END!"] and not gen.marker_is_token()  # so generate() gets it as a stop string
    shown: list[str] = []
    answer = gen.complete(["hi"], Sampling(temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=12, seed=2),
                          write=shown.append)[0]
    assert "END!" not in answer and "".join(shown) == answer


def test_batches_are_left_padded_and_answer_as_one_prompt_at_a_time(chat_gen: Generator) -> None:
    prompts = ["hi", "Which keyword starts a loop? Answer in one word, please.", "Count to three."]
    greedy = Sampling(temperature=0, max_new_tokens=10)
    assert chat_gen.complete(prompts, greedy, batch_size=3) == [chat_gen.complete([p], greedy)[0] for p in prompts]


def test_prompt_and_answer_stay_within_the_context(chat_gen: Generator) -> None:
    ctx = chat_gen.context
    assert ctx == 128
    assert chat_gen.room(120, 256) == 8
    with pytest.raises(GenerationError, match=rf"the prompt is \d+ tokens and .* reads at most {ctx}: shorten it"):
        chat_gen.complete(["word " * 130], Sampling(temperature=0, max_new_tokens=4))


def test_prompt_ids_are_the_tokenizers_own_and_a_long_prompt_is_counted_whole(chat_gen: Generator,
                                                                              plain_gen: Generator) -> None:
    """The ids a server and generate use come from the Rust side directly (Python's lock
    released); they are exactly transformers' call's, with and without special tokens, and a
    prompt past the context is refused with its full length."""
    from clustertune.use.generate import PromptTooLong, text_ids

    texts = ["hi", "", "  Which keyword starts a loop?\n\tAnswer: for ", "ünïcode — 字 🙂",
             chat_gen.prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])]
    for gen in (chat_gen, plain_gen):
        assert gen.tokenizer.backend_tokenizer.truncation is None  # so the direct road is the one tested
        for text in texts:
            for special in (True, False):
                want = gen.tokenizer(text, add_special_tokens=special)["input_ids"]
                assert text_ids(gen.tokenizer, text, add_special_tokens=special) == want, (text, special)
    long = "word " * 5000
    n = len(chat_gen.tokenizer(long, add_special_tokens=False)["input_ids"])
    with pytest.raises(PromptTooLong, match=f"the prompt is {n} tokens and the model reads at most 128") as caught:
        text_ids(chat_gen.tokenizer, long, add_special_tokens=False, most=128)
    assert (caught.value.tokens, caught.value.most) == (n, 128)
    # A tokenizer file that truncates by itself: transformers' call (which turns that off) counts.
    chat_gen.tokenizer.backend_tokenizer.enable_truncation(16)
    try:
        with pytest.raises(PromptTooLong, match=f"the prompt is {n} tokens"):
            text_ids(chat_gen.tokenizer, long, add_special_tokens=False, most=128)
    finally:
        chat_gen.tokenizer.backend_tokenizer.no_truncation()


def test_an_adapter_run_generates_by_run_id_with_its_bases_template(chat_base: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    run = Run.create(tmp_path, "sft", "sft", None, ["clustertune", "run"])
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(chat_base)),
                           LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True, init_lora_weights=False))
    model.save_pretrained(str(run.paths.model))
    gen = Generator(load_for_use(run.id[:10], runs_root=tmp_path, device="cpu", dtype="fp32"))
    assert gen.loaded.target.adapter and gen.prompt_text("hi") == CHATML_HI
    out = tmp_path / "out.jsonl"
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "hi"}) + "\n")
    assert main(["generate", run.id[:10], "--runs-root", str(tmp_path), "--input", str(prompts), "--output", str(out),
                 "--temperature", "0", "--max-new-tokens", "6", "--device", "cpu"]) == 0
    assert read_jsonl(out)[0]["completion"] == gen.complete(["hi"], Sampling(temperature=0, max_new_tokens=6))[0]


def test_cli_prompts_file_keeps_its_fields_and_adds_the_completion(chat_base: Path, chat_gen: Generator,
                                                                   tmp_path: Path) -> None:
    rows = [{"id": 1, "prompt": "hi"},
            {"id": "b", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]},
            {"prompt": "Count to three.", "meta": {"k": [1, 2]}}]
    src = tmp_path / "prompts.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["generate", str(chat_base), "--input", str(src), "--output", str(out), "--temperature", "0",
                 "--max-new-tokens", "8", "--batch-size", "2", "--device", "cpu", "--dtype", "fp32"]) == 0
    got = read_jsonl(out)
    assert [{k: v for k, v in g.items() if k != "completion"} for g in got] == rows
    greedy = Sampling(temperature=0, max_new_tokens=8)
    assert [g["completion"] for g in got] == chat_gen.complete([rows[0]["prompt"], rows[1]["messages"],
                                                                rows[2]["prompt"]], greedy)


def test_cli_streams_answers_to_prompts_given_as_arguments(chat_base: Path, chat_gen: Generator,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", str(chat_base), "hi", "Count to three.", "--temperature", "0", "--max-new-tokens", "8",
                 "--device", "cpu", "--dtype", "fp32"]) == 0
    out = capsys.readouterr().out
    greedy = Sampling(temperature=0, max_new_tokens=8)
    a, b = (chat_gen.complete([p], greedy)[0] for p in ("hi", "Count to three."))
    assert out == f"== 1: hi\n{a}\n\n== 2: Count to three.\n{b}\n"


def _classifier(d: Path) -> Path:
    (d / "cls").mkdir()
    (d / "cls" / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    return d / "cls"


@pytest.mark.parametrize("args, message", [
    (["--temperature", "-1", "hi"], "--temperature -1.0: use 0"),
    (["--top-p", "0", "--top-k", "-2", "hi"], "--top-p 0.0: .*; --top-k -2"),
    (["--max-new-tokens", "0", "hi"], "--max-new-tokens 0: use a positive count"),
    (["--template", "nosuch", "hi"], "--template 'nosuch': neither a built-in template \\(chatml, llama3\\)"),
    ([], "give prompts as arguments or a prompts file"),
    (["--input", "{tmp}/p.jsonl", "hi"], "one of the two"),
    (["--input", "{tmp}/missing.jsonl"], "--input .*missing.jsonl: cannot read it"),
    (["--input", "{tmp}/bad.jsonl"], "bad.jsonl:2: each line needs exactly one of \"prompt\""),
    (["--input", "{tmp}/badturn.jsonl"], "badturn.jsonl:1: messages\\[0\\] must be"),
    (["--input", "{tmp}/p.jsonl", "--output", "{tmp}/no/dir/out.jsonl"], "its directory .* does not exist"),
    (["--batch-size", "0", "--input", "{tmp}/p.jsonl"], "--batch-size 0"),
])
def test_bad_generate_input_exits_2_naming_the_flag_or_line(plain_base: Path, tmp_path: Path, args: list[str],
                                                            message: str, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n')
    (tmp_path / "bad.jsonl").write_text('{"prompt": "hi"}\n{"text": "hi"}\n')
    (tmp_path / "badturn.jsonl").write_text('{"messages": [{"role": "bot", "content": "x"}]}\n')
    argv = ["generate", str(plain_base), *[a.format(tmp=tmp_path) for a in args], "--device", "cpu"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    import re

    assert re.search(message, err), err


def test_models_that_cannot_write_get_typed_errors(plain_base: Path, chat_base: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cls = _classifier(tmp_path)
    assert main(["generate", str(cls), "hi"]) == 2
    assert "is a sequence classifier" in (err := capsys.readouterr().err) and f"clustertune eval {cls}" in err
    with pytest.raises(ModelError, match="sequence classifier"):
        from clustertune.use.generate import refuse_classifier
        from clustertune.use.load import find_target

        refuse_classifier(find_target(str(cls)))
    msgs = tmp_path / "m.jsonl"
    msgs.write_text(json.dumps({"prompt": "hi"}) + "\n" + json.dumps({"messages": [{"role": "user", "content": "hi"}]})
                    + "\n")
    out = tmp_path / "never.jsonl"
    assert main(["generate", str(plain_base), "--input", str(msgs), "--output", str(out), "--device", "cpu"]) == 2
    assert "error: prompt 2 of 2: a conversation" in (err := capsys.readouterr().err) and "needs a chat template" in err
    assert not out.exists()  # nothing answered before every prompt was checked
    run_dir = tmp_path / "runs"
    Run.create(run_dir, "x", "causal_lm", None, ["clustertune"])
    shutil.rmtree(run_dir / "nosuch", ignore_errors=True)
    assert main(["generate", "nosuch", "hi", "--runs-root", str(run_dir)]) == 2
    assert "no run 'nosuch'" in capsys.readouterr().err
