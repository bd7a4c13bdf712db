"""The Tinker routes' wire details, without a model: a forward_backward body as the SDK encodes
it (zstd-compressed or not, dense or sparse) reads back to the same data; a result not ready
within the hold answers ``try_again`` and then the result; telemetry is accepted; an unknown
request id is 410 and an unknown route a 400 naming it."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import zstandard
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.types.forward_backward_input import ForwardBackwardInput
from tinker.types.forward_backward_request import ForwardBackwardRequest

from clustertune.serve.tinker import routes, wire
from clustertune.serve.tinker.service import TinkerService


def _encoded(data: list[types.Datum], loss: str, config: dict | None = None) -> bytes:
    req = ForwardBackwardRequest(forward_backward_input=ForwardBackwardInput(data=data, loss_fn=loss,
                                                                             loss_fn_config=config),
                                 model_id="s:train:0", seq_id=3)
    return forward_backward_request_to_proto(req).SerializeToString()


def test_a_forward_backward_body_reads_back_compressed_or_not_dense_or_sparse() -> None:
    dense = types.Datum(model_input=types.ModelInput.from_ints([5, 6, 7]),
                        loss_fn_inputs={"target_tokens": [6, 7, 8], "logprobs": [-1.0, -2.0, -3.0],
                                        "advantages": [0.5, 0.5, 0.5]})
    # 2-d torch targets and weights: the SDK sends them as sparse CSR where that is smaller.
    sparse = types.Datum(model_input=types.ModelInput.from_ints([1, 2, 3, 4]),
                         loss_fn_inputs={"target_tokens": torch.tensor([[2, 0], [3, 0], [4, 0], [9, 0]]),
                                         "weights": torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [2.0, 0.0]])})
    raw = _encoded([dense, sparse], "ppo", {"clip_low_threshold": 0.7, "clip_high_threshold": 1.3})
    for body, encoding in ((raw, None), (zstandard.ZstdCompressor().compress(raw), "zstd")):
        got = wire.read_forward_backward(body, encoding)
        assert got["model_id"] == "s:train:0" and got["seq_id"] == 3 and got["loss"] == "ppo"
        assert got["config"] == pytest.approx({"clip_low_threshold": 0.7, "clip_high_threshold": 1.3})
        assert got["data"][0]["tokens"] == [5, 6, 7]
        assert got["data"][0]["inputs"]["advantages"].tolist() == [0.5, 0.5, 0.5]
        assert got["data"][1]["inputs"]["target_tokens"].tolist() == [[2, 0], [3, 0], [4, 0], [9, 0]]
        assert got["data"][1]["inputs"]["weights"][:, 0].tolist() == [1.0, 0.0, 0.0, 2.0]
    with pytest.raises(wire.TinkerUserError, match="does not decompress"):
        wire.read_forward_backward(b"not zstd", "zstd")


def test_outputs_read_back_through_the_sdks_decoder() -> None:
    from tinker.proto.response_conv import deserialize_proto_response

    out = wire.forward_backward_output([{"logprobs": np.array([-1.0, -2.0], np.float32)},
                                        {"logprobs": np.array([-3.0], np.float32)}], {"loss:sum": 6.0})
    decoded = deserialize_proto_response(out, types.ForwardBackwardOutput)
    assert [o["logprobs"].tolist() for o in decoded.loss_fn_outputs] == [[-1.0, -2.0], [-3.0]]
    assert decoded.metrics == {"loss:sum": 6.0}
    sample = wire.sample_response([{"tokens": [4, 5], "logprobs": [-0.5, -0.25], "stop_reason": "stop"}],
                                  [None, -1.5])
    decoded = deserialize_proto_response(sample, types.SampleResponse)
    assert decoded.sequences[0].tokens == [4, 5] and decoded.sequences[0].stop_reason == "stop"
    assert decoded.prompt_logprobs == [None, -1.5]
    # Top-k prompt log-probabilities: rows of different lengths and a first position without any.
    topk = [None, [(7, -0.5), (3, -1.25)], [(2, -0.75)]]
    decoded = deserialize_proto_response(wire.sample_response([], None, topk), types.SampleResponse)
    assert decoded.topk_prompt_logprobs == topk
    assert decoded.topk_prompt_logprobs_np.token_ids.shape == (3, 2)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, TinkerService]:
    monkeypatch.setattr(routes, "LONG_POLL_S", 0.05)
    service = TinkerService(tmp_path / "state")
    api = FastAPI()
    api.include_router(routes.make_router(service))
    api.add_exception_handler(routes._Refused, routes.refused)
    with TestClient(api) as client:
        yield client, service
    service.close()


def test_a_slow_result_is_try_again_then_the_result(app: tuple[TestClient, TinkerService]) -> None:
    client, service = app
    gate = threading.Event()
    rid = service.work.submit("m", lambda: (gate.wait(10), ("json", {"metrics": {}}))[1])
    first = client.post("/api/v1/retrieve_future", json={"request_id": rid, "allow_metadata_only": True})
    assert first.status_code == 200 and first.json() == {"type": "try_again", "request_id": rid, "queue_state": "active"}
    gate.set()
    deadline = time.monotonic() + 10
    while (r := client.post("/api/v1/retrieve_future", json={"request_id": rid})).json().get("type") == "try_again":
        assert time.monotonic() < deadline
    assert r.json() == {"metrics": {}}
    gone = client.post("/api/v1/retrieve_future", json={"request_id": "nope"})
    assert gone.status_code == 410 and "not known to this server" in gone.json()["error"]


def test_telemetry_config_and_unknown_routes(app: tuple[TestClient, TinkerService]) -> None:
    client, _ = app
    assert client.post("/api/v1/telemetry", json={"events": []}).json() == {"status": "accepted"}
    assert client.post("/api/v1/client/config", json={"sdk_version": "0.38.0"}).json()["pjwt_auth_enabled"] is False
    session = client.post("/api/v1/create_session", json={"tags": []}).json()["session_id"]
    assert client.post("/api/v1/session_heartbeat", json={"session_id": session}).status_code == 200
    bad = client.post("/api/v1/save_weights_external", json={})
    assert bad.status_code == 400 and "/api/v1/save_weights_external is not supported" in bad.json()["error"]
    refused = client.post("/api/v1/forward_backward", content=b"{}", headers={"Content-Type": "application/json"})
    assert refused.status_code == 400 and "protobuf" in refused.json()["error"]


def test_a_nan_or_infinity_in_any_tensor_input_is_a_400_naming_it(app: tuple[TestClient, TinkerService]) -> None:
    """Refused before anything is queued: a NaN that reached the gradients would be written into
    the adapter by the next optim_step, and every later loss and sample would be NaN."""
    client, _ = app
    good = types.Datum(model_input=types.ModelInput.from_ints([5, 6, 7]),
                       loss_fn_inputs={"target_tokens": [6, 7, 8], "weights": [1.0, 1.0, 1.0]})
    cases = [
        ({"target_tokens": [6, 7, 8], "weights": [1.0, float("nan"), 1.0]}, "cross_entropy", r"'weights'.* position 1"),
        ({"target_tokens": [6, 7, 8], "logprobs": [-1.0, -1.0, -1.0], "advantages": [0.0, 0.0, float("inf")]},
         "importance_sampling", r"'advantages'.* position 2"),
        ({"target_tokens": [6, 7, 8], "logprobs": [-float("inf"), -1.0, -1.0], "advantages": [1.0, 1.0, 1.0]},
         "ppo", r"'logprobs'.* position 0"),
        ({"target_tokens": torch.tensor([6.0, float("nan"), 8.0]), "weights": [1.0, 1.0, 1.0]}, "cross_entropy",
         r"'target_tokens'"),
    ]
    for inputs, loss, where in cases:
        bad = types.Datum(model_input=types.ModelInput.from_ints([5, 6, 7]), loss_fn_inputs=inputs)
        r = client.post("/api/v1/forward_backward", content=_encoded([good, bad], loss),
                        headers={"Content-Type": wire.PROTOBUF})
        assert r.status_code == 400, r.text
        assert r.json()["category"] == "user" and "datum 1: loss_fn_inputs" in r.json()["error"], r.json()
        assert re.search(where, r.json()["error"]), r.json()["error"]


def test_sampling_parameters_follow_the_openai_routes_rules(app: tuple[TestClient, TinkerService]) -> None:
    client, _ = app
    cases = [({"max_tokens": 0}, "sampling_params.max_tokens"), ({"temperature": -1.0}, "sampling_params.temperature"),
             ({"temperature": 2.5}, "sampling_params.temperature"), ({"top_p": 1.5}, "sampling_params.top_p"),
             ({"seed": -1}, "sampling_params.seed"), ({"top_k": -3}, "sampling_params.top_k"),
             ({"stop": ["a", 3]}, "sampling_params.stop"), ({"max_new_tokens": 4}, "sampling_params.max_new_tokens")]
    body = {"sampling_session_id": "s:sample:0", "seq_id": 1, "num_samples": 1,
            "prompt": {"chunks": [{"type": "encoded_text", "tokens": [1, 2]}]}}
    for params, field in cases:
        r = client.post("/api/v1/asample", json={**body, "sampling_params": {"max_tokens": 4, **params}})
        assert r.status_code == 400 and r.json()["error"].startswith(field), (params, r.text)
    r = client.post("/api/v1/asample", json={**body, "num_samples": 0, "sampling_params": {"max_tokens": 4}})
    assert r.status_code == 400 and r.json()["error"].startswith("num_samples"), r.text
    # JSON's NaN (Python's json reads it) is no number either.
    r = client.post("/api/v1/asample", content=b'{"sampling_session_id": "s:sample:0", "num_samples": 1, '
                    b'"sampling_params": {"temperature": NaN}}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "sampling_params.temperature" in r.json()["error"], r.text
    # Adam's settings likewise, before anything is queued.
    r = client.post("/api/v1/optim_step", content=b'{"model_id": "s:train:0", "seq_id": 2, '
                    b'"adam_params": {"learning_rate": NaN}}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "adam_params.learning_rate" in r.json()["error"], r.text
