"""`clustertune serve --tinker` against the pinned tinker SDK, unchanged, as its client.

Loops written on the SDK alone (no cookbook): a supervised loop lowers the loss; an RL loop
(sampling with log-probabilities, a Python reward, importance sampling) raises the reward and
does not at learning rate 0; sampled log-probabilities are the ones the model computes for the
same tokens; save/load of state continues bit-exactly on CPU; two clients on one base do not
disturb each other; bad requests get the SDK's errors and the server goes on. The server runs
in a thread of the test process on the tiny seeded base.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tinker  # the pinned SDK, from the test extra
from tinker import types

from clustertune.api import serving

KEY = "tml-clustertune-test"
TEXTS = ["def main(): return the class of a tuple and a list",
         "The for statement iterates over the items of any sequence",
         "A class definition defines a class object",
         "The while statement is used for repeated execution"]


class Running:
    def __init__(self, **options: Any):
        self.server = serving.start(None, **{"port": 0, "tinker": True, "device": "cpu", "dtype": "fp32", **options})
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        assert self.server.wait_loaded(60)

    @property
    def url(self) -> str:
        return self.server.served.root_url

    def client(self) -> Any:
        return tinker.ServiceClient(base_url=self.url)

    def stop(self) -> None:
        self.server.stop()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the server did not stop"


@pytest.fixture(scope="module", autouse=True)
def sdk_env() -> Iterator[None]:
    old = {k: os.environ.get(k) for k in ("TINKER_API_KEY", "TINKER_TELEMETRY")}
    os.environ.update(TINKER_API_KEY=KEY, TINKER_TELEMETRY="0")
    yield
    for k, v in old.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    r = Running(tinker_dir=tmp_path_factory.mktemp("tinker-state"))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def service(server: Running) -> Any:
    return server.client()


def supervised_batch(tok: Any) -> list[Any]:
    """One datum per text: every position predicts the next token, each weighted 1/N (a mean)."""
    data = []
    total = sum(len(tok.encode(t)) - 1 for t in TEXTS)
    for text in TEXTS:
        ids = tok.encode(text)
        data.append(types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                                loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0 / total] * (len(ids) - 1)}))
    return data


def train(tc: Any, data: list[Any], steps: int, lr: float = 1e-2) -> list[float]:
    losses = []
    for _ in range(steps):
        fb = tc.forward_backward(data, "cross_entropy")
        step = tc.optim_step(types.AdamParams(learning_rate=lr))
        losses.append(fb.result().metrics["loss:sum"])
        step.result()
    return losses


@pytest.mark.smoke  # one end-to-end check of this backend in `scripts/test.sh --fast`
def test_a_supervised_loop_on_the_sdk_lowers_the_loss(service: Any, chat_base: Path) -> None:
    tc = service.create_lora_training_client(base_model=str(chat_base), rank=8, seed=0).result()
    tok = tc.get_tokenizer()  # loaded by the client, offline, from the id the server reported
    assert tok.encode(TEXTS[0]) == tok.encode(TEXTS[0]) and len(tok) > 500
    data = supervised_batch(tok)

    # forward alone changes nothing: twice the same, and the same as the first forward_backward.
    first = tc.forward(data, "cross_entropy").result()
    again = tc.forward(data, "cross_entropy").result()
    assert first.metrics["loss:sum"] == again.metrics["loss:sum"]
    assert [o["logprobs"].tolist() for o in first.loss_fn_outputs] == [o["logprobs"].tolist() for o in again.loss_fn_outputs]
    assert [len(o["logprobs"].tolist()) for o in first.loss_fn_outputs] == [len(tok.encode(t)) - 1 for t in TEXTS]
    # The loss is the SDK's: the weighted sum of the target log-probabilities, negated.
    manual = -sum(float(np.sum(o["logprobs"].to_numpy() * np.asarray(d.loss_fn_inputs["weights"].to_numpy())))
                  for o, d in zip(first.loss_fn_outputs, data))
    assert first.metrics["loss:sum"] == pytest.approx(manual, rel=1e-5)

    # The SDK's custom losses run on the client over the server's cross_entropy (weights = -dL/dlogp).
    custom = tc.forward_backward_custom(data, lambda d, lps: (sum((-lp * 0.0).sum() for lp in lps),
                                                              {"zero:sum": 0.0})).result()
    assert custom.metrics["zero:sum"] == 0.0 and "surrogate_loss:sum" in custom.metrics

    losses = train(tc, data, 20)
    assert losses[0] == pytest.approx(first.metrics["loss:sum"], rel=1e-6)
    assert losses[-1] <= 0.7 * losses[0], losses


def test_the_server_trains_as_clustertune_run_does(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rows, LoRA, seed and AdamW settings through the SDK loop and through
    `clustertune run` (task sft, its mean over trained tokens given as weights 1/N): the same
    loss at every step. This is benchmarks/tinker_loop.py at its --smoke size, run here through
    its main() (so the benchmark smoke modules do not run it again in a process of its own)."""
    import importlib.util
    import re
    import tempfile

    from tests.integration.benchmark_smoke import left_behind

    spec = importlib.util.spec_from_file_location("tinker_loop", Path(__file__).parents[2] / "benchmarks" / "tinker_loop.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its work folder, to look for what it left
    bench.main(["--smoke"])
    out = capsys.readouterr().out.strip().splitlines()
    rows = [tuple(map(float, line.split()[1:])) for line in out if re.fullmatch(r"\s*\d+\s+[\d.]+\s+[\d.]+", line)]
    assert any(line.startswith("8 rows, 6 steps") for line in out) and len(rows) == 6, out
    run, sdk = [r[0] for r in rows], [r[1] for r in rows]
    assert sdk[-1] < 0.95 * sdk[0]  # it trained
    worst = float(next(line for line in out if line.startswith("largest relative difference")).rsplit(" ", 1)[1])
    assert worst <= 1e-3, list(zip(run, sdk))
    assert out[-1].startswith("ratio=") and float(out[-1].removeprefix("ratio=").split()[0]) > 0, out[-1]
    assert left_behind(tmp_path) == [], "the benchmark's server is still running"


def test_sampled_logprobs_are_the_models_and_a_seed_repeats(service: Any, chat_base: Path) -> None:
    tc = service.create_lora_training_client(base_model=str(chat_base), rank=4, seed=1).result()
    tok = tc.get_tokenizer()
    train(tc, supervised_batch(tok), 3)
    sampler = tc.save_weights_and_get_sampling_client().result()
    prompt = types.ModelInput.from_ints(tok.encode("The for"))
    params = types.SamplingParams(max_tokens=10, temperature=1.0, seed=7, stop=[])
    res = sampler.sample(prompt, 3, params, include_prompt_logprobs=True).result()
    assert len(res.sequences) == 3 and all(len(s.tokens) == 10 and s.stop_reason == "length" for s in res.sequences)
    assert res.prompt_logprobs[0] is None and len(res.prompt_logprobs) == prompt.length
    assert sampler.sample(prompt, 3, params).result().sequences[0].tokens == res.sequences[0].tokens
    for s in res.sequences:
        full = types.ModelInput.from_ints(prompt.to_ints() + s.tokens)
        computed = sampler.compute_logprobs(full).result()
        assert computed[:prompt.length] == pytest.approx(res.prompt_logprobs, abs=1e-4, nan_ok=True)
        assert computed[prompt.length:] == pytest.approx(s.logprobs, abs=1e-4)
    # The sampler holds the weights of when it was made: training on does not change its answers.
    train(tc, supervised_batch(tok), 2)
    assert sampler.sample(prompt, 3, params).result().sequences[0].tokens == res.sequences[0].tokens

    # A stop token ends a sequence with reason "stop"; named sampler weights open as a sampler too.
    path = tc.save_weights_for_sampler("named").result().path
    assert path.endswith("/sampler_weights/named")
    named = service.create_sampling_client(model_path=path).result()
    out = named.sample(prompt, 4, types.SamplingParams(max_tokens=30, temperature=1.0, seed=3,
                                                        stop=[tok.encode(" the")[0]])).result()
    assert any(s.stop_reason == "stop" and s.tokens[-1] == tok.encode(" the")[0] for s in out.sequences)

    # The base alone samples too, and its log-probabilities are not the tuned adapter's.
    base = service.create_sampling_client(base_model=str(chat_base)).result()
    tokens = prompt.to_ints() + res.sequences[0].tokens
    assert base.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[-1] != pytest.approx(
        sampler.compute_logprobs(types.ModelInput.from_ints(tokens)).result()[-1], abs=1e-6)


def rl(service: Any, base: Path, lr: float, iterations: int = 16, loss: str = "importance_sampling",
       config: dict[str, float] | None = None) -> list[float]:
    """A policy-gradient loop: 8 samples per prompt, reward = the share of 'e' in the text,
    advantage = reward minus the prompt's mean, ``loss`` over the sampled tokens.
    Sampling is seeded per iteration and prompt, so the loop gives the same rewards every run."""
    tc = service.create_lora_training_client(base_model=str(base), rank=8, seed=0).result()
    tok = tc.get_tokenizer()
    prompts = [tok.encode(p) for p in ("The", "A list", "def")]
    rewards = []
    for i in range(iterations):
        sampler = tc.save_weights_and_get_sampling_client().result()
        futures = [sampler.sample(types.ModelInput.from_ints(p), 8, types.SamplingParams(
                       max_tokens=12, temperature=1.0, stop=[], seed=100 * i + j))
                   for j, p in enumerate(prompts)]
        data, got = [], []
        for p, fut in zip(prompts, futures):
            seqs = fut.result().sequences
            r = np.array([(lambda t: t.count("e") / max(len(t), 1))(tok.decode(s.tokens)) for s in seqs])
            got.extend(r.tolist())
            for s, adv in zip(seqs, r - r.mean()):
                tokens = p + s.tokens
                pad = [0.0] * (len(p) - 1)
                inputs = {"target_tokens": tokens[1:], "logprobs": pad + list(s.logprobs),
                          "advantages": pad + [float(adv)] * len(s.tokens)}
                if loss == "gspo":  # the sequence's ratio is over its sampled tokens
                    inputs["sequence_ratio_mask"] = pad + [1.0] * len(s.tokens)
                data.append(types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs))
        tc.forward_backward(data, loss, config).result()
        tc.optim_step(types.AdamParams(learning_rate=lr)).result()
        rewards.append(float(np.mean(got)))
    return rewards


def test_an_rl_loop_with_importance_sampling_raises_the_reward(service: Any, chat_base: Path) -> None:
    # Across runs with other sampler seeds the rise was 0.19 to 0.52 and the rise at rate 0 within
    # 0.011 of nothing: 0.1 is ten times the noise and half the smallest rise seen.
    learning = rl(service, chat_base, 2e-2)
    assert np.mean(learning[-5:]) >= np.mean(learning[:5]) + 0.1, learning
    still = rl(service, chat_base, 0.0)
    assert np.mean(still[-5:]) < np.mean(still[:5]) + 0.05, still


def off_policy_datum(service: Any, base: Path) -> tuple[Any, Any, Any, Any, Any]:
    """A fresh client and one RL datum whose sampler log-probabilities are 0.5 nat below the current
    ones on half the tokens and 2 nats below on the rest, with mixed advantages: (client, datum,
    current log-probabilities, sampler ones, advantages), to hold a loss to its formula."""
    import torch

    tc = service.create_lora_training_client(base_model=str(base), rank=4).result()
    ids = tc.get_tokenizer().encode(TEXTS[1])
    n = len(ids) - 1
    ce = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                     loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * n})
    current = torch.tensor(tc.forward([ce], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist())
    old = current - torch.tensor([0.5 if i % 2 else 2.0 for i in range(n)])
    adv = torch.tensor([1.0 if i % 3 else -0.5 for i in range(n)])
    datum = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs={
        "target_tokens": ids[1:], "logprobs": old.tolist(), "advantages": adv.tolist()})
    return tc, datum, current, old, adv


def test_an_rl_loop_with_cispo_raises_the_reward_and_its_loss_is_the_documented_sum(service: Any,
                                                                                     chat_base: Path) -> None:
    learning = rl(service, chat_base, 2e-2, loss="cispo")
    assert np.mean(learning[-5:]) >= np.mean(learning[:5]) + 0.1, learning
    tc, datum, current, old, adv = off_policy_datum(service, chat_base)
    for config, (low, high) in ((None, (0.0, 4.0)), ({"clip_low_threshold": 0.9, "clip_high_threshold": 1.5}, (0.9, 1.5))):
        got = tc.forward([datum], "cispo", config).result().metrics["loss:sum"]
        want = -((current - old).exp().clamp(low, high) * current * adv).sum().item()
        assert got == pytest.approx(want, abs=1e-5 * max(1.0, abs(want))), (config, got, want)


def test_an_rl_loop_with_dro_raises_the_reward_and_its_loss_is_the_documented_sum(service: Any,
                                                                                   chat_base: Path) -> None:
    # DRO's penalty also acts on the prompt positions, whose sampling log-probability the loop pads
    # with 0, pulling them toward probability 1: with beta 0.05 the reward rose 0.083 -> 0.174 over
    # the first and last five iterations, with beta 0.01 0.080 -> 0.38 (seeded sampling).
    learning = rl(service, chat_base, 2e-2, loss="dro", config={"beta": 0.01})
    assert np.mean(learning[-5:]) >= np.mean(learning[:5]) + 0.1, learning
    tc, datum, current, old, adv = off_policy_datum(service, chat_base)
    got = tc.forward([datum], "dro", {"beta": 0.3}).result().metrics["loss:sum"]
    want = -(current * adv - 0.15 * (current - old) ** 2).sum().item()
    assert got == pytest.approx(want, abs=1e-5 * max(1.0, abs(want)))
    with pytest.raises(tinker.RequestFailedError, match="'dro' needs loss_fn_config beta"):
        tc.forward([datum], "dro").result()


def test_an_rl_loop_with_gspo_raises_the_reward_and_its_loss_is_the_documented_sum(service: Any,
                                                                                    chat_base: Path) -> None:
    import torch

    learning = rl(service, chat_base, 2e-2, loss="gspo", config={"clip_low_threshold": 0.8, "clip_high_threshold": 1.2})
    assert np.mean(learning[-5:]) >= np.mean(learning[:5]) + 0.1, learning
    tc, datum, current, old, adv = off_policy_datum(service, chat_base)
    n = len(current)
    mask = [0.0] * 3 + [1.0] * (n - 3)
    datum = types.Datum(model_input=datum.model_input,
                        loss_fn_inputs={**datum.loss_fn_inputs, "sequence_ratio_mask": mask})
    seq = (current - old)[3:].mean().exp()  # the sequence's ratio over the marked tokens, about e^1.25
    for low, high in ((0.5, 4.0), (0.9, 1.5)):  # inside the bounds, then clipped at 1.5
        got = tc.forward([datum], "gspo", {"clip_low_threshold": low, "clip_high_threshold": high}).result()
        want = -torch.minimum(seq * adv, seq.clamp(low, high) * adv).sum().item()
        assert got.metrics["loss:sum"] == pytest.approx(want, abs=1e-5 * max(1.0, abs(want))), (low, high)
    with pytest.raises(tinker.RequestFailedError, match="'gspo' needs loss_fn_config clip_low_threshold"):
        tc.forward([datum], "gspo").result()


def test_ppo_clips_the_ratio_and_importance_sampling_does_not(service: Any, chat_base: Path) -> None:
    """Sampler log-probabilities one nat below the current ones: ratio e on every token, with
    advantage 1. importance_sampling sums -e per token; ppo clips it to 1.2 (or to a wider
    threshold given in loss_fn_config)."""
    import math

    tc = service.create_lora_training_client(base_model=str(chat_base), rank=4).result()
    ids = tc.get_tokenizer().encode(TEXTS[1])
    n = len(ids) - 1
    ce = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                     loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * n})
    current = tc.forward([ce], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    rl_datum = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs={
        "target_tokens": ids[1:], "logprobs": [x - 1.0 for x in current], "advantages": [1.0] * n})
    assert tc.forward([rl_datum], "importance_sampling").result().metrics["loss:sum"] == pytest.approx(-math.e * n, rel=1e-4)
    assert tc.forward([rl_datum], "ppo").result().metrics["loss:sum"] == pytest.approx(-1.2 * n, rel=1e-5)
    wide = tc.forward([rl_datum], "ppo", {"clip_low_threshold": 0.5, "clip_high_threshold": 2.0}).result()
    assert wide.metrics["loss:sum"] == pytest.approx(-2.0 * n, rel=1e-5)


def test_state_round_trips_bit_exactly_and_clients_do_not_disturb_each_other(service: Any, chat_base: Path) -> None:
    a = service.create_lora_training_client(base_model=str(chat_base), rank=8, seed=3).result()
    data = supervised_batch(a.get_tokenizer())
    train(a, data, 3)
    path = a.save_state("after-3").result().path
    assert path == f"tinker://{a.model_id}/weights/after-3"
    before_b = a.forward(data, "cross_entropy").result().metrics["loss:sum"]

    # Another client on the same base trains hard; the first's weights and gradients stay its own.
    b = service.create_lora_training_client(base_model=str(chat_base), rank=8, seed=4).result()
    b.forward_backward(data, "cross_entropy").result()  # gradients left pending in b
    train(b, data, 3, lr=5e-2)
    assert a.forward(data, "cross_entropy").result().metrics["loss:sum"] == before_b
    continued = train(a, data, 3)

    # Loading the state (weights and Adam's moments) and training on gives the same numbers.
    b.load_state_with_optimizer(path).result()
    assert train(b, data, 3) == continued
    c = service.create_training_client_from_state_with_optimizer(path).result()
    assert train(c, data, 3) == continued
    # Weights alone: the same start, a fresh optimizer.
    d = service.create_training_client_from_state(path).result()
    assert d.forward(data, "cross_entropy").result().metrics["loss:sum"] == before_b

    rest = service.create_rest_client()
    listed = [c.tinker_path for c in rest.list_checkpoints(a.model_id).result().checkpoints]
    assert path in listed
    info = rest.get_weights_info_by_tinker_path(path).result()
    assert info.lora_rank == 8 and info.base_model == str(chat_base)
    assert rest.get_training_run(a.model_id).result().base_model == str(chat_base)
    session = rest.get_session(a.model_id.split(":train:")[0]).result()
    assert {a.model_id, b.model_id} <= set(session.training_run_ids)
    rest.delete_checkpoint_from_tinker_path(path).result()
    assert path not in [c.tinker_path for c in rest.list_checkpoints(a.model_id).result().checkpoints]


def test_clients_of_other_ranks_and_a_sampler_at_once_each_get_their_numbers_alone(service: Any,
                                                                                   chat_base: Path) -> None:
    """Two training clients of different LoRA ranks and a sampling client, each driven from its own
    thread so their requests interleave on the one base: every number equals the same client's
    run alone (the server does one request at a time and switches adapters between them)."""
    tok = service.create_lora_training_client(base_model=str(chat_base), rank=2, seed=0).result().get_tokenizer()
    data = supervised_batch(tok)
    prompt = types.ModelInput.from_ints(tok.encode("The for"))
    params = types.SamplingParams(max_tokens=8, temperature=1.0, seed=11, stop=[])
    maker = service.create_lora_training_client(base_model=str(chat_base), rank=4, seed=9).result()
    train(maker, data, 2)
    sampler = maker.save_weights_and_get_sampling_client().result()

    def client(rank: int, seed: int) -> Any:
        return service.create_lora_training_client(base_model=str(chat_base), rank=rank, seed=seed).result()

    def samples() -> list[list[int]]:
        return [list(sampler.sample(prompt, 2, params).result().sequences[i].tokens) for _ in range(4) for i in range(2)]

    alone = {"r4": train(client(4, 21), data, 5), "r16": train(client(16, 22), data, 5), "sampler": samples()}
    a, b = client(4, 21), client(16, 22)
    together: dict[str, Any] = {}
    jobs = {"r4": lambda: train(a, data, 5), "r16": lambda: train(b, data, 5), "sampler": samples}
    threads = [threading.Thread(target=lambda k=k: together.__setitem__(k, jobs[k]())) for k in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert together == alone
    assert alone["r4"] != alone["r16"]  # the ranks differ, so their numbers do: the check can fail


def test_bad_requests_get_the_sdks_errors_and_the_server_goes_on(service: Any, chat_base: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # A refused request used up its seq_id: the client's next request runs at once, never after the
    # wait for a request that went missing (an hour here, so a refusal that holds the queue fails
    # the result(60) below instead of costing a few seconds unseen).
    from clustertune.serve.tinker import work as work_mod

    monkeypatch.setattr(work_mod, "GAP_WAIT_S", 3600.0)
    tc = service.create_lora_training_client(base_model=str(chat_base), rank=4).result(60)
    tok = tc.get_tokenizer()
    ids = tok.encode(TEXTS[0])

    def datum(**inputs: Any) -> Any:
        return types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]), loss_fn_inputs=inputs)

    with pytest.raises(tinker.RequestFailedError, match="one target per input position") as e:
        tc.forward_backward([datum(target_tokens=ids[1:-1], weights=[1.0] * (len(ids) - 2))], "cross_entropy").result(60)
    assert e.value.category == "user"
    with pytest.raises(tinker.RequestFailedError, match=r"loss_fn_inputs\['weights'\] has shape"):
        tc.forward_backward([datum(target_tokens=ids[1:], weights=[1.0, 2.0])], "cross_entropy").result(60)
    with pytest.raises(tinker.RequestFailedError, match="'stable_reinforce' is not implemented"):
        tc.forward_backward([datum(target_tokens=ids[1:], weights=[1.0] * (len(ids) - 1))], "stable_reinforce").result(60)
    with pytest.raises(tinker.RequestFailedError, match="needs loss_fn_inputs advantages"):
        tc.forward_backward([datum(target_tokens=ids[1:], logprobs=[0.0] * (len(ids) - 1))],
                            "importance_sampling").result(60)
    # A NaN never reaches the gradients: refused at the edge, naming the datum and the field.
    with pytest.raises(tinker.BadRequestError, match=r"datum 0: loss_fn_inputs\['weights'\] holds nan"):
        tc.forward_backward([datum(target_tokens=ids[1:], weights=[float("nan")] * (len(ids) - 1))],
                            "cross_entropy").result(60)
    with pytest.raises(tinker.RequestFailedError, match="outside the vocabulary"):
        tc.forward_backward([datum(target_tokens=[10**6] * (len(ids) - 1), weights=[1.0] * (len(ids) - 1))],
                            "cross_entropy").result(60)
    # Dimuon is refused by name when the client is made, not at its first step; so are its steps.
    with pytest.raises(tinker.RequestFailedError, match="optimizer_config type 'dimuon'.*not fully published"):
        service.create_lora_training_client(base_model=str(chat_base), rank=4,
                                            optimizer=types.DimuonOptimizerConfig()).result(60)
    with pytest.raises(tinker.RequestFailedError, match="optim_step with 'dimuon' parameters.*AdamParams"):
        tc.optim_step(types.DimuonParams(learning_rate=1e-3)).result(60)
    with pytest.raises(tinker.RequestFailedError, match="base_model 'no/such-model'"):
        service.create_lora_training_client(base_model="no/such-model", rank=4).result(60)
    with pytest.raises(tinker.RequestFailedError, match="no such checkpoint"):
        tc.load_state(f"tinker://{tc.model_id}/weights/never-saved").result(60)
    sampler = tc.save_weights_and_get_sampling_client().result(60)
    with pytest.raises(tinker.RequestFailedError, match="topk_prompt_logprobs 100000: from 0 to the vocabulary"):
        sampler.sample(types.ModelInput.from_ints(ids[:3]), 1, types.SamplingParams(max_tokens=2),
                       topk_prompt_logprobs=100000).result(60)
    with pytest.raises(tinker.BadRequestError, match="sampling_params.max_tokens"):
        sampler.sample(types.ModelInput.from_ints(ids[:3]), 1, types.SamplingParams(max_tokens=0)).result(60)
    tail = sampler.compute_logprobs(types.ModelInput.from_ints(ids), prompt_logprobs_last_n=2).result(60)
    assert tail[:-2] == [None] * (len(ids) - 2) and None not in tail[-2:]
    with pytest.raises(tinker.BadRequestError, match="not supported by this server"):
        service.create_rest_client().publish_checkpoint_from_tinker_path(
            f"tinker://{tc.model_id}/weights/x").result(60)
    # After all that the client trains as before.
    losses = train(tc, supervised_batch(tok), 2)
    assert losses[1] < losses[0]


def test_topk_prompt_logprobs_are_the_models_own_top_k(service: Any, chat_base: Path) -> None:
    """The k likeliest tokens of the model's log-softmax at each prompt position, likeliest
    first (none at the first position), against a direct computation; also cut to the last N."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(chat_base).encode(TEXTS[0])
    on_base = service.create_sampling_client(base_model=str(chat_base)).result()
    res = on_base.sample(types.ModelInput.from_ints(ids), 1, types.SamplingParams(max_tokens=1),
                         topk_prompt_logprobs=3).result()
    model = AutoModelForCausalLM.from_pretrained(chat_base)
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), dim=-1)
    values, indices = torch.topk(lp, 3, dim=-1)
    got = res.topk_prompt_logprobs
    assert got[0] is None and len(got) == len(ids)
    assert [[tok for tok, _ in row] for row in got[1:]] == indices.tolist()
    assert [v for row in got[1:] for _, v in row] == pytest.approx(values.flatten().tolist(), abs=1e-5)
    tail = on_base.sample(types.ModelInput.from_ints(ids), 1, types.SamplingParams(max_tokens=1),
                          topk_prompt_logprobs=2, include_prompt_logprobs=True, prompt_logprobs_last_n=2).result()
    assert tail.topk_prompt_logprobs[:-2] == [None] * (len(ids) - 2)
    assert [[tok for tok, _ in row] for row in tail.topk_prompt_logprobs[-2:]] == indices[-2:, :2].tolist()


def test_topk_sample_logprobs_are_the_top_k_each_token_was_drawn_from(service: Any, chat_base: Path) -> None:
    """Per sampled token, the k likeliest tokens of the model's log-softmax it was drawn from,
    against a direct computation over the prompt and the tokens before it; none when not asked."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = AutoTokenizer.from_pretrained(chat_base).encode(TEXTS[0])[:8]
    on_base = service.create_sampling_client(base_model=str(chat_base)).result()
    params = types.SamplingParams(max_tokens=5, temperature=1.0, seed=7, stop=[])
    res = on_base.sample(types.ModelInput.from_ints(ids), 2, params, topk_sample_logprobs=4).result()
    model = AutoModelForCausalLM.from_pretrained(chat_base)
    for seq in res.sequences:
        with torch.no_grad():
            logits = model(torch.tensor([ids + seq.tokens])).logits[0].float()
        lp = torch.log_softmax(logits[len(ids) - 1:-1], dim=-1)  # the distributions the tokens were drawn from
        values, indices = torch.topk(lp, 4, dim=-1)
        assert len(seq.topk_logprobs) == len(seq.tokens) == 5
        assert [[tok for tok, _ in row] for row in seq.topk_logprobs] == indices.tolist()
        assert [v for row in seq.topk_logprobs for _, v in row] == pytest.approx(values.flatten().tolist(), abs=1e-4)
        assert all(lp_t <= row[0][1] + 1e-5 for lp_t, row in zip(seq.logprobs, seq.topk_logprobs))
    plain = on_base.sample(types.ModelInput.from_ints(ids), 2, params).result()
    assert [s.topk_logprobs for s in plain.sequences] == [None, None]
    assert [s.tokens for s in plain.sequences] == [s.tokens for s in res.sequences]  # asking changes no draw


def test_every_base_spelling_survives_the_sdk(quickstart_cli_run: Any, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch, chat_base: Path) -> None:
    """A run id, a run's name, its model directory and a hub name in the local cache each make a
    training client whose tokenizer the SDK loads offline; the four share one base in memory."""
    import shutil

    from huggingface_hub import constants

    from clustertune.runs.store import list_runs

    assert quickstart_cli_run.result.returncode == 0
    run = next(r for r in list_runs(quickstart_cli_run.runs_root) if r.info.name == "quickstart")
    cache = tmp_path / "hub"
    snap = cache / "models--tiny--chat" / "snapshots" / ("c" * 40)
    shutil.copytree(chat_base, snap)
    (cache / "models--tiny--chat" / "refs").mkdir()
    (cache / "models--tiny--chat" / "refs" / "main").write_text("c" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))

    r = Running(runs_root=quickstart_cli_run.runs_root, tinker_dir=tmp_path / "state")
    try:
        sc = r.client()
        ids = []
        for spelling in (run.id, "quickstart", str(run.paths.model), "tiny/chat"):
            tc = sc.create_lora_training_client(base_model=spelling, rank=4).result()
            tok = tc.get_tokenizer()
            assert tok.decode(tok.encode("def main():")) == "def main():", spelling
            assert tc.get_info().model_data.model_name == spelling
            ids.append(tc.model_id)
        assert len(set(ids)) == 4
        assert len(r.server.tinker.bases) == 2  # the run's model once (three spellings), the hub model once
    finally:
        r.stop()


def test_the_cli_serves_a_model_and_the_tinker_api_behind_one_key(chat_base: Path, tmp_path: Path) -> None:
    """`clustertune serve MODEL --tinker --api-key K`: OpenAI's routes and the Tinker API on one
    port, both behind the key; SIGTERM ends it with exit 0."""
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    exe = Path(sys.executable).with_name("clustertune")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([str(exe), "serve", str(chat_base), "--tinker", "--tinker-dir", str(tmp_path / "state"),
                             "--port", "0", "--device", "cpu", "--dtype", "fp32", "--api-key", KEY],
                            stderr=(tmp_path / "serve.err").open("w"), text=True, env=env)
    said = (tmp_path / "serve.err").read_text  # the server's own words, whole, when a check fails
    try:
        deadline = time.monotonic() + 120
        while "Tinker API at" not in said() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        url = re.search(r"Tinker API at (http://\S+):", said())
        assert url, said()
        tc = tinker.ServiceClient(base_url=url.group(1)).create_lora_training_client(
            base_model=str(chat_base), rank=4).result()
        assert train(tc, supervised_batch(tc.get_tokenizer()), 1)[0] > 0, said()
        with pytest.raises(tinker.AuthenticationError):
            tinker.ServiceClient(base_url=url.group(1), api_key="tml-wrong").create_lora_training_client(
                base_model=str(chat_base), rank=4).result()
        request = urllib.request.Request(url.group(1) + "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert chat_base.name in resp.read().decode()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, said()
        assert (tmp_path / "state" / tc.model_id / "model.json").is_file()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_server_on_an_ssh_host_through_the_local_proxy(chat_base: Path, ssh_cluster: Any, sshd_service: Any,
                                                          tmp_path: Path) -> None:
    """`clustertune serve --tinker launch.backend=ssh`: the server runs on the host (its
    checkpoints in the host's copy of the run directory), the SDK talks to 127.0.0.1:PORT here,
    and get_info reports a tokenizer copied into this machine's cache (the host's path is not
    given to the client: it loads the copy)."""
    import re
    import socket
    import sys

    from tests.helpers import cli

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client_cache = tmp_path / "client-cache"
    proc, head = _foreground(["serve", "--tinker", "launch.backend=ssh", "launch.cluster=loop",
                              f"launch.site_packages_from={sys.executable}", "--device", "cpu", "--dtype", "fp32",
                              "--port", str(port)], "Tinker API at", 180, CLUSTERTUNE_CACHE=str(client_cache))
    try:
        found = re.search(r"^run (\S+): Tinker API at (http://127\.0\.0\.1:(\d+)) \(forwarded to", head, re.M)
        assert found and int(found.group(3)) == port, head
        run_id = found.group(1)

        tc = tinker.ServiceClient(base_url=found.group(2)).create_lora_training_client(
            base_model=str(chat_base), rank=4, seed=0).result()
        tokenizer_id = Path(tc.get_info().model_data.tokenizer_id)
        assert tokenizer_id.is_relative_to(client_cache / "tinker-tokenizers"), tokenizer_id
        assert (tokenizer_id / "tokenizer_config.json").is_file()
        assert not list(tokenizer_id.glob("*.safetensors"))  # the tokenizer travelled, not the weights
        losses = train(tc, supervised_batch(tc.get_tokenizer()), 4)
        assert losses[-1] < losses[0]
        path = tc.save_state("on-the-host").result().path
        from clustertune.runs.paths import HostRunPaths

        host_run = Path(HostRunPaths(str(sshd_service.hosts[0].root / tmp_path.name), run_id).run_dir)
        assert (host_run / "tinker" / tc.model_id / "weights" / "on-the-host" / "adapter_model.safetensors").is_file(), path

        assert cli("cancel", run_id).returncode == 0
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_restarted_server_carries_its_clients_on_where_they_were(chat_base: Path, tmp_path: Path) -> None:
    """A server stopped (SIGTERM, a requeued job) saves each client's weights and Adam state; one
    started again over the same directory and port serves the same client, whose next steps
    give the numbers an uninterrupted run gives."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    first = Running(tinker_dir=tmp_path / "state", port=port)
    sc = first.client()
    tc = sc.create_lora_training_client(base_model=str(chat_base), rank=8, seed=5).result()
    data = supervised_batch(tc.get_tokenizer())
    before = train(tc, data, 3)
    first.stop()
    assert (tmp_path / "state" / tc.model_id / "weights" / "server-stop" / "optimizer.pt").is_file()

    second = Running(tinker_dir=tmp_path / "state", port=port)
    try:
        after = train(tc, data, 3)  # the same client object, its session and model id
        sampler = tc.save_weights_and_get_sampling_client().result()
        assert len(sampler.sample(types.ModelInput.from_ints([1, 2]), 1, types.SamplingParams(max_tokens=3)).result()
                   .sequences[0].tokens) == 3
        fresh = second.client().create_lora_training_client(base_model=str(chat_base), rank=8, seed=5).result()
        assert before + after == train(fresh, data, 6)
    finally:
        second.stop()


@pytest.mark.usefixtures("slurm_cluster")
def test_as_a_slurm_job_the_client_is_carried_over_a_requeue(chat_base: Path, runs_root: Path, tmp_path: Path) -> None:
    """`clustertune serve --tinker launch.backend=slurm`: the SDK talks to one local address; the
    job is preempted (USR2, as before a time limit) and requeued, its server comes back on a new
    port, and the client's next calls (made during the gap) are carried over it by the SDK's
    retries and the proxy, with the numbers of a run that was never interrupted."""
    import re
    import socket
    import subprocess
    import time

    from clustertune.runs.run import Run
    from tests.helpers import cli

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, head = _foreground(["serve", "--tinker", "launch.backend=slurm", "launch.cpus_per_task=1", "--device", "cpu",
                              "--dtype", "fp32", "--port", str(port)], "Tinker API at", 240)
    try:
        found = re.search(r"^run (\S+): Tinker API at (http://127\.0\.0\.1:(\d+)) \(the job on", head, re.M)
        assert found, head
        run = Run.load(runs_root / found.group(1))
        first_port = json_port(run)

        tc = tinker.ServiceClient(base_url=found.group(2)).create_lora_training_client(
            base_model=str(chat_base), rank=8, seed=6).result()
        data = supervised_batch(tc.get_tokenizer())
        before = train(tc, data, 3)
        subprocess.run(["scancel", "--signal=USR2", "--batch", run.attempts[-1].job_id], check=True, timeout=30)
        deadline = time.monotonic() + 60
        while True:  # until the first server has stopped: the next calls fall into the gap
            try:
                socket.create_connection(("127.0.0.1", first_port), timeout=1).close()
            except OSError:
                break
            assert time.monotonic() < deadline, "the job's server did not stop on USR2"
            time.sleep(0.2)
        after = train(tc, data, 3)  # sent while the job requeues and starts again
        run.reload()
        assert len(run.attempts) >= 2 and run.attempts[0].state.value == "PREEMPTED", run.attempts
        assert json_port(run) != first_port or run.attempts[-1].started_at != run.attempts[0].started_at

        local = Running(tinker_dir=tmp_path / "local")
        try:
            fresh = local.client().create_lora_training_client(base_model=str(chat_base), rank=8, seed=6).result()
            assert before + after == train(fresh, data, 6)
        finally:
            local.stop()
        assert cli("cancel", run.id).returncode == 0
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def json_port(run: Any) -> int:
    import json

    return int(json.loads(run.paths.serve_address.read_text())["port"])


def _cli_server(port: int, state: Path, *extra: str) -> Any:
    import re
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "serve", "--tinker", "--tinker-dir", str(state), "--port", str(port),
                             "--device", "cpu", "--dtype", "fp32", *extra],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines: list[str] = []
    while not any("Tinker API at" in line for line in lines) and len(lines) < 20 and proc.poll() is None:
        lines.append(proc.stderr.readline())
    assert re.search(r"Tinker API at http://127\.0\.0\.1:\d+", "".join(lines)), lines
    return proc


def test_a_killed_server_says_what_its_clients_lost_and_their_autosave_resumes(chat_base: Path, tmp_path: Path) -> None:
    """kill -9 of `clustertune serve --tinker --tinker-save-every 2` after 3 steps, then the
    server started again over its directory: the client's next request is refused, naming the
    autosave of step 2 (not trained on from a state the client never had); a client created
    from it trains on with the numbers of an uninterrupted client from step 2."""
    import signal
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = _cli_server(port, tmp_path / "state", "--tinker-save-every", "2")
    try:
        sc = tinker.ServiceClient(base_url=url)
        tc = sc.create_lora_training_client(base_model=str(chat_base), rank=8, seed=7).result()
        data = supervised_batch(tc.get_tokenizer())
        first = train(tc, data, 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc = _cli_server(port, tmp_path / "state")
        autosave = f"tinker://{tc.model_id}/weights/autosave"
        with pytest.raises(tinker.RequestFailedError, match="was killed") as e:
            tc.forward_backward(data, "cross_entropy").result()
        assert autosave in str(e.value)
        resumed = sc.create_training_client_from_state_with_optimizer(autosave).result()
        again = train(resumed, data, 2)
        fresh = sc.create_lora_training_client(base_model=str(chat_base), rank=8, seed=7).result()
        assert train(fresh, data, 4) == first[:2] + again

        # Stopped properly (its state saved), started again, trained on, killed: the state it
        # comes back with is older than the client's, and the server says so.
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        proc = _cli_server(port, tmp_path / "state")
        train(resumed, data, 1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc = _cli_server(port, tmp_path / "state")
        with pytest.raises(tinker.RequestFailedError, match=r"came back with its state as of request 4 \(step 4\); this is request 7: the server was killed"):
            resumed.forward(data, "cross_entropy").result()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def _foreground(argv: list[str], marker: str, timeout: float, **env: str) -> tuple[Any, str]:
    """A `clustertune` command that stays in the foreground, once its output shows ``marker``:
    the process and what it printed so far."""
    import queue
    import subprocess
    import sys
    import time

    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", **env})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not any(marker in x for x in seen):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"no {marker!r} from clustertune {' '.join(argv)}:\n{''.join(seen)}")
        try:
            seen.append(lines.get(timeout=1))
        except queue.Empty:
            pass
    return proc, "".join(seen)


@pytest.mark.usefixtures("slurm_cluster")
def test_a_taken_local_port_cancels_the_job_it_would_have_reached(runs_root: Path) -> None:
    import socket
    import time

    from clustertune.runs.run import Run
    from tests.helpers import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        out = cli("serve", "--tinker", "launch.backend=slurm", "launch.cpus_per_task=1", "--device", "cpu",
                  "--port", str(taken.getsockname()[1]), timeout=240)
    assert out.returncode == 2 and "cannot listen there" in out.stderr, out.stdout + out.stderr
    run = Run.load(next(runs_root.iterdir()))
    deadline = time.monotonic() + 60
    while run.reload().state.value != "CANCELLED":
        assert time.monotonic() < deadline, run.state
        time.sleep(0.5)
