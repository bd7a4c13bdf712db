"""``train.group_by_length``: rows of similar length share a batch (less padding computed), an
epoch holds the same samples, the order is the same on any number of ranks (so a resume on another
world size continues over the same samples), and it is refused where every row has one length."""

from __future__ import annotations

import numpy as np
import pytest

from clustertune.data.loader import GROUP_CHUNK, GROUP_RUN, Position, TrainBatches
from clustertune.data.packing import SFTArrays
from clustertune.errors import UserError
from clustertune.recipe import load_recipe
from clustertune.recipe.compute_checks import groups_by_length
from tests.helpers import TINY_CAUSAL, with_

N, WIDTH = 3000, 64


def _rows(seed: int = 0) -> SFTArrays:
    lengths = np.random.default_rng(seed).integers(4, WIDTH + 1, size=N)
    ids = np.arange(N * WIDTH).reshape(N, WIDTH)
    mask = np.arange(WIDTH)[None, :] < lengths[:, None]
    return SFTArrays(input_ids=ids, loss_mask=mask, position_ids=None, lengths=lengths, packed=False, n_tokens=int(lengths.sum()))


def _epoch(batches: TrainBatches) -> list[np.ndarray]:
    pos, out = Position(), []
    for _ in range(batches.steps_per_epoch):
        micro, pos = batches.step_indices(pos)
        out.append(np.concatenate(micro))
    return out


def test_batches_hold_rows_of_similar_length_and_the_epoch_the_same_samples() -> None:
    arr = _rows()
    plain = _epoch(TrainBatches(arr, 8, 1, 0, 1, seed=5, shuffle=True))
    grouped = _epoch(TrainBatches(arr, 8, 1, 0, 1, seed=5, shuffle=True, group_by_length=True))
    assert sorted(np.concatenate(plain).tolist()) == sorted(np.concatenate(grouped).tolist())  # same samples
    assert np.concatenate(plain).tolist() != np.concatenate(grouped).tolist()

    def computed(epoch: list[np.ndarray]) -> int:  # positions a step computes: rows x the longest row
        return sum(len(b) * int(arr.lengths[b].max()) for b in epoch)

    assert computed(grouped) < 0.6 * computed(plain), (computed(grouped), computed(plain))
    # Each run of GROUP_RUN samples of the shuffled order is cut, sorted by length, into chunks of
    # GROUP_CHUNK: each chunk longest first, the run's longest chunk first, the others shuffled (so
    # the run's first steps hold short rows as well as long ones).
    order = np.concatenate(grouped)
    for start in range(0, len(order) - GROUP_RUN + 1, GROUP_RUN):
        lens = arr.lengths[order[start:start + GROUP_RUN]]
        chunks = lens.reshape(-1, GROUP_CHUNK)
        assert (np.diff(chunks, axis=1) <= 0).all()
        assert chunks[0].min() >= chunks[1:].max()  # the longest rows come first
        firsts = chunks[:, 0]
        assert not (np.diff(firsts[1:]) <= 0).all(), firsts  # the other chunks are not in length order
        assert chunks[: len(chunks) // 2].min() < np.median(lens)  # short rows early in the run
    # Another epoch, another order.
    pos = Position(epoch=1)
    b = TrainBatches(arr, 8, 1, 0, 1, seed=5, shuffle=True, group_by_length=True)
    assert np.concatenate(b.step_indices(pos)[0]).tolist() != grouped[0].tolist()


def test_the_order_is_the_same_on_any_world_size_so_a_resume_on_another_continues() -> None:
    arr = _rows(1)
    one = TrainBatches(arr, 8, 2, 0, 1, seed=3, shuffle=True, group_by_length=True)
    two = [TrainBatches(arr, 4, 2, r, 2, seed=3, shuffle=True, group_by_length=True) for r in range(2)]
    pos1 = pos2 = Position()
    for _ in range(200):  # past the first epoch (187 steps of 16)
        m1, pos1 = one.step_indices(pos1)
        parts = [t.step_indices(pos2) for t in two]
        pos2 = parts[0][1]
        assert sorted(np.concatenate(m1).tolist()) == sorted(np.concatenate([np.concatenate(p[0]) for p in parts]).tolist())
    assert pos1.to_dict() == pos2.to_dict()
    # A fresh loader (a resumed run) at a saved position takes the very next samples.
    fresh = TrainBatches(arr, 8, 2, 0, 1, seed=3, shuffle=True, group_by_length=True)
    assert [x.tolist() for x in one.step_indices(pos1)[0]] == [x.tolist() for x in fresh.step_indices(pos1)[0]]


SFT = {"name": "g", "task": "sft", "model": {"name_or_path": "tiny/base"},
       "data": {"dataset": "builtin:chats", "max_length": 64}}


@pytest.mark.parametrize(("recipe", "words"), [
    (with_(TINY_CAUSAL, train={"group_by_length": True}), "task causal_lm trains on rows of one length"),
    ({**SFT, "data": {**SFT["data"], "sft": {"packing": True}}, "train": {"group_by_length": True}},
     "data.sft.packing fills every row"),
])
def test_it_is_refused_where_every_row_has_one_length(recipe: dict, words: str) -> None:
    with pytest.raises(UserError) as err:
        load_recipe(recipe)
    assert "train.group_by_length" in str(err.value) and words in str(err.value) and "drop it" in str(err.value)


def test_padded_chats_accept_it() -> None:
    assert load_recipe({**SFT, "train": {"group_by_length": True}}).train.group_by_length is True


@pytest.mark.parametrize(("recipe", "grouped"), [
    (SFT, True),  # unset: on where rows differ in length
    ({**SFT, "train": {"group_by_length": False}}, False),
    ({**SFT, "data": {**SFT["data"], "sft": {"packing": True}}}, False),  # unset and nothing to group: off, no error
    (TINY_CAUSAL, False),
])
def test_unset_it_groups_wherever_rows_differ_in_length(recipe: dict, grouped: bool) -> None:
    assert groups_by_length(load_recipe(recipe)) is grouped


def test_a_grouped_sft_run_counts_each_steps_own_tokens(sft_base, tmp_path) -> None:  # noqa: ANN001
    """The loop trains on grouped batches, and its tokens/s counts each step's real tokens (grouped
    batches differ in length), not the average row times the batch."""
    import json

    import clustertune as ct
    from tests.sft_fixtures import arithmetic_rows, sft_recipe, write_jsonl

    rows = arithmetic_rows(40) + [{"messages": [{"role": "user", "content": "Spell " + "ab " * (i % 12)},
                                                {"role": "assistant", "content": "ok " * (i % 5 + 1)}]} for i in range(40)]
    train = write_jsonl(tmp_path / "chats.jsonl", rows)
    recipe = sft_recipe(sft_base, train, tmp_path / "runs", sft={"generation_samples": 0})
    recipe["train"].update({"group_by_length": True, "max_steps": 4, "log_every": 1, "eval_every": None,
                            "eval_at_start": False})
    run = ct.run(ct.load_recipe(recipe), show_progress=False)
    assert run.state.value == "COMPLETED", run.info.reason
    steps = [m for m in map(json.loads, run.paths.metrics.read_text().splitlines()) if m["kind"] == "train"]
    assert [m["step"] for m in steps] == [1, 2, 3, 4]
    from clustertune.data.staging import open_run_data

    train_arrays, _ = open_run_data(ct.load_recipe(recipe), run.paths)
    batches = TrainBatches(train_arrays, 4, 1, 0, 1, seed=42, shuffle=True, group_by_length=True)
    pos, real = Position(), []
    for _ in range(4):
        _, pos = batches.step_indices(pos)
        real.append(batches.step_tokens)
    assert len(set(real)) > 1, real  # grouped steps hold different numbers of real tokens
    # Each row counts its own step's real tokens (the interval's, all ranks), not the mean row times the batch.
    assert [m["tokens"] for m in steps] == real
