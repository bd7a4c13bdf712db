"""The Tinker server's line of work and its losses, without HTTP: clients take turns, a client's
requests run in seq_id order (and a request sent twice runs once), and each loss is the sum
the SDK documents."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from clustertune.serve.tinker import losses
from clustertune.serve.tinker.work import Work


def _blocked_work() -> tuple[Work, threading.Event, list[str]]:
    """A Work whose first job waits for the gate, so what is queued behind it can be ordered."""
    work, gate, done = Work(), threading.Event(), []
    work.submit("gate", lambda: gate.wait(10))
    return work, gate, done


def test_clients_take_turns_whatever_one_of_them_queued() -> None:
    work, gate, done = _blocked_work()
    try:
        ids = [work.submit("a", lambda i=i: done.append(f"a{i}")) for i in range(4)]
        ids.append(work.submit("b", lambda: done.append("b0")))
        gate.set()
        for rid in ids:
            work.future(rid).result(10)
        assert done == ["a0", "b0", "a1", "a2", "a3"]
    finally:
        work.stop()


def test_a_clients_requests_run_in_seq_order_and_a_repeat_runs_once() -> None:
    work, gate, done = _blocked_work()
    try:
        work.expect("m", 0)
        ids = [work.submit("m", lambda s=s: done.append(s), s, once=("m", s)) for s in (2, 0, 3, 1)]
        again = work.submit("m", lambda: done.append("twice"), 2, once=("m", 2))
        assert again == ids[0]
        gate.set()
        for rid in ids:
            work.future(rid).result(10)
        assert done == [0, 1, 2, 3]
    finally:
        work.stop()


def test_a_missing_seq_id_stalls_its_client_for_a_while_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.serve.tinker import work as work_mod

    monkeypatch.setattr(work_mod, "GAP_WAIT_S", 0.3)
    work = Work()
    try:
        work.expect("m", 1)
        other = work.submit("other", lambda: "ran")
        late = work.submit("m", lambda: "ran late", 3)  # 1 and 2 never come
        assert work.future(other).result(5) == "ran"  # another client is not held up
        start = time.monotonic()
        assert work.future(late).result(5) == "ran late"
        assert time.monotonic() - start >= 0.1
    finally:
        work.stop()


def test_a_seq_id_refused_at_the_edge_holds_nothing_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests 1 and 3 were refused before they were queued: 2 and 4 run in order, at once (with
    the wait for a missing request an hour long, a held-up one would time out here)."""
    from clustertune.serve.tinker import work as work_mod

    monkeypatch.setattr(work_mod, "GAP_WAIT_S", 3600.0)
    work, gate, done = _blocked_work()
    try:
        work.expect("m", 0)
        ids = [work.submit("m", lambda s=s: done.append(s), s) for s in (4, 0, 2)]
        work.pass_over("m", 3)
        work.pass_over("m", 1)
        gate.set()
        for rid in ids:
            work.future(rid).result(30)
        assert done == [0, 2, 4]
        work.pass_over("m", 2)  # already run: nothing changes
        assert work.future(work.submit("m", lambda: done.append(5), 5)).result(30) is None and done[-1] == 5
        for n in range(100):  # ids no client has: nothing is kept for them
            work.pass_over(f"made-up-{n}", n)
        assert set(work._passed) <= {"m"}
    finally:
        work.stop()


def test_a_failing_request_reaches_its_future_and_the_worker_goes_on() -> None:
    work = Work()
    try:
        bad = work.submit("a", lambda: 1 / 0)
        good = work.submit("a", lambda: "fine")
        with pytest.raises(ZeroDivisionError):
            work.future(bad).result(5)
        assert work.future(good).result(5) == "fine"
        assert work.future("no-such-id") is None
    finally:
        work.stop()


def test_the_losses_are_the_documented_sums() -> None:
    logp = torch.tensor([-1.0, -2.0, -0.5])
    w = torch.tensor([1.0, 0.0, 2.0])
    assert losses.datum_loss("cross_entropy", logp, {"weights": w}, None).item() == pytest.approx(2.0)

    old = torch.tensor([-1.5, -2.0, -0.4])
    adv = torch.tensor([1.0, -1.0, 2.0])
    ratio = torch.exp(logp - old)
    expected = -(ratio * adv).sum().item()
    got = losses.datum_loss("importance_sampling", logp, {"logprobs": old, "advantages": adv}, None).item()
    assert got == pytest.approx(expected)

    # PPO clips the ratio (1.65 for the first token) to 1.2 where the advantage is positive.
    clipped = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
    assert losses.datum_loss("ppo", logp, {"logprobs": old, "advantages": adv}, None).item() == pytest.approx(
        -clipped.sum().item())
    wide = losses.datum_loss("ppo", logp, {"logprobs": old, "advantages": adv},
                             {"clip_low_threshold": 0.1, "clip_high_threshold": 10.0}).item()
    assert wide == pytest.approx(expected)


def test_cispo_weighs_each_log_probability_by_the_clipped_ratio_without_its_gradient() -> None:
    """Tinker's CISPO: -sum(sg(clip(ratio, low, high)) * logprobs * advantages), one-sided by
    default (0 and 4); the gradient of a token is its clipped ratio times its advantage."""
    old = torch.tensor([-1.5, -2.0, -0.4, -3.0])
    adv = torch.tensor([1.0, -1.0, 2.0, 0.5])
    for config, (low, high) in ((None, (0.0, 4.0)), ({"clip_low_threshold": 0.8, "clip_high_threshold": 1.2}, (0.8, 1.2))):
        logp = torch.tensor([-1.0, -2.0, -0.5, -1.0], requires_grad=True)
        loss = losses.datum_loss("cispo", logp, {"logprobs": old, "advantages": adv}, config)
        coef = torch.exp(logp.detach() - old).clamp(low, high)
        assert coef[3].item() == pytest.approx(4.0 if config is None else 1.2)  # the last ratio, e^2, is capped either way
        assert loss.item() == pytest.approx(-(coef * logp.detach() * adv).sum().item(), abs=1e-6)
        loss.backward()
        assert logp.grad.tolist() == pytest.approx((-coef * adv).tolist(), abs=1e-6)
    losses.check("cispo", {"clip_low_threshold": 0.0, "clip_high_threshold": 4.0})
    with pytest.raises(losses.LossError, match="clip_ratio: not a setting of 'cispo'.*clip_low_threshold"):
        losses.check("cispo", {"clip_ratio": 0.2})
    with pytest.raises(losses.LossError, match="0 <= clip_low_threshold <= clip_high_threshold"):
        losses.datum_loss("cispo", torch.zeros(2), {"logprobs": torch.zeros(2), "advantages": torch.ones(2)},
                          {"clip_low_threshold": 2.0, "clip_high_threshold": 1.0})


def test_dro_is_the_advantage_weighted_log_probability_less_a_quadratic_penalty() -> None:
    """Tinker's DRO: -sum(logprobs * advantages - beta / 2 * (logprobs - sampling_logprobs)^2); the
    gradient of a token is -(advantage - beta * drift). Without a beta it is refused, naming the key."""
    old = torch.tensor([-1.5, -2.0, -0.4])
    adv = torch.tensor([1.0, -1.0, 2.0])
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    loss = losses.datum_loss("dro", logp, {"logprobs": old, "advantages": adv}, {"beta": 0.5})
    drift = logp.detach() - old
    assert loss.item() == pytest.approx(-(logp.detach() * adv - 0.25 * drift ** 2).sum().item(), abs=1e-6)
    loss.backward()
    assert logp.grad.tolist() == pytest.approx((-(adv - 0.5 * drift)).tolist(), abs=1e-6)
    losses.check("dro", {"beta": 0.05})
    with pytest.raises(losses.LossError, match="'dro' needs loss_fn_config beta"):
        losses.check("dro", None)
    with pytest.raises(losses.LossError, match="beta -1: must be 0 or more"):
        losses.check("dro", {"beta": -1})
    with pytest.raises(losses.LossError, match="clip_low_threshold: not a setting of 'dro' on this server \\(dro takes beta\\)"):
        losses.check("dro", {"beta": 0.1, "clip_low_threshold": 0.5})


def test_gspo_gives_every_token_the_sequence_ratio_with_its_own_gradient() -> None:
    """Tinker's GSPO-token: s = exp(mean log-ratio over the masked tokens); token t's ratio has
    s's value and the gradient of s * logp_t (d/dlogp_t = s), in ppo's pessimistic clipped
    objective, so a sequence whose ratio leaves the bounds stops moving on the side the clip guards."""
    old = torch.tensor([0.0, -1.5, -2.0, -0.4])
    mask = torch.tensor([0.0, 1.0, 1.0, 1.0])  # the first position is the prompt's
    adv = torch.tensor([0.0, 1.0, 1.0, 1.0])
    cases = ((torch.tensor([-3.0, -1.45, -2.0, -0.38]), (0.9, 1.1)),  # s inside the bounds
             (torch.tensor([-3.0, -1.0, -1.5, 0.0]), (0.9, 1.1)))  # s = e^0.467 > 1.1 with A > 0: clipped
    for values, (low, high) in cases:
        logp = values.clone().requires_grad_(True)
        config = {"clip_low_threshold": low, "clip_high_threshold": high}
        loss = losses.datum_loss("gspo", logp, {"logprobs": old, "advantages": adv, "sequence_ratio_mask": mask}, config)
        s = torch.exp((values[1:] - old[1:]).mean())
        inside = low <= s.item() <= high
        kept = s if inside else torch.tensor(high)  # with A > 0 the minimum takes the clipped value above 1 + eps
        assert loss.item() == pytest.approx(-(kept * adv).sum().item(), abs=1e-6)
        loss.backward()
        want = (-s * adv).tolist() if inside else [0.0] * 4  # a clipped ratio passes no gradient
        assert logp.grad.tolist() == pytest.approx(want, abs=1e-6)
    with pytest.raises(losses.LossError, match="'gspo' needs loss_fn_config clip_low_threshold and clip_high_threshold"):
        losses.check("gspo", None)
    with pytest.raises(losses.LossError, match="needs loss_fn_config clip_high_threshold"):
        losses.check("gspo", {"clip_low_threshold": 0.9})
    with pytest.raises(losses.LossError, match="needs loss_fn_inputs sequence_ratio_mask"):
        losses.datum_loss("gspo", torch.zeros(2), {"logprobs": torch.zeros(2), "advantages": torch.ones(2)},
                          {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1})
    with pytest.raises(losses.LossError, match="sequence_ratio_mask'\\] marks no token"):
        losses.datum_loss("gspo", torch.zeros(2), {"logprobs": torch.zeros(2), "advantages": torch.ones(2),
                                                   "sequence_ratio_mask": torch.zeros(2)},
                          {"clip_low_threshold": 0.9, "clip_high_threshold": 1.1})


def test_losses_the_server_does_not_compute_are_named() -> None:
    with pytest.raises(losses.LossError, match="'stable_reinforce' is not implemented"):
        losses.check("stable_reinforce", None)
    with pytest.raises(losses.LossError, match="unknown loss 'xent'"):
        losses.check("xent", None)
    with pytest.raises(losses.LossError, match="clip_ratio: not a setting of 'ppo'"):
        losses.check("ppo", {"clip_ratio": 0.2})
    with pytest.raises(losses.LossError, match="0 < clip_low_threshold <= 1"):
        losses.datum_loss("ppo", torch.zeros(2), {"logprobs": torch.zeros(2), "advantages": torch.ones(2)},
                          {"clip_low_threshold": 1.5})
