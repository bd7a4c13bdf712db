"""The tinker-cookbook's own training loops, unchanged, against `clustertune serve --tinker`.

The cookbook (the release that goes with the pinned SDK) is what Tinker users run. Its
supervised loop (`tinker_cookbook.supervised.train`) and its RL loop (`tinker_cookbook.rl.train`)
run here as a user runs them, with a local model directory as the model name (the cookbook loads
its tokenizer with `AutoTokenizer` like any other) and offline data through the cookbook's own
hooks: a conversations file for supervised learning (`FromConversationFileBuilder`), an
`RLDatasetBuilder` of `ProblemEnv`s for RL. The assertions read the cookbook's own logs
(`metrics.jsonl`, `checkpoints.jsonl`) and its resume from them.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import chz
import numpy as np
import pytest

import tinker
from tinker_cookbook import renderers
from tinker_cookbook.rl import train as rl_train
from tinker_cookbook.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from tinker_cookbook.rl.types import RLDataset, RLDatasetBuilder
from tinker_cookbook.supervised import train as sl_train
from tinker_cookbook.supervised.data import FromConversationFileBuilder
from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig
from tinker_cookbook.tokenizer_utils import get_tokenizer

from clustertune.api import serving

RENDERER = "role_colon"  # the cookbook's plain "User: ... Assistant: ..." format, for any tokenizer


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    old = {k: os.environ.get(k) for k in ("TINKER_API_KEY", "TINKER_TELEMETRY")}
    os.environ.update(TINKER_API_KEY="tml-cookbook-test", TINKER_TELEMETRY="0")
    server = serving.start(None, port=0, tinker=True, device="cpu", dtype="fp32",
                           tinker_dir=tmp_path_factory.mktemp("tinker-state"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert server.wait_loaded(60)
    yield server.served.root_url
    server.stop()
    thread.join(30)
    for k, v in old.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def metrics(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]


def sl_config(url: str, base: Path, chats: Path, log: Path, **extra: Any) -> Any:
    common = ChatDatasetBuilderCommonConfig(model_name_for_tokenizer=str(base), renderer_name=RENDERER, max_length=64,
                                            batch_size=8)
    return sl_train.Config(log_path=str(log), model_name=str(base), recipe_name="clustertune-test", renderer_name=RENDERER,
                           dataset_builder=FromConversationFileBuilder(common_config=common, file_path=str(chats)),
                           learning_rate=3e-3, lr_schedule="constant", num_epochs=3, lora_rank=8, base_url=url,
                           save_every=4, eval_every=0, **extra)


def test_the_cookbooks_supervised_loop_lowers_the_loss_and_resumes_where_it_stopped(url: str, chat_base: Path,
                                                                                   tmp_path: Path) -> None:
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"After {i}?"},
                                                      {"role": "assistant", "content": str(i + 1)}]}) + "\n"
                             for i in range(32)))
    # Uninterrupted: 32 chats in batches of 8, three epochs, twelve steps.
    asyncio.run(sl_train.main(sl_config(url, chat_base, chats, tmp_path / "whole")))
    whole = [r["train_mean_nll"] for r in metrics(tmp_path / "whole")]
    assert len(whole) == 12
    assert np.mean(whole[-4:]) < 0.7 * np.mean(whole[:4]), whole
    saved = [json.loads(line) for line in (tmp_path / "whole" / "checkpoints.jsonl").read_text().splitlines()]
    assert [c["name"] for c in saved] == ["000004", "000008", "final"]

    # A run that died after its step-4 checkpoint leaves this checkpoints.jsonl behind. Started
    # again on it, the cookbook loads the weights and Adam's state from this server and goes on
    # from step 4. (The cookbook saves a step's checkpoint once the steps after it are already
    # submitted, so the state it resumes holds those too and the resumed run repeats them: its
    # losses are below the uninterrupted run's, never back at a fresh adapter's.)
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / "checkpoints.jsonl").write_text(json.dumps(saved[0]) + "\n")
    asyncio.run(sl_train.main(sl_config(url, chat_base, chats, resumed)))
    rows = metrics(resumed)
    assert [r["step"] for r in rows] == list(range(4, 12)), [r["step"] for r in rows]
    again = [r["train_mean_nll"] for r in rows]
    assert again[0] < whole[3] and np.mean(again[-4:]) <= 1.1 * np.mean(whole[-4:]), (again, whole)


class MoreEs(ProblemEnv):
    """One-turn episodes rewarded by the share of the letter e in the answer: a goal the tiny base
    can reach in a few iterations."""

    def get_question(self) -> str:
        return "Write"

    def check_answer(self, sample_str: str) -> float:  # type: ignore[override]
        return sample_str.count("e") / max(len(sample_str), 1)

    def check_format(self, sample_str: str) -> bool:
        return True

    def get_reference_answer(self) -> str:
        return "eeee"


class Prompts(RLDataset):
    def __init__(self, renderer: Any, batches: int):
        self.renderer, self.batches = renderer, batches

    def get_batch(self, index: int) -> list[ProblemGroupBuilder]:
        env = partial(MoreEs, self.renderer, format_coef=0.0, require_stop_sequence_for_format=False)
        return [ProblemGroupBuilder(env_thunk=env, num_envs=8) for _ in range(3)]

    def __len__(self) -> int:
        return self.batches


@chz.chz
class PromptsBuilder(RLDatasetBuilder):
    model: str
    batches: int

    async def __call__(self) -> tuple[Prompts, None]:
        return Prompts(renderers.get_renderer(RENDERER, tokenizer=get_tokenizer(self.model)), self.batches), None


def test_the_cookbooks_rl_loop_raises_the_reward_and_its_sampler_weights_load(url: str, chat_base: Path,
                                                                              tmp_path: Path) -> None:
    log = tmp_path / "rl"
    config = rl_train.Config(learning_rate=2e-2, dataset_builder=PromptsBuilder(model=str(chat_base), batches=16),
                             model_name=str(chat_base), recipe_name="clustertune-test", renderer_name=RENDERER,
                             max_tokens=12, log_path=str(log), eval_every=0, save_every=8, lora_rank=8, base_url=url,
                             num_groups_to_log=0)
    asyncio.run(rl_train.main(config))
    reward = [r["env/all/reward/total"] for r in metrics(log) if "env/all/reward/total" in r]
    assert len(reward) == 16
    # Three runs before this test was written rose from about 0.08 to 0.50-0.75; sampling is
    # not seeded by the cookbook, so the bar is a third of the smallest rise seen.
    assert np.mean(reward[-4:]) >= np.mean(reward[:4]) + 0.15, reward
    saved = [json.loads(line) for line in (log / "checkpoints.jsonl").read_text().splitlines()]
    assert saved and saved[-1]["name"] == "final"
    sampler = tinker.ServiceClient(base_url=url).create_sampling_client(model_path=saved[-1]["sampler_path"])
    tok = get_tokenizer(str(chat_base))
    out = sampler.sample(tinker.types.ModelInput.from_ints(tok.encode("Write")), 2,
                         tinker.types.SamplingParams(max_tokens=6, temperature=1.0, seed=1)).result()
    assert [len(s.tokens) for s in out.sequences] == [6, 6]
