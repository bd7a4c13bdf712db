"""A Tinker training client is never poisoned: an optimizer step that would make its weights NaN or
infinite is refused with its weights, Adam state and step count exactly as they were, and the
client trains on afterwards. On a real (tiny, 1-layer) GPT-2 with a real LoRA adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from clustertune.serve.tinker import forward, lora
from clustertune.serve.tinker.lora import Base, LoraSpec, TinkerUserError, Trainee


@pytest.fixture
def trainee(tmp_path: Path) -> Trainee:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2, n_positions=32))
    base = Base(ref="tiny", path=tmp_path, model=model.eval(), tokenizer=None, device="cpu")
    base.add("tk_1", LoraSpec(rank=2))
    return Trainee("s:train:0", base, "tk_1", LoraSpec(rank=2))


def datum(weight: float) -> dict[str, Any]:
    return {"tokens": [1, 2, 3, 4, 5], "inputs": {"target_tokens": np.array([2, 3, 4, 5, 6]),
                                                   "weights": np.full(5, weight, np.float32)}}


def loss(t: Trainee) -> float:
    return forward.forward_backward(t, [datum(1.0)], "cross_entropy", None, backward=False)[1]["loss:sum"]


def snapshot(t: Trainee) -> tuple[list[torch.Tensor], dict[str, Any] | None, int]:
    import copy

    state = copy.deepcopy(t.optimizer.state_dict()) if t.optimizer is not None else None
    return [p.detach().clone() for p in t.base.params(t.adapter)], state, t.steps


def assert_unchanged(t: Trainee, before: tuple[list[torch.Tensor], dict[str, Any] | None, int]) -> None:
    weights, state, steps = before
    assert t.steps == steps
    assert all(torch.equal(p, w) for p, w in zip(t.base.params(t.adapter), weights))
    if state is None:
        assert t.optimizer is None
    else:
        now = t.optimizer.state_dict()
        assert now["param_groups"] == state["param_groups"]
        for k, moments in state["state"].items():
            assert all(torch.equal(now["state"][k][m], v) for m, v in moments.items())


def test_a_step_that_would_poison_the_weights_is_refused_and_leaves_the_client_as_it_was(trainee: Trainee) -> None:
    t = trainee
    # Finite inputs whose loss overflows float32: infinite gradients, refused before anything changes.
    forward.forward_backward(t, [datum(3e38)], "cross_entropy", None, backward=True)
    before = snapshot(t)
    with pytest.raises(TinkerUserError, match="gradients gathered since its last step are not finite"):
        lora.optim_step(t, {"learning_rate": 1e-2})
    assert_unchanged(t, before)

    # eps 0 over LoRA's zero gradients (its B starts at zero) divides 0 by 0 on the first step.
    forward.forward_backward(t, [datum(1.0)], "cross_entropy", None, backward=True)
    with pytest.raises(TinkerUserError, match="would make weights NaN or infinite"):
        lora.optim_step(t, {"learning_rate": 1e-2, "eps": 0.0})
    assert_unchanged(t, before)

    # The kept gradients step fine; then a learning rate that overflows float mid-step (torch has
    # updated the moments by then) is undone as well, Adam's moments included.
    first = loss(t)
    lora.optim_step(t, {"learning_rate": 1e-2})
    forward.forward_backward(t, [datum(1.0)], "cross_entropy", None, backward=True)
    before = snapshot(t)
    assert before[1] is not None and before[2] == 1
    with pytest.raises(TinkerUserError, match="overflows"):
        lora.optim_step(t, {"learning_rate": 1e300})
    assert_unchanged(t, before)

    # The client goes on: finite losses that fall.
    for _ in range(3):
        lora.optim_step(t, {"learning_rate": 1e-2})
        forward.forward_backward(t, [datum(1.0)], "cross_entropy", None, backward=True)
    assert t.steps == 4 and np.isfinite(loss(t)) and loss(t) < first


def _capped_trainee(tmp_path: Path) -> Trainee:
    """A base whose forward soft-caps the output layer's logits (as Gemma's does), with LoRA."""
    from transformers import GPT2Config, GPT2LMHeadModel

    class Capped(GPT2LMHeadModel):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            out = super().forward(*args, **kwargs)
            out.logits = 2.0 * torch.tanh(out.logits / 2.0)
            return out

    torch.manual_seed(0)
    model = Capped(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2, n_positions=32))
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)  # logits well past the cap, so capping changes them
    base = Base(ref="capped", path=tmp_path, model=model.eval(), tokenizer=None, device="cpu")
    base.add("tk_1", LoraSpec(rank=2))
    return Trainee("s:train:0", base, "tk_1", LoraSpec(rank=2))


@pytest.mark.parametrize("capped", [False, True], ids=["plain", "soft-capped"])
def test_log_probabilities_are_the_models_own_where_the_loss_moves_a_few_tokens_only(trainee: Trainee,
                                                                                      tmp_path: Path,
                                                                                      capped: bool) -> None:
    """A datum trained on two of its five tokens: every returned log-probability is the model's
    own (as the whole forward computes it), and so is the gradient, whether or not the model
    changes its output layer's result."""
    t = _capped_trainee(tmp_path) if capped else trainee
    tokens, targets = [1, 2, 3, 4, 5], np.array([2, 3, 4, 5, 6])
    weights = np.array([0, 0, 0, 1, 1], np.float32)
    outputs, metrics = forward.forward_backward(t, [{"tokens": tokens, "inputs": {"target_tokens": targets,
                                                                                  "weights": weights}}],
                                                "cross_entropy", None, backward=True)
    got = {n: p.grad.clone() for n, p in t.base.model.named_parameters() if p.grad is not None}
    t.base.model.zero_grad(set_to_none=True)

    with t.base.using(t.adapter, training=True) as model:
        logp = torch.log_softmax(model(input_ids=torch.tensor([tokens])).logits[0].float(), -1)
        want = logp.gather(-1, torch.tensor(targets)[:, None])[:, 0]
        (-(torch.tensor(weights) * want).sum()).backward()
    np.testing.assert_allclose(outputs[0]["logprobs"], want.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert metrics["loss:sum"] == pytest.approx(float(-(torch.tensor(weights) * want).sum()), rel=1e-5)
    assert got and all(torch.allclose(got[n], p.grad, rtol=1e-4, atol=1e-7) for n, p in
                       t.base.model.named_parameters() if p.grad is not None)
    t.base.model.zero_grad(set_to_none=True)
