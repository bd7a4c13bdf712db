"""SFT data: formats, chat templates and loss masks, packing, the fingerprint, bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import clustertune as ct
from clustertune.data.cache import fingerprint_of, prepare
from clustertune.data.packing import best_fit_decreasing, build_rows
from clustertune.data.sft import tokenize_conversations
from clustertune.data.templates import BUILTIN_TEMPLATES, ChatRenderer
from clustertune.errors import DataError
from clustertune.recipe.sft_schema import SFTSection
from tests.helpers import cli_here
from tests.sft_fixtures import CHATS, arithmetic_rows, sft_recipe, write_jsonl

# A template of a third shape, as a tokenizer's own: role tags on their own line, the
# tokenizer's end-of-text token closing every turn.
TAGGED = (
    "{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] + eos_token + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def _tok(base: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(base))


def _trained_text(tok: Any, template: str, convs: list[list[dict[str, str]]], loss_on: str) -> list[str]:
    out = tokenize_conversations(convs, ChatRenderer(template, tok), tok, SFTSection(loss_on=loss_on), 10_000, "train")
    return [tok.decode(ids[mask.astype(bool)], skip_special_tokens=False) for ids, mask in zip(out.ids, out.masks)]


@pytest.mark.parametrize("name", ["chatml", "llama3", "tagged"])
def test_trained_tokens_decode_to_the_assistant_turns_and_their_end_markers(sft_base: Path, name: str) -> None:
    tok = _tok(sft_base)
    template = TAGGED if name == "tagged" else BUILTIN_TEMPLATES[name]
    end = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>", "tagged": tok.eos_token}[name]
    got = _trained_text(tok, template, CHATS, "assistant")
    want = ["".join(m["content"] + end for m in c if m["role"] == "assistant") for c in CHATS]
    assert got == want
    # completion only: the last assistant turn; all: the whole rendered text but its first token
    assert _trained_text(tok, template, CHATS, "completion") == [c[-1]["content"] + end for c in CHATS]
    renderer = ChatRenderer(template, tok)
    for conv, text in zip(CHATS, _trained_text(tok, template, CHATS, "all")):
        full = renderer.render(conv)
        first = tok.decode(tok(full, add_special_tokens=False)["input_ids"][:1])
        assert first + text == full
    assert renderer.end_marker() == end


def test_tokenizer_without_marker_tokens_still_masks_whole_tokens(tmp_path: Path) -> None:
    """Markers tokenized as plain text: tokens are trained from the one holding a turn's first
    character to the one holding the last character of its end marker."""
    from tests.sft_fixtures import make_base

    tok = _tok(make_base(tmp_path, markers=False))
    for text, conv in zip(_trained_text(tok, BUILTIN_TEMPLATES["chatml"], CHATS, "assistant"), CHATS):
        answers = [m["content"] for m in conv if m["role"] == "assistant"]
        assert all(a in text for a in answers) and text.count("<|im_end|>") == len(answers)
        assert "user" not in text and "<|im_start|>" not in text


def _prepared_rows(recipe: dict[str, Any]) -> tuple[Any, Any]:
    prep = prepare(ct.load_recipe(recipe))
    tr = prep.open_split("train")
    return prep, np.asarray(tr.input_ids), np.asarray(tr.loss_mask)


def test_messages_sharegpt_alpaca_disk_and_prompt_completion_give_the_same_rows(sft_base: Path, tmp_path: Path) -> None:
    rows = arithmetic_rows(40)
    msgs = write_jsonl(tmp_path / "m.jsonl", rows)
    share = tmp_path / "s.json"
    share.write_text(json.dumps([{"conversations": [{"from": {"user": "human", "assistant": "gpt"}[t["role"]],
                                                     "value": t["content"]} for t in r["messages"]]} for r in rows]))
    import pandas as pd
    from datasets import Dataset

    pc = pd.DataFrame({"question": [r["messages"][0]["content"] for r in rows],
                       "answer": [r["messages"][1]["content"] for r in rows]})
    pc.to_csv(tmp_path / "pc.csv", index=False)
    pc.to_parquet(tmp_path / "pc.parquet")
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "disk"))
    alpaca = write_jsonl(tmp_path / "a.jsonl", [{"instruction": r["messages"][0]["content"], "input": "",
                                                  "output": r["messages"][1]["content"]} for r in rows])
    cols = {"prompt_column": "question", "completion_column": "answer"}
    variants = [
        sft_recipe(sft_base, msgs),
        sft_recipe(sft_base, share, sft={"format": "conversations"}),
        sft_recipe(sft_base, share, sft={"format": "sharegpt"}),  # the name other tools give it
        sft_recipe(sft_base, msgs, sft={"format": "openai"}),
        sft_recipe(sft_base, alpaca),  # found by its columns
        sft_recipe(sft_base, alpaca, sft={"format": "alpaca"}),
        sft_recipe(sft_base, tmp_path / "pc.csv", sft=cols),
        sft_recipe(sft_base, tmp_path / "pc.parquet", sft={"format": "prompt_completion", **cols}),
        {**sft_recipe(sft_base, msgs), "data": {**sft_recipe(sft_base, msgs)["data"], "train_files": [],
                                                "dataset": str(tmp_path / "disk")}},
    ]
    first = _prepared_rows(variants[0])
    assert first[0].manifest.split("train").examples == 36
    assert first[2].sum() > 0 and (first[2][:, 0] == 0).all()
    for v in variants[1:]:
        _, ids, mask = _prepared_rows(v)
        assert np.array_equal(ids, first[1]) and np.array_equal(mask, first[2])
    # Held-out prompts for the generation check leave room for the answer within max_length.
    prompts = first[0].open_split("validation").generation
    assert prompts and all(len(p["prompt_ids"]) + 4 <= 64 for p in prompts)
    assert {p["reference"] for p in prompts} <= {r["messages"][1]["content"] for r in rows}
    # The template is saved with the prepared tokenizer, so the run's model chats as trained.
    assert first[0].tokenizer().chat_template == BUILTIN_TEMPLATES["chatml"]


def test_best_fit_decreasing_is_deterministic_and_fills_rows() -> None:
    lengths = [5, 9, 3, 7, 2, 8, 1, 4, 6, 10]
    bins = best_fit_decreasing(lengths, 10)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 10 for b in bins)
    assert len(bins) == 6 and bins[0] == [9] and bins == best_fit_decreasing(lengths, 10)
    assert bins[1] == [1, 6]  # 9 then the 1 that fills the row exactly


def test_packed_rows_restart_positions_and_prepare_reports_counts(sft_base: Path, tmp_path: Path) -> None:
    rows = arithmetic_rows(30) + [{"messages": [{"role": "user", "content": "word " * 80},
                                                {"role": "assistant", "content": "long"}]}]
    train = write_jsonl(tmp_path / "t.jsonl", rows)
    recipe = sft_recipe(sft_base, train, validation_fraction=0.05, truncation="allow",
                        sft={"packing": True, "too_long": "drop"})
    prep, ids, mask = _prepared_rows(recipe)
    tr = prep.open_split("train")
    stats = prep.manifest.split("train")
    assert stats.dropped_too_long + prep.manifest.split("validation").dropped_too_long == 1
    assert len(tr) < stats.examples_kept and tr.packed  # several examples per row
    pos = np.asarray(tr.position_ids)
    for r in range(len(tr)):
        n = int(tr.lengths[r])
        starts = np.flatnonzero(pos[r, :n] == 0)
        assert starts[0] == 0 and len(starts) >= 1 and (mask[r, starts] == 0).all()
        assert (mask[r, n:] == 0).all()
    kept = build_rows([np.arange(3), np.arange(4)], [np.ones(3, np.uint8), np.ones(4, np.uint8)], 8, True, 0, np.int32)
    assert kept.position_ids.tolist() == [[0, 1, 2, 3, 0, 1, 2, 0]] and kept.lengths.tolist() == [7]
    # truncate instead of drop: the long example is cut, and it still has its answer? no: it lost
    # it, so it is dropped for having no trained token
    prep2, _, _ = _prepared_rows(sft_recipe(sft_base, train, validation_fraction=0.05, truncation="allow",
                                            sft={"packing": True}))
    s2 = [prep2.manifest.split(k) for k in ("train", "validation")]
    assert sum(s.truncated for s in s2) == 1 and sum(s.dropped_no_loss for s in s2) == 1
    res = cli_here("prepare", _yaml(tmp_path, recipe))
    assert res.returncode == 0, res.stderr
    assert "dropped" in res.stdout + res.stderr


def _yaml(tmp_path: Path, recipe: dict[str, Any]) -> str:
    import yaml

    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return str(p)


def test_fingerprint_covers_template_masking_packing_and_max_length(sft_base: Path, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", arithmetic_rows(20))
    base = sft_recipe(sft_base, train)

    def fp(**changes: Any) -> str:
        r = json.loads(json.dumps(base))
        for k, v in changes.items():
            sec, key = k.split("__")
            (r["data"]["sft"] if sec == "sft" else r[sec])[key] = v
        return fingerprint_of(ct.load_recipe(r))[0]

    ref = fp()
    tpl = tmp_path / "t.jinja"
    tpl.write_text(BUILTIN_TEMPLATES["chatml"].replace("\\n", " "), encoding="utf-8")
    changed = [fp(sft__chat_template="llama3"), fp(sft__chat_template=str(tpl)), fp(sft__loss_on="all"),
               fp(sft__packing=True), fp(data__max_length=96), fp(sft__too_long="drop")]
    assert len({ref, *changed}) == len(changed) + 1
    assert fp(train__lr=1e-5) == ref and fp(train__batch_size=2) == ref


def test_an_alpaca_input_follows_its_instruction_after_a_blank_line() -> None:
    from datasets import Dataset

    from clustertune.data.sft import conversations
    from clustertune.recipe.sft_schema import SFTSection

    ds = Dataset.from_list([{"instruction": "Translate to French.", "input": "cheese", "output": "fromage"},
                            {"instruction": "Say hi.", "input": None, "output": "hi"}])
    assert conversations(ds, SFTSection(), "train") == [
        [{"role": "user", "content": "Translate to French.\n\ncheese"}, {"role": "assistant", "content": "fromage"}],
        [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "hi"}]]
    assert SFTSection(format="sharegpt").format == "conversations"


BAD: list[tuple[list[dict[str, Any]], dict[str, Any], str]] = [
    ([{"messages": "hello"}], {}, "line 1: messages is str"),
    ([{"messages": [{"role": "bot", "content": "x"}]}], {}, "turn 0 has role 'bot'"),
    ([{"messages": [{"role": "user", "content": "hi"}]}], {}, "no assistant turn"),
    ([{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "}]}], {}, "empty content"),
    ([{"prompt": "a", "completion": "b"}, {"messages": [{"role": "user", "content": "hi"}]}],
     {"format": "prompt_completion"}, "line 2: uses the messages shape"),
    ([{"conversations": [{"from": "alien", "value": "x"}]}], {}, "is from 'alien'"),
    ([{"text": "plain"}], {}, "none of the SFT shapes"),
    ([{"instruction": "Say hi.", "input": "", "output": " "}], {}, "column 'output' is empty or not text"),
]


@pytest.mark.parametrize("rows,sft,message", BAD, ids=[b[2] for b in BAD])
def test_bad_examples_name_the_example_and_write_nothing(sft_base: Path, tmp_path: Path, rows: Any, sft: Any,
                                                         message: str) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", rows * 3)
    recipe = ct.load_recipe(sft_recipe(sft_base, train, validation_files=[str(train)], sft=sft))
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match=message.replace("(", r"\(")) as err:
        prepare(recipe, cache_dir=cache)
    assert f"{str(train)!r} line " in str(err.value) or "none of the SFT shapes" in str(err.value)
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []


def test_template_problems_and_everything_dropped(sft_base: Path, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "t.jsonl", arithmetic_rows(10))
    with pytest.raises(DataError, match="no chat template and none is named.*chatml, llama3"):
        prepare(ct.load_recipe(sft_recipe(sft_base, train, sft={"chat_template": None})), cache_dir=tmp_path / "c")
    drops = tmp_path / "drops.jinja"  # renders the assistant's turns without their content
    drops.write_text("{% for m in messages %}{{ m['role'] + ': ' + (m['content'] if m['role'] != 'assistant' "
                     "else 'ok') + '\n' }}{% endfor %}", encoding="utf-8")
    with pytest.raises(DataError, match=r"t.jsonl' line \d+: the content of assistant turn 1 does not appear"):
        prepare(ct.load_recipe(sft_recipe(sft_base, train, sft={"chat_template": str(drops)})),
                cache_dir=tmp_path / "c")
    with pytest.raises(DataError, match="every one of the 9 train examples was dropped.*raise data.max_length"):
        prepare(ct.load_recipe(sft_recipe(sft_base, train, max_length=8, sft={"too_long": "drop"})),
                cache_dir=tmp_path / "c")
    assert [p.name for p in (tmp_path / "c").iterdir() if not p.name.startswith(".")] == []
    res = cli_here("prepare", _yaml(tmp_path, sft_recipe(sft_base, train, sft={"chat_template": "nope"})))
    assert res.returncode == 2 and "data.sft.chat_template" in res.stderr and "Traceback" not in res.stderr


def test_built_in_templates_written_in_python_render_as_jinja_does(sft_base: Path) -> None:
    tok = _tok(sft_base)
    convs = CHATS + [[{"role": "user", "content": " padded "}, {"role": "assistant", "content": "  spaced out \n"}]]
    for template in BUILTIN_TEMPLATES.values():
        direct, jinja = ChatRenderer(template, tok), ChatRenderer(template, tok)
        jinja.direct = None
        assert direct.direct is not None
        for loss_on in ("assistant", "completion", "all"):
            for i, conv in enumerate(convs):
                assert direct.with_spans(conv, loss_on, "x") == jinja.with_spans(conv, loss_on, "x"), (template, i)
