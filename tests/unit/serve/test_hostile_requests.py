"""Requests that once made either server answer 500 (or log a traceback, or stop answering), each
now refused with a 4xx naming the field, or answered: found by the fuzz tests (test_fuzz.py) and
by reading the code they pointed at. In-process, on the tiny chat model and a Tinker service."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
import zstandard
from tinker.proto import tinker_public_pb2 as pb

from clustertune.errors import ModelError
from clustertune.serve.app import make_app
from clustertune.serve.engine import Engine, Limits
from clustertune.serve.protocol import ApiError, check_sampling, read_chat
from clustertune.serve.tinker import forward, lora, sampling, wire
from clustertune.serve.tinker.lora import Base, LoraSpec, TinkerUserError
from clustertune.serve.tinker.service import TinkerService
from clustertune.use.generate import Generator
from clustertune.use.load import find_target, load_for_use

PROTOBUF = {"Content-Type": wire.PROTOBUF}


def exchange(app: Any, *calls: tuple[str, str, Any, dict[str, Any]]) -> list[httpx.Response]:
    """Each (method, path, body, headers) sent in turn; an exception out of the app fails the test."""
    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            out = []
            for method, path, body, headers in calls:
                content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
                out.append(await client.request(method, path, content=content, headers=headers))
            return out
    return asyncio.run(go())


def post(path: str, body: Any, **headers: Any) -> tuple[str, str, Any, dict[str, Any]]:
    return "POST", path, body, headers


# -- OpenAI's routes --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine(chat_base: Path) -> Iterator[Engine]:
    e = Engine(lambda: Generator(load_for_use(str(chat_base), device="cpu", dtype="fp32")), "chat",
               Limits(running=2, waiting=2, max_tokens=4))
    e.load()
    assert e.ready, e.failed
    yield e
    e.close()


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, **extra}


def test_an_unknown_field_named_with_a_lone_surrogate_is_a_400_that_quotes_it(engine: Engine) -> None:
    # JSON's "\ud800" reads as half a surrogate pair, which UTF-8 cannot carry: the refusal that
    # names the field could not be written (a 500) until answers escaped it back.
    [r] = exchange(make_app(engine), post("/v1/chat/completions", b'{"model": "chat", "messages": '
                                          b'[{"role": "user", "content": "hi"}], "\\ud800x": 1}'))
    assert r.status_code == 400 and r.json()["error"]["param"] == "\ud800x", r.text
    assert b"\\ud800x" in r.content


def test_a_prompt_or_message_with_a_lone_surrogate_is_a_400_naming_it(engine: Engine) -> None:
    # The tokenizer raised TypeError on such a text.
    bodies = [("/v1/completions", b'{"model": "chat", "prompt": "a\\udfffb"}', "prompt"),
              ("/v1/chat/completions", b'{"model": "chat", "messages": [{"role": "user", "content": "\\ud800"}]}',
               "messages[0].content"),
              ("/v1/chat/completions", b'{"model": "chat", "messages": [{"role": "user", "content": '
                                       b'[{"type": "text", "text": "ok"}, {"type": "text", "text": "\\ud83d"}]}]}',
               "messages[0].content[1].text")]
    answers = exchange(make_app(engine), *[post(path, body) for path, body, _ in bodies])
    for r, (_, _, param) in zip(answers, bodies):
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        assert "surrogate" in r.json()["error"]["message"]
    # A whole character written as its surrogate pair is text like any other.
    assert read_chat(json.loads(b'{"model": "m", "messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'))


def test_json_nested_too_deeply_is_a_400_on_both_apis(engine: Engine, tmp_path: Path) -> None:
    # json.loads raised RecursionError, which no handler took for a user error.
    deep = b"[" * 5000 + b"]" * 5000
    service = TinkerService(tmp_path / "state")
    try:
        openai, tinker = exchange(make_app(engine, tinker=service),
                                  post("/v1/chat/completions", b'{"model": "chat", "messages": ' + deep + b"}"),
                                  post("/api/v1/create_session", b'{"tags": ' + deep + b"}"))
    finally:
        service.close()
    assert openai.status_code == 400 and "nested too deeply" in openai.json()["error"]["message"], openai.text
    assert tinker.status_code == 400 and "nested too deeply" in tinker.json()["error"], tinker.text


@pytest.mark.parametrize("field,value", [("temperature", 10**400), ("top_p", -(10**400)), ("temperature", 2**1024)])
def test_a_whole_number_past_floats_range_is_a_400_not_an_overflow(field: str, value: int) -> None:
    # math.isfinite converts its argument to a float first: OverflowError, a 500.
    with pytest.raises(ApiError) as e:
        check_sampling({field: value})
    assert e.value.status == 400 and e.value.param == field and "characters)" in e.value.message


def test_a_temperature_too_small_to_divide_by_is_greedy_and_the_batch_lives_on(engine: Engine) -> None:
    # 1e-300 divided the logits into infinities and NaN probabilities: the batch's thread died,
    # every later request was a 500, and /health still said "ok". With a seed (drawn alone by
    # generate) it was a RuntimeError.
    assert check_sampling({"temperature": 5e-324}).temperature == 0.0
    assert check_sampling({"temperature": 1e-5}).temperature == 1e-5
    greedy, tiny, seeded, after, health = exchange(
        make_app(engine), post("/v1/chat/completions", chat(temperature=0)),
        post("/v1/chat/completions", chat(temperature=1e-300)),
        post("/v1/chat/completions", chat(temperature=5e-324, seed=3)),
        post("/v1/chat/completions", chat(temperature=0.8)), ("GET", "/health", None, {}))
    assert [r.status_code for r in (greedy, tiny, seeded, after)] == [200] * 4, [greedy.text, tiny.text, seeded.text]
    text = greedy.json()["choices"][0]["message"]["content"]
    assert tiny.json()["choices"][0]["message"]["content"] == seeded.json()["choices"][0]["message"]["content"] == text
    assert health.json()["status"] == "ok"


def test_health_says_failed_once_the_batch_has_stopped(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine._manager, "is_running", lambda: False)
    [health] = exchange(make_app(engine), ("GET", "/health", None, {}))
    assert health.status_code == 500 and health.json()["status"] == "failed", health.text
    assert health.json()["error"].startswith("the batch stopped")


def test_several_greedy_answers_drawn_alone_are_the_same_answer(engine: Engine) -> None:
    # A seed or log-probabilities with temperature 0 and n > 1: generate refused to draw greedy
    # answers more than once (ValueError, a 500).
    seeded, with_logprobs = exchange(make_app(engine), post("/v1/chat/completions", chat(temperature=0, n=3, seed=1)),
                                     post("/v1/completions", {"model": "chat", "prompt": "The for", "n": 2,
                                                              "temperature": 0, "logprobs": 1, "max_tokens": 3}))
    assert seeded.status_code == 200 and with_logprobs.status_code == 200, (seeded.text, with_logprobs.text)
    texts = [c["message"]["content"] for c in seeded.json()["choices"]]
    assert len(texts) == 3 and len(set(texts)) == 1
    first, second = with_logprobs.json()["choices"]
    assert first["text"] == second["text"] and first["logprobs"] == second["logprobs"]


def test_a_content_length_written_in_other_digits_is_no_crash(engine: Engine) -> None:
    # "²" is a digit to str.isdigit and not to int(): a ValueError, a 500.
    [r] = exchange(make_app(engine), post("/v1/completions", {"model": "chat", "prompt": "hi", "max_tokens": 1},
                                          **{"Content-Length": b"\xb2"}))
    assert r.status_code < 500, r.text


# -- the Tinker API ---------------------------------------------------------------------------------

@pytest.fixture
def tinker(tmp_path: Path) -> Iterator[Any]:
    """A Tinker service without a base loaded: everything here is refused before the worker."""
    service = TinkerService(tmp_path / "state", runs_root=str(tmp_path / "runs"))
    sid = service.create_session({})["session_id"]
    yield make_app(None, tinker=service), service, sid
    service.close()


def refusal(app: Any, service: TinkerService, route: str, body: Any, headers: dict[str, Any] | None = None) -> str:
    """The refusal's message: a 4xx at once, or the ``user`` error of the queued request."""
    [r] = exchange(app, post(f"/api/v1/{route}", body, **(headers or {"Content-Type": "application/json"})))
    if r.status_code == 200 and "request_id" in r.json():
        value = service.work.future(r.json()["request_id"]).result(30)
        assert value[0] == "error" and value[1]["category"] == "user", value
        return value[1]["error"]
    assert 400 <= r.status_code < 500, r.text
    return r.json()["error"]


def test_ids_and_counters_of_the_wrong_type_are_refused_naming_the_field(tinker: Any) -> None:
    # int() of a string, a list, NaN or Infinity, and .get on a list or a number: 500s before.
    app, service, sid = tinker
    sample = {"sampling_session_id": f"{sid}:sample:0", "num_samples": 1, "seq_id": 1,
              "prompt": {"chunks": [{"type": "encoded_text", "tokens": [1, 2]}]}, "sampling_params": {"max_tokens": 2}}
    cases = [
        ("create_model", {"session_id": sid, "model_seq_id": "x", "base_model": "b"}, "model_seq_id"),
        ("create_model", {"session_id": sid, "model_seq_id": math.inf, "base_model": "b"}, "model_seq_id"),
        ("create_model", {"session_id": sid, "base_model": "b", "lora_config": [4]}, "lora_config"),
        ("create_model", {"session_id": sid, "base_model": "b", "lora_config": {"rank": 4}, "optimizer_config": 3},
         "optimizer_config"),
        ("create_model", {"session_id": ["s"], "base_model": "b"}, "session_id"),
        ("load_weights", {"session_id": sid, "model_seq_id": math.nan, "path": "tinker://a/weights/b"}, "model_seq_id"),
        ("load_weights", {"model_id": "m", "path": 7, "optimizer": False}, "path"),
        ("load_weights", {"model_id": "m", "path": "tinker://a/weights/b", "optimizer": "yes"}, "optimizer"),
        ("create_sampling_session", {"session_id": sid, "sampling_session_seq_id": "1", "base_model": "b"},
         "sampling_session_seq_id"),
        ("optim_step", {"model_id": "m", "seq_id": 1.5, "adam_params": {}}, "seq_id"),
        ("optim_step", {"model_id": "m", "optimizer_params": []}, "optimizer_params"),
        ("save_weights", {"model_id": "m", "path": 5}, "path"),
        ("save_weights_for_sampler", {"model_id": "m", "path": ["x"]}, "path"),
        ("get_info", {"model_id": {"a": 1}}, "model_id"),
        ("asample", {**sample, "seq_id": ""}, "seq_id"),
        ("asample", {**sample, "prompt": -1}, "prompt"),
        ("asample", {**sample, "prompt": {"chunks": 5}}, "prompt.chunks"),
        ("asample", {**sample, "prompt": {"chunks": [5]}}, "prompt.chunks[0]"),
        ("asample", {**sample, "prompt": {"chunks": [{"tokens": ["1"]}]}}, "prompt.chunks[0].tokens"),
        ("asample", {**sample, "prompt_logprobs_last_n": "2"}, "prompt_logprobs_last_n"),
        ("create_session", {"tags": "x"}, "tags"),
        ("create_session", {"user_metadata": {"loss": math.nan}}, "user_metadata"),
    ]
    for route, body, field in cases:
        message = refusal(app, service, route, body)
        assert message.startswith(field), (route, body, message)
    assert service.samplers == {} and service.trainees == {}


def test_ids_that_would_climb_out_of_the_state_directory_are_refused(tinker: Any, tmp_path: Path) -> None:
    # A session id became part of a path: "/x/y" or "../.." wrote the client's record (and a
    # sampler's weights, through sampling_session_seq_id) wherever it pointed.
    app, service, sid = tinker
    outside = tmp_path / "outside"
    for bad in ("../outside", str(outside / "abs"), "a/b", "..", "x" * 97):
        for route, body in (("create_model", {"session_id": bad, "base_model": "b", "lora_config": {"rank": 4}}),
                            ("create_sampling_session", {"session_id": bad, "base_model": "b"}),
                            ("load_weights", {"session_id": bad, "path": "tinker://a/weights/b", "optimizer": False})):
            assert refusal(app, service, route, body).startswith("session_id"), (route, bad)
    assert refusal(app, service, "save_weights_for_sampler",
                   {"model_id": f"{sid}:train:0", "sampling_session_seq_id": "../../../outside"}
                   ).startswith("sampling_session_seq_id")
    assert not outside.exists() and not (tmp_path / "abs:train:0").exists()
    # Lookups by such an id read nothing outside either: they are not clients (nor 500s).
    long_id = "x" * 300
    listed, run = exchange(app, ("GET", f"/api/v1/training_runs/{long_id}/checkpoints", None, {}),
                           ("GET", "/api/v1/training_runs/..%2F..%2Fetc", None, {}))
    assert listed.status_code == 200 and listed.json()["checkpoints"] == [], listed.text
    assert 400 <= run.status_code < 500, run.text


def test_a_base_model_name_too_long_for_a_file_is_refused_not_an_os_error(tinker: Any) -> None:
    # Path(name).exists() raised OSError (ENAMETOOLONG) inside find_target.
    app, service, sid = tinker
    for route in ("create_model", "create_sampling_session"):
        message = refusal(app, service, route, {"session_id": sid, "base_model": "0" * 300, "lora_config": {"rank": 4}})
        assert "too long for a file name" in message, message
    with pytest.raises(ModelError, match="too long for a file name"):
        find_target("/" + "a" * 300)


def _fb(*, tokens: bytes = np.asarray([5, 6], np.int32).tobytes(), **tensors: Any) -> bytes:
    msg = pb.ForwardBackwardRequest(model_id="s:train:0", seq_id=1, loss_fn="cross_entropy")
    d = msg.data.add()
    d.model_input.add().encoded_text.tokens = tokens
    for name, fill in tensors.items():
        fill(d.loss_fn_inputs[name])
    return msg.SerializeToString()


def _dense(raw: bytes, dtype: int = pb.DTYPE_FLOAT32, shape: tuple[int, ...] = ()) -> Any:
    def fill(t: Any) -> None:
        t.dtype, t.dense = dtype, raw
        t.shape.extend(shape)
    return fill


def _sparse(shape: tuple[int, ...], crow: list[int], col: list[int], values: list[float]) -> Any:
    def fill(t: Any) -> None:
        t.dtype = pb.DTYPE_FLOAT32
        t.shape.extend(shape)
        t.sparse_csr.values = np.asarray(values, np.float32).tobytes()
        t.sparse_csr.crow_indices = np.asarray(crow, np.int64).tobytes()
        t.sparse_csr.col_indices = np.asarray(col, np.int64).tobytes()
    return fill


def test_forward_backward_tensors_that_do_not_hold_together_are_400s_naming_them(tinker: Any) -> None:
    # numpy's "buffer size must be a multiple of element size", an IndexError from CSR offsets
    # out of range, np.zeros of a claimed 2**41 cells (MemoryError): 500s, or worse, before.
    app, service, _ = tinker
    cases = [
        (_fb(weights=_dense(b"\0" * 5)), "datum 0: loss_fn_inputs['weights']: 5 bytes"),
        (_fb(tokens=b"\1\0\0\0\2\0"), "datum 0: model_input: 6 bytes"),
        (_fb(weights=_dense(b"\0" * 8, shape=(-1, -2))), "datum 0: loss_fn_inputs['weights']: shape [-1, -2]"),
        (_fb(weights=_sparse((2, 2), [0, 5, 9], [0], [1.0])), "not a sparse CSR tensor"),
        (_fb(weights=_sparse((2, 2), [0, 1, 1], [7], [1.0])), "not a sparse CSR tensor"),
        (_fb(weights=_sparse((2**40, 2), [0], [], [])), "at most"),
    ]
    for body, words in cases:
        message = refusal(app, service, "forward_backward", body, PROTOBUF)
        assert words in message, message
    unset = pb.ForwardBackwardRequest(model_id="s:train:0", seq_id=1, loss_fn="ppo")
    unset.loss_fn_config_v2["clip_low_threshold"].SetInParent()  # an entry with neither number nor text
    assert "has no value" in refusal(app, service, "forward_backward", unset.SerializeToString(), PROTOBUF)


def test_numbers_the_losses_and_adam_cannot_take_are_refused_at_the_edge(tinker: Any) -> None:
    # A ppo clip threshold sent as text reached float("...") on the worker (a "server" error with
    # a traceback); a learning rate past float's range reached math.isfinite (OverflowError, a 500).
    app, service, _ = tinker
    ppo = pb.ForwardBackwardRequest(model_id="s:train:0", seq_id=1, loss_fn="ppo")
    ppo.loss_fn_config_v2["clip_low_threshold"].text = "0.5"
    assert "clip_low_threshold '0.5': must be a finite number" in refusal(
        app, service, "forward_backward", ppo.SerializeToString(), PROTOBUF)
    message = refusal(app, service, "optim_step", {"model_id": "m", "seq_id": 1,
                                                   "adam_params": {"learning_rate": 10**400}})
    assert message.startswith("adam_params.learning_rate: must be a finite number"), message


def test_a_zstd_body_past_the_limit_is_refused_unread(tinker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A few kB of zstd can claim gigabytes; they were decompressed whole.
    app, service, _ = tinker
    monkeypatch.setattr(wire, "MAX_DECOMPRESSED", 1 << 20)
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (2 << 20))
    assert len(bomb) < 1000
    message = refusal(app, service, "forward_backward", bomb, {**PROTOBUF, "Content-Encoding": "zstd"})
    assert "decompresses to more than 1 MiB" in message, message


def test_session_metadata_is_answered_back_as_sent_even_with_a_lone_surrogate(tinker: Any) -> None:
    app, service, _ = tinker
    made, = exchange(app, post("/api/v1/create_session", b'{"tags": [], "user_metadata": {"\\ud800": "\\udfff"}}'))
    got, = exchange(app, ("GET", f"/api/v1/sessions/{made.json()['session_id']}", None, {}))
    assert got.status_code == 200 and got.json()["user_metadata"] == {"\ud800": "\udfff"}, got.text


# -- the worker's side ------------------------------------------------------------------------------

@pytest.mark.parametrize("raw,field", [({"rank": 4, "seed": "7"}, "seed"), ({"rank": 4, "seed": 2**64}, "seed"),
                                       ({"rank": 4, "seed": 1.5}, "seed"), ({"rank": 4, "train_mlp": "no"}, "train_mlp"),
                                       ({"rank": True}, "rank")])
def test_a_lora_config_torch_cannot_take_is_refused_before_the_worker(raw: dict[str, Any], field: str) -> None:
    # torch.manual_seed("7") raised TypeError on the worker: a "server" error with a traceback;
    # "no" switched train_mlp on.
    with pytest.raises(TinkerUserError, match=f"lora_config.{field}"):
        LoraSpec.of(raw)
    assert LoraSpec.of({"rank": 4, "seed": 2**63 - 1, "train_mlp": False}).train_mlp is False


def test_sampling_weights_whose_outputs_are_not_finite_is_a_user_error(tmp_path: Path) -> None:
    # A client may step with a learning rate of 1e30 (finite, so allowed); the weights then give
    # logits that are not finite, and torch.multinomial raised RuntimeError: a "server" error with a
    # traceback. The weights here make every product of the output layer overflow, whatever the
    # kernel: huge weights inside a block overflow a LayerNorm's variance, which gives NaN or 0 by
    # kernel and thread count (finite logits, once, beside other tests in one worker).
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2, n_positions=32,
                                       tie_word_embeddings=False)).eval()
    with torch.no_grad():
        model.transformer.ln_f.weight.fill_(1e30)
        model.lm_head.weight.fill_(1e30)
    base = Base(ref="tiny", path=tmp_path, model=model, tokenizer=None, device="cpu")
    with pytest.raises(TinkerUserError, match="outputs are not finite"):
        sampling.sample(base, None, [1, 2, 3], 2, sampling.Sampling(max_tokens=3), prompt_logprobs=False)


# -- a training client on a tiny GPT-2: refusals that leave it as it was ---------------------------

@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, TinkerService, lora.Trainee]]:
    """A Tinker service whose every base is one tiny GPT-2, with training client ``s:train:0`` on it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2, n_positions=32)).eval()
    base = Base(ref="tiny", path=tmp_path / "base", model=model, tokenizer=None, device="cpu")
    service = TinkerService(tmp_path / "state")
    service.bases[str(base.path)] = base
    monkeypatch.setattr(service, "base", lambda ref: base)
    t = service._new_trainee("s:train:0", "tiny", LoraSpec(rank=2))
    yield make_app(None, tinker=service), service, t
    service.close()


def _train(t: lora.Trainee) -> None:
    datum = {"tokens": [1, 2, 3], "inputs": {"target_tokens": np.array([2, 3, 4]), "weights": np.ones(3, np.float32)}}
    forward.forward_backward(t, [datum], "cross_entropy", None, backward=True)
    lora.optim_step(t, {"learning_rate": 1e-2})


def _snapshot(t: lora.Trainee) -> tuple[list[torch.Tensor], Any, int]:
    import copy

    state = copy.deepcopy(t.optimizer.state_dict()) if t.optimizer is not None else None
    return [p.detach().clone() for p in t.base.params(t.adapter)], state, t.steps


def _assert_unchanged(t: lora.Trainee, before: tuple[list[torch.Tensor], Any, int]) -> None:
    weights, state, steps = before
    assert t.steps == steps and t.optimizer is not None and state is not None
    assert all(torch.equal(p, w) for p, w in zip(t.base.params(t.adapter), weights))
    now = t.optimizer.state_dict()
    for k, moments in state["state"].items():
        assert all(torch.equal(now["state"][k][m], v) for m, v in moments.items())


def _result(service: TinkerService, rid: str) -> Any:
    return service.work.future(rid).result(30)


def test_loading_a_sampler_checkpoint_with_its_optimizer_is_refused_before_the_weights_change(
        client: Any, tmp_path: Path) -> None:
    # The adapter's weights were overwritten and its Adam state dropped, then the load refused.
    _, service, t = client
    _train(t)
    lora.save_state(t, tmp_path / "sampler", optimizer=False, kind="sampler")
    _train(t)  # the client moves on: the checkpoint's weights are no longer its own
    before = _snapshot(t)
    with pytest.raises(TinkerUserError, match="holds no optimizer state"):
        lora.load_state(t, tmp_path / "sampler", optimizer=True)
    _assert_unchanged(t, before)


def test_loading_a_checkpoint_of_other_lora_layers_is_a_user_error_naming_them(client: Any, tmp_path: Path) -> None:
    # Same rank, train_mlp off: the optimizer's load raised ValueError (a "server" error with a
    # traceback), after the weights had changed.
    _, service, t = client
    other = service._new_trainee("s:train:1", "tiny", LoraSpec(rank=2, train_mlp=False))
    _train(other)
    lora.save_state(other, tmp_path / "other", optimizer=True, kind="weights")
    _train(t)
    before = _snapshot(t)
    with pytest.raises(TinkerUserError, match=r"train_mlp False \(this client: True\)"):
        lora.load_state(t, tmp_path / "other", optimizer=True)
    _assert_unchanged(t, before)


def test_a_seq_id_sent_again_by_another_route_is_refused_naming_seq_id(client: Any) -> None:
    # save_weights with the seq_id of a forward_backward got that forward_backward's result (200)
    # and wrote no checkpoint.
    app, service, t = client
    fb = _fb(target_tokens=_dense(np.asarray([6, 7], np.int64).tobytes(), pb.DTYPE_INT64, (2,)),
             weights=_dense(np.ones(2, np.float32).tobytes(), shape=(2,)))
    first, again = exchange(app, post("/api/v1/forward_backward", fb, **PROTOBUF),
                            post("/api/v1/forward_backward", fb, **PROTOBUF))
    assert first.json()["request_id"] == again.json()["request_id"]  # a retry: the same request
    assert _result(service, first.json()["request_id"])[0] == "proto"
    message = refusal(app, service, "save_weights", {"model_id": t.model_id, "path": "x", "seq_id": 1})
    assert message.startswith("seq_id 1:") and "forward_backward" in message, message
    assert service.store.checkpoints(t.model_id) == []
    [saved] = exchange(app, post("/api/v1/save_weights", {"model_id": t.model_id, "path": "x", "seq_id": 2}))
    assert _result(service, saved.json()["request_id"])[1]["path"] == f"tinker://{t.model_id}/weights/x"


def test_target_tokens_that_are_not_whole_numbers_are_refused_naming_the_datum(tinker: Any) -> None:
    # 6.5 was cut to 6 by the cast to int64, and trained on.
    app, service, _ = tinker
    fb = _fb(target_tokens=_dense(np.asarray([6.5, 7], np.float32).tobytes(), shape=(2,)))
    message = refusal(app, service, "forward_backward", fb, PROTOBUF)
    assert message.startswith("datum 0: loss_fn_inputs['target_tokens'] is float32"), message


def test_a_sampler_whose_checkpoint_is_deleted_goes_with_it(client: Any) -> None:
    # Deleting answered 200, the sampler stayed, and once its cached adapter was evicted sampling
    # was a "server" error ("Can't find adapter_config.json") with a traceback.
    app, service, t = client
    sid = service.create_session({})["session_id"]
    [saved] = exchange(app, post("/api/v1/save_weights_for_sampler", {"model_id": t.model_id, "path": "p0",
                                                                      "seq_id": 1}))
    path = _result(service, saved.json()["request_id"])[1]["path"]
    made = service.create_sampling_session({"session_id": sid, "sampling_session_seq_id": 0, "model_path": path})
    body = {"sampling_session_id": made["sampling_session_id"], "num_samples": 1, "seq_id": 1,
            "prompt": {"chunks": [{"type": "encoded_text", "tokens": [1, 2]}]},
            "sampling_params": {"max_tokens": 2, "stop": []}}
    [sampled] = exchange(app, post("/api/v1/asample", body))
    assert _result(service, sampled.json()["request_id"])[0] == "proto"
    [deleted] = exchange(app, ("DELETE", f"/api/v1/training_runs/{t.model_id}/checkpoints/sampler_weights/p0",
                               None, {}))
    assert deleted.status_code == 200, deleted.text
    said = refusal(app, service, "asample", {**body, "seq_id": 2})
    assert f"was made from checkpoint {path}, deleted since" in said, said
    # The cached adapter goes too (on the worker, after the delete): a checkpoint saved again under
    # that name loads afresh.
    service.work.future(service.work.submit("delete", lambda: None)).result(30)
    assert t.base.samplers == {}
    # Weights removed behind the server's back: a user error, not PEFT's OSError.
    [again] = exchange(app, post("/api/v1/save_weights_for_sampler", {"model_id": t.model_id, "path": "p1",
                                                                      "seq_id": 2}))
    path = _result(service, again.json()["request_id"])[1]["path"]
    made = service.create_sampling_session({"session_id": sid, "sampling_session_seq_id": 1, "model_path": path})
    import shutil

    shutil.rmtree(service.store.dir(service.store.parse(path)))
    message = refusal(app, service, "asample", {**body, "sampling_session_id": made["sampling_session_id"]})
    assert "no longer on disk" in message, message


@pytest.mark.parametrize("options,param", [({"include_usage": "no"}, "stream_options.include_usage"),
                                           ({"include_usage": "false"}, "stream_options.include_usage"),
                                           ({"include_usage": 1}, "stream_options.include_usage"),
                                           ([], "stream_options"), ("", "stream_options"),
                                           ({"include_usage": True, "usage": True}, "stream_options.usage")])
def test_stream_options_are_an_object_of_known_booleans(options: Any, param: str) -> None:
    # bool("no") is True: usage was sent; [] passed for no options, and unknown keys for nothing.
    with pytest.raises(ApiError) as e:
        read_chat(chat(stream=True, stream_options=options))
    assert e.value.status == 400 and e.value.param == param, e.value.message
    assert read_chat(chat(stream=True, stream_options={"include_usage": False})).include_usage is False
    assert read_chat(chat(stream=True, stream_options=None)).include_usage is False


def test_a_tinker_dir_that_is_a_file_is_a_serve_error_exit_2(tmp_path: Path) -> None:
    # FileExistsError escaped main() with a traceback.
    from clustertune.api.serving import tinker_service
    from clustertune.serve.listen import ServeError
    from tests.helpers import cli_here

    (tmp_path / "afile").write_text("x")
    with pytest.raises(ServeError, match="--tinker-dir"):
        tinker_service(runs_root=None, device="cpu", dtype="auto", tinker_dir=tmp_path / "afile")
    # --port 70000: were the option let through, the port is refused (exit 2) instead of a server
    # started for good.
    out = cli_here("serve", "--tinker", "--tinker-dir", str(tmp_path / "afile"), "--port", "70000",
                   env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2 and "--tinker-dir" in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize("raw,field", [({"rank": 4, "train_mpl": False}, "lora_config.train_mpl"),
                                       ({"rank": 4, "alpha": 8}, "lora_config.alpha")])
def test_a_lora_config_key_the_sdk_does_not_have_is_refused_by_name(raw: dict[str, Any], field: str) -> None:
    # A misspelt switch trained the default layers without a word.
    with pytest.raises(TinkerUserError, match=f"^{field}: not a LoraConfig field"):
        LoraSpec.of(raw)


def test_an_adam_params_key_the_sdk_does_not_have_is_refused_by_name(tinker: Any) -> None:
    # learning_rat stepped with the default learning rate.
    app, service, _ = tinker
    message = refusal(app, service, "optim_step", {"model_id": "m", "seq_id": 1, "adam_params": {"learning_rat": 1}})
    assert message.startswith("adam_params.learning_rat: not an AdamParams field"), message


def test_max_body_on_a_tinker_only_server_is_refused_not_ignored(tmp_path: Path) -> None:
    from tests.helpers import cli_here

    # --port 70000 as above: a server let through stops at the port, not serving on.
    out = cli_here("serve", "--tinker", "--tinker-dir", str(tmp_path / "t"), "--max-body", "1000", "--port", "70000",
                   env={"HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2 and "--max-body 1000" in out.stderr and "Traceback" not in out.stderr, out.stderr
