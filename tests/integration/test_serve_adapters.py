"""Many adapters on one served base (serve/adapters.py): the base loads once; a request's `model`
picks an adapter run by its id (or the base by its own); requests for different adapters at once
each get their own adapter's greedy answer, equal to `clustertune generate` of that run; an
adapter run not named at start loads on first use; past --max-adapters the one used longest ago
is unloaded and loads again when asked for; /v1/models lists them all.

Two LoRA adapters of the tiny chat base are trained here (in this process, a few seconds each)
to answer every question differently: one always "yes", the other always "no"."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

import clustertune as ct
from clustertune.api import serving
from clustertune.errors import UserError
from clustertune.runs.state import RunState
from clustertune.use.generate import Generator, Sampling
from clustertune.use.load import load_for_use
from tests.integration.test_serve import Running, ask
from tests.sft_fixtures import sft_recipe, write_jsonl

QUESTIONS = ["Which keyword starts a loop?", "What does def define?", "Count to three.", "What is a tuple?"]


def _adapter_run(base: Path, tmp_path: Path, runs_root: Path, answer: str) -> Any:
    rows = [{"messages": [{"role": "user", "content": f"Question {i}: {q}"}, {"role": "assistant", "content": answer}]}
            for i in range(12) for q in QUESTIONS]
    recipe = sft_recipe(base, write_jsonl(tmp_path / f"{answer}.jsonl", rows), runs_root)
    recipe["name"] = f"says-{answer}"
    recipe["model"] = {"name_or_path": str(base), "adapter": {"type": "lora", "rank": 8, "alpha": 16}}
    recipe["train"].update(max_steps=24, lr=3e-2, eval_at_start=False, log_every=8)
    recipe["data"]["sft"]["generation_samples"] = 0
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state is RunState.COMPLETED, run.info.reason
    return run


@pytest.fixture(scope="module")
def runs(chat_base: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("adapter-runs")
    root = where / "runs"
    return {"root": root, "yes": _adapter_run(chat_base, where, root, "yes"),
            "no": _adapter_run(chat_base, where, root, "no")}


def _generated(run_id: str, root: Path) -> dict[str, str]:
    """What `clustertune generate RUN` answers each question (the adapter on its base, greedy)."""
    gen = Generator(load_for_use(run_id, runs_root=root, device="cpu", dtype="fp32"))
    return {q: gen.complete([ask(q)], Sampling(temperature=0, max_new_tokens=6))[0] for q in QUESTIONS}


def _served(client: openai.OpenAI, model: str, q: str) -> str:
    r = client.chat.completions.create(model=model, messages=ask(q), temperature=0, max_tokens=6)
    return r.choices[0].message.content or ""


def test_adapters_on_one_base_answer_at_once_each_as_its_run_generates(chat_base: Path, runs: dict[str, Any]) -> None:
    yes, no, root = runs["yes"], runs["no"], runs["root"]
    want = {yes.id: _generated(yes.id, root), no.id: _generated(no.id, root)}
    base_gen = Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32"))
    want["base"] = {q: base_gen.complete([ask(q)], Sampling(temperature=0, max_new_tokens=6))[0] for q in QUESTIONS}
    # Trained apart: each begins its word (a few steps teach its start, not yet where to stop).
    assert all(a.startswith("y") for a in want[yes.id].values()), want[yes.id]
    assert all(a.startswith("n") for a in want[no.id].values()), want[no.id]

    # "yes" named at start; "no" asked for by its run id only; one adapter held at a time.
    server = Running(serving.start(str(chat_base), name="base", port=0, device="cpu", dtype="fp32", runs_root=root,
                                   adapters=[yes.id], max_adapters=1))
    try:
        engine = server.server.engine
        assert list(engine.adapters.loaded) == [yes.id]  # loaded before the first request
        # Every adapter run of the base is listed, the one not named at start too.
        with urllib.request.urlopen(f"{server.url}/models") as resp:
            listed = json.load(resp)["data"]
        assert [(m["id"], m.get("parent")) for m in listed] == [("base", None), (yes.id, "base"), (no.id, "base")]
        c = server.client()
        jobs = [(m, q) for q in QUESTIONS for m in (yes.id, no.id, "base")] * 2
        with ThreadPoolExecutor(len(jobs)) as pool:
            got = list(pool.map(lambda job: _served(c, *job), jobs))
        for (m, q), answer in zip(jobs, got):
            assert answer == want[m][q], (m, q, answer, want[m][q])
        # Held at most one at a time, and an unloaded one comes back when asked for.
        assert len(engine.adapters.loaded) == 1
        for m in (yes.id, no.id, yes.id):
            assert _served(c, m, QUESTIONS[0]) == want[m][QUESTIONS[0]]
            assert list(engine.adapters.loaded) == [m]
        # Answered alone with generate (a seed), on the adapter asked for.
        seeded = c.chat.completions.create(model=yes.id, messages=ask(QUESTIONS[2]), temperature=0, max_tokens=6,
                                           seed=3)
        assert seeded.choices[0].message.content == want[yes.id][QUESTIONS[2]]
        # The streamed answer of an adapter is its answer too.
        stream = c.chat.completions.create(model=no.id, messages=ask(QUESTIONS[1]), temperature=0, max_tokens=6,
                                           stream=True)
        assert "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices) == want[no.id][QUESTIONS[1]]

        with pytest.raises(openai.NotFoundError, match="not served here"):
            _served(c, "says-no", QUESTIONS[0])  # a run's name could mean another run: ids only
        with pytest.raises(openai.NotFoundError, match="not served here"):
            _served(c, "no-such-run", QUESTIONS[0])
    finally:
        server.stop()


def test_adapters_that_are_not_of_the_served_base_are_refused_before_it_listens(chat_base: Path, plain_base: Path,
                                                                                runs: dict[str, Any]) -> None:
    root = runs["root"]
    with pytest.raises(UserError, match="is an adapter of .*, not of the served base"):
        serving.start(str(plain_base), port=0, device="cpu", runs_root=root, adapters=[runs["yes"].id])
    with pytest.raises(UserError, match="not an adapter run"):
        serving.start(str(chat_base), port=0, device="cpu", runs_root=root, adapters=[str(plain_base)])
    with pytest.raises(UserError, match="is an adapter run; serve the base model"):
        serving.start(runs["yes"].id, port=0, device="cpu", runs_root=root, adapters=[runs["no"].id])
    with pytest.raises(UserError, match="--max-adapters is 1: raise it to 2"):
        serving.start(str(chat_base), port=0, device="cpu", runs_root=root, adapters=[runs["yes"].id, runs["no"].id],
                      max_adapters=1)
