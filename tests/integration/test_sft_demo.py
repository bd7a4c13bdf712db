"""The shipped SFT demo learns its task: a full fine-tune of the session's one quickstart model
lifts the held-out exact match from near 0 (the untuned baseline, evaluated at step 0) to at
least 0.5, the run's closing lines report both, and the model it keeps stops at ChatML's
end-of-turn token. The same settings teach the quickstart model the user's own multi-turn chats:
a third answer that depends on the first turn, held out, and `chat` keeping three turns. The
suite's longer SFT tests (under a minute each on 2 idle cores, after the shared quickstart run)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from clustertune.runs.store import list_runs
from tests.helpers import cli, read_jsonl
from tests.quickstart_fixture import QuickstartRun

WORDS = ("apple river stone cloud lamp garden window silver candle forest bridge mirror pepper violin anchor "
         "basket castle desert engine feather glacier harbor island jacket kettle ladder magnet needle orange "
         "pillow quartz rocket saddle tunnel umbrella velvet wagon yellow zebra button carpet dragon falcon "
         "hammer jungle lemon marble nickel oyster parrot rabbit salmon tiger walnut").split()


def _base(quickstart_cli_run: QuickstartRun) -> Path:
    assert quickstart_cli_run.result.returncode == 0, quickstart_cli_run.result.stderr[-2000:]
    return next(r for r in list_runs(quickstart_cli_run.runs_root) if r.info.name == "quickstart").paths.model


def _evals(run: Any) -> list[dict[str, Any]]:
    return [m for m in read_jsonl(run.paths.metrics) if m["kind"] == "eval"]


@pytest.mark.slow
def test_the_sft_demo_lifts_held_out_exact_match_from_near_0_to_at_least_half(
        quickstart_cli_run: QuickstartRun, tmp_path: Path) -> None:
    # Its own runs root: the quickstart's is shared with tests that take its newest run.
    res = cli("run", "sft-demo", f"model.name_or_path={_base(quickstart_cli_run)}", "--runs-root", str(tmp_path),
              "--no-progress", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = list_runs(tmp_path)
    first, last = _evals(run)[0], _evals(run)[-1]
    assert first["step"] == 0 and first["eval_exact_match"] <= 0.1, first
    assert last["step"] == 120 and last["eval_exact_match"] >= 0.5, last
    assert f"held-out exact match {first['eval_exact_match']:.2f} (step 0) -> {last['eval_exact_match']:.2f} (step 120)" \
        in res.stdout, res.stdout[-2000:]
    # A plain model whose generation stops at end-of-text or ChatML's end-of-turn, both single tokens.
    tok = json.loads((run.paths.model / "tokenizer_config.json").read_text())
    assert "<|im_end|>" in json.dumps(tok)
    gen = json.loads((run.paths.model / "generation_config.json").read_text())
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(run.paths.model)
    assert gen["eos_token_id"] == [t.eos_token_id, t.convert_tokens_to_ids("<|im_end|>")]
    for marker in ("<|im_start|>", "<|im_end|>"):
        assert t(marker, add_special_tokens=False)["input_ids"] == [t.convert_tokens_to_ids(marker)]


def _recall(rng: random.Random) -> dict[str, Any]:
    """Three turns; the third answer is the word the first turn asked to remember."""
    w, a, b = rng.choice(WORDS), rng.randint(1, 9), rng.randint(1, 9)
    return {"messages": [
        {"role": "user", "content": f"Remember the word {w}."}, {"role": "assistant", "content": "I will remember it."},
        {"role": "user", "content": f"What is {a} plus {b}?"}, {"role": "assistant", "content": str(a + b)},
        {"role": "user", "content": "What was the word?"}, {"role": "assistant", "content": w}]}


@pytest.mark.slow
def test_the_demo_settings_teach_the_quickstart_model_a_users_multi_turn_chats(
        quickstart_cli_run: QuickstartRun, tmp_path: Path) -> None:
    # Recalling a word from two turns back takes longer than the demo's topics: on the suite's
    # 100-step quickstart base, exact match is 0.55 after 250 steps and 0.93 after 300 (RESULTS.md).
    train, held = tmp_path / "chats.jsonl", tmp_path / "held-out.jsonl"
    for path, n, seed in ((train, 600, 1), (held, 60, 2)):
        rng = random.Random(seed)
        path.write_text("".join(json.dumps(_recall(rng)) + "\n" for _ in range(n)))
    res = cli("run", "sft-demo", f"model.name_or_path={_base(quickstart_cli_run)}", "data.dataset=null",
              f"data.train_files=[{train}]", f"data.validation_files=[{held}]", "data.sft.generation_samples=60", "train.max_steps=300",
              "--runs-root", str(tmp_path / "runs"), "--no-progress", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "cut at data.max_length" in res.stderr and "0 of 600 examples" in res.stderr  # none cut
    (run,) = list_runs(tmp_path / "runs")
    base, tuned = _evals(run)[0]["eval_exact_match"], _evals(run)[-1]["eval_exact_match"]
    assert tuned >= base + 0.4, (base, tuned)

    # chat keeps the whole conversation: the word said two turns earlier comes back.
    from clustertune.use.chat import ChatSession
    from clustertune.use.generate import Generator, Sampling
    from clustertune.use.load import load_for_use

    session = ChatSession(Generator(load_for_use(str(run.paths.root), device="cpu", dtype="fp32")),
                          Sampling(temperature=0, max_new_tokens=8))
    replies = [session.say(text) for text in ("Remember the word falcon.", "What is 2 plus 5?", "What was the word?")]
    assert [r.dropped for r in replies] == [0, 0, 0]
    assert len(session.history) == 6 and replies[-1].text.strip() == "falcon", [r.text for r in replies]
