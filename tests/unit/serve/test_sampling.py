"""The served batch's sampler (serve/sampling.py): greedy rows keep their logits and a step of greedy
rows only does nothing; sampled rows are drawn from their temperature's distribution cut to their
top-p nucleus, in the eager form and in the form a captured or compiled step needs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from clustertune.serve.sampling import BatchSampler

LOGITS = torch.tensor([2.0, 1.5, 1.0, 0.0, -1.0, -3.0])


def request(new_token: bool = True, **settings: float) -> SimpleNamespace:
    return SimpleNamespace(has_new_token=new_token, state=SimpleNamespace(logit_processor_kwargs=settings))


def prepared(sampler: BatchSampler, requests: list[SimpleNamespace]) -> torch.Tensor:
    storage = torch.zeros(sampler.tensors_required, len(requests), dtype=torch.int32)
    sampler.fill_defaults(storage[:, :1])
    return sampler.prepare_tensor_args(requests, storage)


def expected(temperature: float, top_p: float) -> torch.Tensor:
    """The distribution a request asks for, written out the plain way: softmax at the
    temperature, the most likely tokens kept until their mass reaches top_p, renormalised."""
    probs = torch.softmax(LOGITS / temperature, -1)
    keep, mass = torch.zeros_like(probs, dtype=torch.bool), 0.0
    for i in torch.argsort(probs, descending=True).tolist():
        keep[i] = True
        mass += float(probs[i])
        if mass >= top_p:
            break
    probs = probs * keep
    return probs / probs.sum()


def drawn_shares(sampler: BatchSampler, rows: int, temperature: float, top_p: float) -> torch.Tensor:
    args = prepared(sampler, [request(temperature=temperature, top_p=top_p)] * rows)
    scores = sampler(torch.zeros(rows, dtype=torch.long), LOGITS.repeat(rows, 1), args)
    return torch.bincount(scores.argmax(-1), minlength=len(LOGITS)).float() / rows


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "captured"])
@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.8), (1.8, 0.95), (0.5, 1e-6)])
def test_sampled_rows_follow_the_distribution_they_ask_for(eager: bool, temperature: float, top_p: float) -> None:
    torch.manual_seed(0)
    shares = drawn_shares(BatchSampler(eager=eager), 40_000, temperature, top_p)
    want = expected(temperature, top_p)
    # 40,000 draws: a share's standard error is at most 0.0025, so 0.012 is over four of them.
    assert torch.allclose(shares, want, atol=0.012), (shares, want)
    assert (shares[want == 0] == 0).all(), "a token outside the nucleus was drawn"


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "captured"])
def test_greedy_rows_keep_their_logits_beside_sampled_ones(eager: bool) -> None:
    torch.manual_seed(0)
    sampler = BatchSampler(eager=eager)
    # The third request reads its prompt in pieces this step: it has no row among the logits.
    args = prepared(sampler, [request(temperature=0.0, top_p=1.0), request(temperature=1.0, top_p=0.9),
                              request(False, temperature=1.0, top_p=1.0), request(temperature=0.0, top_p=0.5)])
    scores = torch.stack([LOGITS, LOGITS.flip(0), LOGITS.roll(2)])
    out = sampler(torch.zeros(3, dtype=torch.long), scores.clone(), args)
    assert torch.equal(out[0], scores[0]) and torch.equal(out[2], scores[2])
    assert not torch.equal(out[1], scores[1]) and (out[1] >= 0).all()  # a draw's scores, not logits


def test_a_step_of_greedy_rows_only_is_left_as_it_came() -> None:
    sampler = BatchSampler()
    args = prepared(sampler, [request(temperature=0.0, top_p=1.0), request(temperature=0.0, top_p=0.3), request()])
    scores = LOGITS.repeat(3, 1)
    assert sampler(torch.zeros(3, dtype=torch.long), scores, args) is scores


def test_a_request_that_names_nothing_is_greedy_and_unknown_settings_are_refused() -> None:
    sampler = BatchSampler()
    storage = torch.zeros(2, 4, dtype=torch.int32)
    sampler.fill_defaults(storage[:, :1])
    assert storage[0, 0].view(torch.float32) == 0.0 and storage[1, 0].view(torch.float32) == 1.0
    sampler.check_kwargs({"temperature": 0.5, "top_p": 0.9})
    with pytest.raises(ValueError, match="top_k"):
        sampler.check_kwargs({"top_k": 1})
    with pytest.raises(TypeError, match="temperature"):
        sampler.check_kwargs({"temperature": 1})


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "captured"])
def test_a_greedy_step_after_a_sampled_one_stays_greedy(eager: bool) -> None:
    # The batch keeps one argument storage across steps: what a sampled step wrote there must not
    # make the next, greedy step draw.
    torch.manual_seed(0)
    sampler = BatchSampler(eager=eager)
    storage = torch.zeros(sampler.tensors_required, 4, dtype=torch.int32)
    sampler.fill_defaults(storage[:, :1])
    sampler.prepare_tensor_args([request(temperature=2.0, top_p=1.0)] * 2, storage)
    sampler(torch.zeros(2, dtype=torch.long), LOGITS.repeat(2, 1), storage)
    sampler.prepare_tensor_args([request(temperature=0.0, top_p=1.0)] * 2, storage)
    scores = LOGITS.repeat(2, 1)
    assert torch.equal(sampler(torch.zeros(2, dtype=torch.long), scores.clone(), storage), scores)
