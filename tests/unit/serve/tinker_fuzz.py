"""The Tinker half of the fuzz tests (tests/unit/serve/test_fuzz.py): requests built with the SDK's
own types, then now and then made hostile; protobuf bodies the SDK would never write; and the
world they are sent into (one session, one training client, a sampler and two checkpoints),
whose state is compared before and after every refused request."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import zstandard
from hypothesis import strategies as st
from tinker import types
from tinker.proto import tinker_public_pb2 as pb
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.types.forward_backward_input import ForwardBackwardInput
from tinker.types.forward_backward_request import ForwardBackwardRequest

from clustertune.serve.tinker.service import TinkerService
from clustertune.serve.tinker.wire import PROTOBUF
from tests.unit.serve.fuzzing import NUMBER_EDGES, Harness, any_value, dumps, hostile, raw_body, texts

RESULT_DEADLINE_S = 120.0
LOSSES = ["cross_entropy", "importance_sampling", "ppo", "cispo", "custom", "", "no-such-loss"]
JSON = {"Content-Type": "application/json"}


@dataclass
class Req:
    method: str
    path: str
    route: str
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))

    def __str__(self) -> str:
        body = self.content[:600] if self.content is not None else b""
        return f"{self.method} {self.path} {self.headers} {body!r}"


def _digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(b"-" if a is None else a.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@dataclass
class World:
    harness: Harness
    service: TinkerService
    base: Path
    root: Path
    session: str = ""
    model_id: str = ""
    sampler_id: str = ""
    checkpoint: str = ""
    sampler_path: str = ""
    seq: int = 0
    request_ids: list[str] = field(default_factory=list)
    around: list[str] = field(default_factory=list)  # what lies beside the root (nothing may appear there)

    @property
    def outside(self) -> Path:
        """Nothing may ever be written here: ids that climb out of the state directory point at it."""
        return self.root / "outside"

    @property
    def state_dir(self) -> Path:
        return self.service.store.root

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    # -- set-up, through the routes as the SDK calls them ---------------------------------------

    @classmethod
    def create(cls, harness: Harness, service: TinkerService, base: Path, root: Path) -> World:
        w = cls(harness, service, base, root)
        harness.begin()
        w.outside.mkdir()
        w.around = sorted(p.name for p in root.parent.iterdir())
        w.session = w.post("create_session", types.CreateSessionRequest(tags=["fuzz"], user_metadata=None,
                                                                        sdk_version="0.38.0"))["session_id"]
        w.model_id = w.result(w.post("create_model", types.CreateModelRequest(
            session_id=w.session, model_seq_id=0, base_model=str(base),
            lora_config=types.LoraConfig(rank=4, seed=0))))["model_id"]
        w.seq = 0
        w.forward_backward(3)
        w.result(w.post("optim_step", types.OptimStepRequest(optim_params=types.AdamParams(learning_rate=1e-3),
                                                             model_id=w.model_id, seq_id=w.next_seq())))
        w.checkpoint = w.result(w.post("save_weights", types.SaveWeightsRequest(
            model_id=w.model_id, path="fuzz", seq_id=w.next_seq())))["path"]
        w.sampler_path = w.result(w.post("save_weights_for_sampler", types.SaveWeightsForSamplerRequest(
            model_id=w.model_id, path="fuzz-sampler", seq_id=w.next_seq())))["path"]
        w.sampler_id = w.result(w.post("save_weights_for_sampler", types.SaveWeightsForSamplerRequest(
            model_id=w.model_id, sampling_session_seq_id=0, seq_id=w.next_seq())))["sampling_session_id"]
        return w

    def post(self, route: str, request: Any) -> dict[str, Any]:
        body = request.model_dump(mode="json", exclude_none=True)
        r = self.harness.send("POST", f"/api/v1/{route}", dumps(body), JSON)
        assert r.status_code == 200, (route, r.text)
        return r.json()

    def forward_backward(self, tokens: int, forward_only: bool = False) -> Any:
        ids = list(range(5, 5 + tokens + 1))
        datum = types.Datum(model_input=types.ModelInput.from_ints(ids[:-1]),
                            loss_fn_inputs={"target_tokens": ids[1:], "weights": [1.0] * tokens})
        req = ForwardBackwardRequest(forward_backward_input=ForwardBackwardInput(data=[datum], loss_fn="cross_entropy"),
                                     model_id=self.model_id, seq_id=self.next_seq())
        msg = forward_backward_request_to_proto(req)
        msg.forward_only = forward_only
        r = self.harness.send("POST", "/api/v1/forward_backward", msg.SerializeToString(), {"Content-Type": PROTOBUF})
        assert r.status_code == 200, r.text
        return self.result(r.json())

    def result(self, answer: dict[str, Any]) -> Any:
        status, value = self.wait(answer["request_id"])
        assert status == 200 and not (isinstance(value, dict) and "error" in value), value
        return value

    def wait(self, rid: str) -> tuple[int, Any]:
        """The result of request ``rid`` as the SDK polls for it: (HTTP status, JSON or bytes)."""
        deadline = time.monotonic() + RESULT_DEADLINE_S
        while True:
            r = self.harness.send("POST", "/api/v1/retrieve_future", dumps({"request_id": rid}), JSON)
            self.harness.check(r, f"retrieve_future {rid}")
            if r.headers.get("content-type", "").startswith(PROTOBUF):
                return r.status_code, r.content
            value = r.json()
            if not (isinstance(value, dict) and value.get("type") == "try_again"):
                return r.status_code, value
            assert time.monotonic() < deadline, f"request {rid} has no result after {RESULT_DEADLINE_S} s"

    # -- state ----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        t = self.service.trainees[self.model_id]
        params = t.base.params(t.adapter)
        opt = t.optimizer.state_dict() if t.optimizer is not None else None
        moments = [v for s in (opt or {}).get("state", {}).values() for v in s.values() if hasattr(v, "detach")]
        files = sorted(str(p.relative_to(self.state_dir)) for p in self.state_dir.rglob("*"))
        return {"weights": _digest(*params), "gradients": _digest(*[p.grad for p in params]),
                "adam": (_digest(*moments), json.dumps((opt or {}).get("param_groups"), sort_keys=True, default=str)),
                "steps": t.steps, "clients": sorted(self.service.trainees), "samplers": sorted(self.service.samplers),
                "files": files}

    # -- one exchange -----------------------------------------------------------------------------

    def exchange(self, req: Req) -> None:
        self.harness.begin()
        before = self.state()
        r = self.harness.send(req.method, req.path, req.content, req.headers)
        what = str(req)
        self.harness.check(r, what)
        refusal: str | None = None
        if r.status_code >= 400:
            body = r.json()
            assert isinstance(body, dict) and (body.get("error") or body.get("detail")), f"{r.status_code}: {r.text}"
            refusal = str(body.get("error") or body.get("detail"))
        else:
            # JSON, or a redirect ("/samplers/.." is "/api/v1", which redirects to "/api/v1/")
            answer = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
            if isinstance(answer, dict) and isinstance(answer.get("request_id"), str) and req.route != "retrieve_future":
                self.request_ids.append(answer["request_id"])
                del self.request_ids[:-20]
                status, value = self.wait(answer["request_id"])
                if isinstance(value, dict) and "error" in value:
                    assert value.get("category") == "user", f"a server error for {what}: {value}"
                    refusal = str(value["error"])
                elif status >= 400:
                    refusal = str(value)
        assert not any(self.outside.iterdir()), f"{what} wrote outside the state directory: {list(self.outside.iterdir())}"
        assert {p.name for p in self.root.iterdir()} <= {"state", "runs", "outside"}, f"{what} wrote beside the state"
        assert sorted(p.name for p in self.root.parent.iterdir()) == self.around, f"{what} wrote above the state"
        assert self.service.work._thread.is_alive(), f"the Tinker worker thread died after {what}"
        after = self.state()
        if refusal is None:
            self.harness.counts["tinker: taken"] += 1
            return
        self.harness.counts["tinker: refused, client state compared"] += 1
        if "gradients" in refusal and "dropped" in refusal:
            # optim_step's documented answer to gradients that are not finite: they are dropped.
            before["gradients"] = after["gradients"]
        changed = [k for k in before if before[k] != after[k]]
        assert not changed, f"refused ({refusal[:300]}), yet {changed} changed: {what}"

    def still_works(self) -> None:
        """The client, back at the state saved at the start (the fuzz may have trained it with a
        learning rate of 1e30, which is allowed), trains and samples; so do the sampler made at
        the start and the base."""
        self.result(self.post("load_weights", types.LoadWeightsRequest(model_id=self.model_id, path=self.checkpoint,
                                                                       optimizer=True, seq_id=self.next_seq())))
        steps = self.service.trainees[self.model_id].steps
        before = self.state()["weights"]
        self.forward_backward(4)
        self.result(self.post("optim_step", types.OptimStepRequest(
            optim_params=types.AdamParams(learning_rate=1e-3), model_id=self.model_id, seq_id=self.next_seq())))
        assert self.service.trainees[self.model_id].steps == steps + 1 and self.state()["weights"] != before
        fresh = self.result(self.post("save_weights_for_sampler", types.SaveWeightsForSamplerRequest(
            model_id=self.model_id, seq_id=self.next_seq())))["sampling_session_id"]
        base = self.post("create_sampling_session", types.CreateSamplingSessionRequest(
            session_id=self.session, sampling_session_seq_id=10**6, base_model=str(self.base)))["sampling_session_id"]
        for sampler in (self.sampler_id, fresh, base):
            answer = self.post("asample", types.SampleRequest(
                num_samples=2, prompt=types.ModelInput.from_ints([5, 6, 7]), sampling_session_id=sampler,
                seq_id=10**7 + self.next_seq(),  # above every seq_id the fuzz sent: a request of its own
                sampling_params=types.SamplingParams(max_tokens=3, temperature=1.0, seed=1, stop=[])))
            out = self.result(answer)
            from tinker.proto.response_conv import deserialize_proto_response

            decoded = deserialize_proto_response(out, types.SampleResponse)
            assert [len(s.tokens) for s in decoded.sequences] == [3, 3], sampler


# -- requests ---------------------------------------------------------------------------------------

def ids(world: World) -> st.SearchStrategy[str]:
    """Ids as a client names things: the ones that exist, garbage, and ones that climb out."""
    escapes = ["..", ".", "../outside/x", "../../outside/y", str(world.outside / "abs"), "a/b", "x" * 300,
               f"{world.session}/../../outside/z", "s:train:0", "\x00", "tinker://"]
    known = [world.model_id, world.sampler_id, world.session, world.checkpoint, world.sampler_path]
    return st.one_of(st.sampled_from(known), st.sampled_from(escapes), texts)


def utf8(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Protobuf strings are UTF-8: lone surrogates replaced."""
    return strategy.map(lambda s: s.encode("utf-8", "replace").decode())


def sessions(world: World) -> st.SearchStrategy[str]:
    return st.one_of(st.just(world.session), st.just(world.session), st.just(world.session), ids(world))


def seqs(world: World) -> st.SearchStrategy[int | None]:
    return st.one_of(st.builds(world.next_seq), st.builds(world.next_seq), st.none(),
                     st.integers(-3, 10**6), st.integers(2**31 - 2, 2**31 - 1))


def paths(world: World) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from([world.checkpoint, world.sampler_path, f"tinker://{world.model_id}/weights/none",
                                      f"tinker://{world.model_id}/weights/../../x", "tinker://a/b/c", "/etc/passwd"]),
                     texts)


tokens = st.integers(0, 520)
finite = st.floats(-4, 4)


@st.composite
def sdk_datum(draw: st.DrawFn, vocab: int = 517) -> types.Datum:
    """A Datum as the SDK builds one; its lengths, ids and values now and then off."""
    n = draw(st.one_of(st.integers(1, 10), st.integers(1, 10), st.sampled_from([0, 128, 129, 200])))
    toks = draw(st.lists(st.one_of(tokens, tokens, st.sampled_from([-1, vocab, 2**31 - 1, -(2**31)])),
                         min_size=n, max_size=n))
    m = n if draw(st.integers(0, 7)) else draw(st.integers(0, 12))
    values = st.one_of(finite, finite, finite, st.floats(width=32), st.sampled_from([1e30, -1e30, 3e38]))
    inputs: dict[str, Any] = {"target_tokens": draw(st.lists(st.one_of(tokens, tokens, st.integers(-9, 10**6)),
                                                             min_size=m, max_size=m))}
    for name in draw(st.lists(st.sampled_from(["weights", "logprobs", "advantages", "mask", ""]), max_size=3,
                              unique=True)):
        k = m if draw(st.integers(0, 7)) else draw(st.integers(0, 12))
        inputs[name] = np.asarray(draw(st.lists(values, min_size=k, max_size=k)), np.float32)
    if draw(st.integers(0, 7)) == 0 and m:  # as 2-d int64 / float32 numpy arrays (sparse where smaller)
        inputs["target_tokens"] = np.asarray(inputs["target_tokens"], np.int64)[:, None]
    return types.Datum(model_input=types.ModelInput.from_ints(toks), loss_fn_inputs=inputs)


@st.composite
def loss_config(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.integers(0, 3)):
        return None
    return draw(st.dictionaries(st.sampled_from(["clip_low_threshold", "clip_high_threshold", "beta", ""]),
                                st.one_of(st.floats(-2, 3), st.sampled_from(["x", "0.5"])), max_size=2))


@st.composite
def sdk_forward_backward(draw: st.DrawFn, world: World) -> bytes:
    model = draw(st.one_of(st.just(world.model_id), st.just(world.model_id), utf8(ids(world))))
    data = draw(st.lists(sdk_datum(), min_size=0, max_size=3))
    req = ForwardBackwardRequest(forward_backward_input=ForwardBackwardInput(
        data=data, loss_fn=draw(st.sampled_from(LOSSES[:3] * 3 + LOSSES[3:])), loss_fn_config=draw(loss_config())),
        model_id=model, seq_id=draw(st.builds(world.next_seq)))
    msg = forward_backward_request_to_proto(req)
    msg.forward_only = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:
        msg.seq_id = draw(st.integers(-(2**31), 2**31 - 1))
    return msg.SerializeToString()


@st.composite
def odd_tensor(draw: st.DrawFn, t: Any) -> None:
    """A Tensor message no SDK writes: any dtype code, any shape, bytes of any length, a broken CSR."""
    t.dtype = draw(st.sampled_from([0, 1, 2, 3, 4, 99, -1]))
    t.shape.extend(draw(st.lists(st.one_of(st.integers(-3, 12), st.sampled_from([2**40, -(2**40), 2**62])),
                                 max_size=3)))
    if draw(st.booleans()):
        t.dense = draw(st.binary(max_size=64))
    else:
        t.sparse_csr.values = draw(st.binary(max_size=32))
        t.sparse_csr.crow_indices = np.asarray(draw(st.lists(st.integers(-5, 40), max_size=5)), np.int64).tobytes() \
            if draw(st.booleans()) else draw(st.binary(max_size=20))
        t.sparse_csr.col_indices = np.asarray(draw(st.lists(st.integers(-5, 10**12), max_size=5)), np.int64).tobytes()


@st.composite
def odd_forward_backward(draw: st.DrawFn, world: World) -> bytes:
    msg = pb.ForwardBackwardRequest(model_id=draw(st.one_of(st.just(world.model_id), utf8(ids(world)))),
                                    seq_id=draw(st.builds(world.next_seq)), loss_fn=draw(st.sampled_from(LOSSES)),
                                    forward_only=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 2))):
        d = msg.data.add()
        for _ in range(draw(st.integers(0, 2))):
            chunk = d.model_input.add()
            kind = draw(st.sampled_from(["tokens", "tokens", "bytes", "image", "empty"]))
            if kind == "tokens":
                chunk.encoded_text.tokens = np.asarray(draw(st.lists(tokens, min_size=1, max_size=6)), np.int32).tobytes()
            elif kind == "bytes":
                chunk.encoded_text.tokens = draw(st.binary(max_size=13))
            elif kind == "image":
                chunk.image.data, chunk.image.format = draw(st.binary(max_size=8)), "png"
        for name in draw(st.lists(st.sampled_from(["target_tokens", "weights", "logprobs", "advantages"]), max_size=3,
                                  unique=True)):
            draw(odd_tensor(d.loss_fn_inputs[name]))
    for key in draw(st.lists(st.sampled_from(["clip_low_threshold", "clip_high_threshold", "x"]), max_size=2)):
        how = draw(st.sampled_from(["number", "text", "unset", "legacy"]))
        if how == "number":
            msg.loss_fn_config_v2[key].number = draw(st.floats())
        elif how == "text":
            msg.loss_fn_config_v2[key].text = draw(st.text(max_size=5))
        elif how == "unset":
            msg.loss_fn_config_v2[key].SetInParent()
        else:
            msg.loss_fn_config[key] = draw(st.floats())
    return msg.SerializeToString()


@st.composite
def forward_backward_request(draw: st.DrawFn, world: World) -> Req:
    kind = draw(st.sampled_from(["sdk"] * 5 + ["odd"] * 2 + ["bytes", "json"]))
    headers = {"Content-Type": PROTOBUF}
    if kind == "sdk":
        body = draw(sdk_forward_backward(world))
    elif kind == "odd":
        body = draw(odd_forward_backward(world))
    elif kind == "bytes":
        body = draw(st.binary(max_size=200))
    else:
        body, headers = draw(raw_body()), dict(JSON)
    roll = draw(st.integers(0, 9))
    if roll == 0:
        headers["Content-Encoding"] = "zstd"
        if draw(st.booleans()):
            body = zstandard.ZstdCompressor().compress(body)
    elif roll == 1:
        body = body[: draw(st.integers(0, len(body)))]  # cut short
    return Req("POST", "/api/v1/forward_backward", "forward_backward", body, headers)


def sampling_params() -> st.SearchStrategy[Any]:
    return st.builds(types.SamplingParams, max_tokens=st.one_of(st.none(), st.integers(1, 6)),
                     seed=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
                     stop=st.one_of(st.none(), st.just([]), st.lists(tokens, max_size=2),
                                    st.lists(st.text(min_size=1, max_size=2), min_size=1, max_size=2)),
                     temperature=st.one_of(st.floats(0, 2), st.just(1.0)), top_k=st.sampled_from([-1, 0, 1, 5]),
                     top_p=st.floats(0, 1))


def sdk_json(world: World) -> dict[str, st.SearchStrategy[Any]]:
    """Each JSON route's request, built with the SDK's type for it."""
    sid, seq = sessions(world), seqs(world)
    model = st.one_of(st.just(world.model_id), ids(world))
    base = st.one_of(*[st.just(str(world.base))] * 4, texts, st.sampled_from(
        ["no/such-model", "/", str(world.root), "../../", "gpt2"]))
    lora = st.builds(types.LoraConfig, rank=st.one_of(st.integers(1, 8), st.integers(-2, 5000)),
                     seed=st.one_of(st.none(), st.integers(0, 2**31)), train_mlp=st.booleans(),
                     train_attn=st.booleans(), train_unembed=st.booleans())
    adam = st.builds(types.AdamParams, learning_rate=st.one_of(st.floats(0, 1e-2), st.floats(0, 1e3), st.just(1e30)),
                     beta1=st.floats(0, 1), beta2=st.floats(0, 1), eps=st.one_of(st.just(1e-12), st.floats(0, 1)),
                     weight_decay=st.floats(0, 1), grad_clip_norm=st.one_of(st.just(0.0), st.floats(0, 10)))
    names = st.one_of(st.none(), st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=12),
                      st.sampled_from(["fuzz-again", "../x", "a/b", "x" * 200]))
    prompt = st.builds(types.ModelInput.from_ints, st.lists(st.one_of(tokens, st.integers(-5, 10**6)), max_size=8))
    return {
        "create_session": st.builds(types.CreateSessionRequest, tags=st.lists(texts, max_size=2),
                                    user_metadata=st.none(), sdk_version=st.just("0.38.0")),
        "session_heartbeat": st.builds(types.SessionHeartbeatRequest, session_id=sid),
        "get_info": st.builds(types.GetInfoRequest, model_id=model),
        # A new model_seq_id each time: a client id made again is answered from the first request.
        "create_model": st.builds(types.CreateModelRequest, session_id=sid, model_seq_id=st.integers(1, 2**62),
                                  base_model=base, lora_config=st.one_of(lora, lora, lora, st.none())),
        "optim_step": st.builds(types.OptimStepRequest, optim_params=adam, model_id=model, seq_id=seq),
        "save_weights": st.builds(types.SaveWeightsRequest, model_id=model, path=names, seq_id=seq,
                                  overwrite=st.booleans()),
        "save_weights_for_sampler": st.builds(types.SaveWeightsForSamplerRequest, model_id=model, path=names,
                                              sampling_session_seq_id=st.one_of(st.none(), st.integers(0, 3)),
                                              seq_id=seq),
        "load_weights": st.builds(types.LoadWeightsRequest, model_id=st.one_of(st.none(), model),
                                  session_id=st.one_of(st.none(), sid), model_seq_id=st.one_of(st.none(), st.integers(1, 3)),
                                  path=paths(world), optimizer=st.booleans(), seq_id=seq),
        "create_sampling_session": st.builds(types.CreateSamplingSessionRequest, session_id=sid,
                                             sampling_session_seq_id=st.integers(1, 4),
                                             base_model=st.one_of(st.none(), base),
                                             model_path=st.one_of(st.none(), paths(world))),
        "asample": st.builds(types.SampleRequest, num_samples=st.integers(1, 3), prompt=prompt,
                             sampling_params=sampling_params(),
                             sampling_session_id=st.one_of(st.just(world.sampler_id), ids(world)), seq_id=seq,
                             prompt_logprobs=st.one_of(st.none(), st.booleans()),
                             prompt_logprobs_last_n=st.one_of(st.none(), st.integers(-2, 5))),
        "retrieve_future": st.builds(types.FutureRetrieveRequest,
                                     request_id=st.one_of(st.sampled_from(world.request_ids or ["none"]), texts)),
        "weights_info": st.fixed_dictionaries({"tinker_path": paths(world)}),
        "telemetry": st.fixed_dictionaries({"events": st.lists(hostile, max_size=2), "session_id": sid}),
        "client/config": st.fixed_dictionaries({"sdk_version": texts}),
        "client/dynamic_config": st.just({}),
    }


def _paths(body: dict[str, Any], at: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path in ``body``, into nested objects too (``("lora_config", "seed")``)."""
    out = []
    for key, v in body.items():
        out.append((*at, key))
        if isinstance(v, dict):
            out.extend(_paths(v, (*at, key)))
    return out


def _replace(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = dict(body)
    if len(path) == 1:
        out[path[0]] = value
    else:
        out[path[0]] = _replace(out[path[0]], path[1:], value)
    return out


def _drop(body: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = dict(body)
    if len(path) == 1:
        out.pop(path[0])
    else:
        out[path[0]] = _drop(out[path[0]], path[1:])
    return out


@st.composite
def mutated(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the SDK wrote it, or with one field anywhere in it (nested objects included)
    wrong (a number field most often gets an odd number), dropped, or an unknown one added."""
    how = draw(st.sampled_from(["as-is"] * 3 + ["wrong"] * 3 + ["drop", "add"]))
    paths = _paths(body)
    if how == "as-is" or not paths:
        return body
    path = draw(st.sampled_from(paths))
    if how == "wrong":
        old = body
        for key in path:
            old = old[key]
        number = isinstance(old, (int, float)) and not isinstance(old, bool)
        return _replace(body, path, draw(NUMBER_EDGES if number else any_value))
    if how == "drop":
        return _drop(body, path)
    return _replace(body, (*path[:-1], draw(texts)), draw(hostile))


def _dump(request: Any) -> dict[str, Any]:
    return request if isinstance(request, dict) else request.model_dump(mode="json", exclude_none=True)


@st.composite
def json_request(draw: st.DrawFn, world: World) -> Req:
    routes = sdk_json(world)
    route = draw(st.sampled_from(sorted(routes)))
    kind = draw(st.sampled_from(["sdk"] * 6 + ["raw", "value"]))
    if kind == "sdk":
        content = dumps(draw(mutated(_dump(draw(routes[route])))))
    elif kind == "raw":
        content = draw(raw_body(b'{"session_id": "x", "model_id": '))
    else:
        content = dumps(draw(any_value))
    headers = dict(JSON) if draw(st.integers(0, 9)) else {"Content-Type": draw(st.sampled_from(
        ["text/plain", PROTOBUF, "", "application/json; charset=utf-16"]))}
    return Req("POST", f"/api/v1/{route}", route, content, headers)


@st.composite
def path_request(draw: st.DrawFn, world: World) -> Req:
    """The routes that name a thing in their path, and routes that do not exist."""
    ident = quote(draw(ids(world)).encode("utf-8", "replace"), safe="/:")  # as a client writes it in a URL
    if ident.strip("/") in ("weights/fuzz", "sampler_weights/fuzz-sampler"):
        ident = "weights/none"  # the checkpoints the last test starts from stay
    route = draw(st.sampled_from(["samplers", "training_runs", "checkpoints", "delete", "sessions", "finish", "list",
                                  "capabilities", "healthz", "unknown"]))
    method, path = {
        "samplers": ("GET", f"/api/v1/samplers/{ident}"),
        "training_runs": ("GET", f"/api/v1/training_runs/{ident}"),
        "checkpoints": ("GET", f"/api/v1/training_runs/{ident}/checkpoints"),
        "delete": ("DELETE", f"/api/v1/training_runs/{world.model_id}/checkpoints/{ident}"),
        "sessions": ("GET", f"/api/v1/sessions/{ident}"),
        "finish": ("POST", f"/api/v1/sessions/{ident}/finish"),
        "list": ("GET", "/api/v1/training_runs"),
        "capabilities": ("GET", "/api/v1/get_server_capabilities"),
        "healthz": ("GET", "/api/v1/healthz"),
        "unknown": (draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"])), f"/api/v1/{ident}"),
    }[route]
    return Req(method, path, route, None, {})


def request(world: World) -> st.SearchStrategy[Req]:
    return st.one_of(forward_backward_request(world), forward_backward_request(world), json_request(world),
                     json_request(world), json_request(world), json_request(world), path_request(world))
