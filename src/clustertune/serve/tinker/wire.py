"""The Tinker SDK's protobuf bodies, read and written with the schema the SDK ships.

``forward_backward`` requests arrive as ``ForwardBackwardRequest`` (zstd-compressed where the
client was told to compress); their results and sampling results go back as
``ForwardBackwardOutput`` and ``SampleResponse``: the SDK refuses JSON for those two.
"""

from __future__ import annotations

import math
from typing import Any

from clustertune.serve.tinker.lora import TinkerUserError

PROTOBUF = "application/x-protobuf"


def _pb() -> Any:
    from tinker.proto import tinker_public_pb2

    return tinker_public_pb2


def _dtype(code: int) -> Any:
    import numpy as np

    pb = _pb()
    table = {pb.DTYPE_FLOAT32: np.float32, pb.DTYPE_INT64: np.int64, pb.DTYPE_INT32: np.int32}
    if code not in table:
        raise TinkerUserError(f"tensor dtype {code} is not one this server reads (float32, int64, int32)")
    return table[code]


def tensor(t: Any) -> Any:
    """A ``Tensor`` message as a numpy array (dense or 2-d sparse CSR, absent cells 0)."""
    import numpy as np

    dtype, shape = _dtype(t.dtype), [int(s) for s in t.shape]
    if t.WhichOneof("encoding") == "sparse_csr":
        if len(shape) != 2:
            raise TinkerUserError(f"a sparse tensor must be 2-d (shape {shape})")
        values = np.frombuffer(t.sparse_csr.values, dtype=dtype)
        crow = np.frombuffer(t.sparse_csr.crow_indices, dtype=np.int64)
        col = np.frombuffer(t.sparse_csr.col_indices, dtype=np.int64)
        out = np.zeros(shape, dtype=dtype)
        for r in range(shape[0]):
            out[r, col[crow[r]:crow[r + 1]]] = values[crow[r]:crow[r + 1]]
        return out
    flat = np.frombuffer(t.dense, dtype=dtype).copy()  # writable: torch takes it as it is
    if shape and math.prod(shape) != flat.size:
        raise TinkerUserError(f"a tensor of shape {shape} carries {flat.size} values")
    return flat.reshape(shape) if shape else flat


def check_finite(data: list[dict[str, Any]]) -> None:
    """Refuse a NaN or an infinity in any datum's ``loss_fn_inputs`` (weights, advantages,
    logprobs, target tokens sent as floats...): one would reach the gradients, and the next
    optimizer step would write it into the adapter."""
    import numpy as np

    for i, d in enumerate(data):
        for name, array in sorted(d["inputs"].items()):
            if not np.issubdtype(array.dtype, np.floating):
                continue
            wrong = np.flatnonzero(~np.isfinite(array))
            if wrong.size:
                at = np.unravel_index(int(wrong[0]), array.shape) if array.ndim > 1 else int(wrong[0])
                value = array.reshape(-1)[int(wrong[0])]
                raise TinkerUserError(f"datum {i}: loss_fn_inputs[{name!r}] holds {value} at position {at} "
                                      f"({wrong.size} of {array.size} values are not finite): every value must be "
                                      "a finite number")


def read_forward_backward(raw: bytes, encoding: str | None) -> dict[str, Any]:
    """The request as plain values: model_id, seq_id, forward_only, loss, config and data
    (``{"tokens": [...], "inputs": {name: array}}`` per datum)."""
    from google.protobuf.message import DecodeError

    if (encoding or "").lower() == "zstd":
        import zstandard

        try:
            raw = zstandard.ZstdDecompressor().decompress(raw)
        except zstandard.ZstdError as exc:
            raise TinkerUserError(f"the zstd body does not decompress: {exc}") from None
    msg = _pb().ForwardBackwardRequest()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise TinkerUserError(f"the body is not a ForwardBackwardRequest: {exc}") from None
    import numpy as np

    data = []
    for i, d in enumerate(msg.data):
        tokens: list[int] = []
        for chunk in d.model_input:
            kind = chunk.WhichOneof("chunk")
            if kind != "encoded_text":
                raise TinkerUserError(f"datum {i}: a {kind} chunk; this server trains text models (encoded_text only)")
            tokens.extend(np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32).tolist())
        data.append({"tokens": tokens, "inputs": {k: tensor(v) for k, v in d.loss_fn_inputs.items()}})
    if msg.loss_fn_config_v2:
        config = {k: getattr(v, v.WhichOneof("value")) for k, v in msg.loss_fn_config_v2.items()}
    else:
        config = dict(msg.loss_fn_config)
    return {"model_id": msg.model_id, "seq_id": int(msg.seq_id), "forward_only": bool(msg.forward_only),
            "loss": msg.loss_fn, "config": config, "data": data}


def forward_backward_output(outputs: list[dict[str, Any]], metrics: dict[str, float]) -> bytes:
    import numpy as np

    pb = _pb()
    out = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord", metrics=metrics)
    record = out.loss_fn_outputs.add(type_tag="ArrayRecord", num_datums=len(outputs))
    for name in outputs[0] if outputs else []:
        arrays = [np.ascontiguousarray(o[name], dtype=np.float32) for o in outputs]
        offsets = np.cumsum([0] + [a.nbytes for a in arrays]).astype(np.int64)
        record.fields[name].CopyFrom(pb.BatchedTensor(data=b"".join(a.tobytes() for a in arrays),
                                                      offsets=offsets.tobytes(), dtype=pb.DTYPE_FLOAT32,
                                                      trailing_shape=list(arrays[0].shape[1:])))
    return out.SerializeToString()


def sample_response(sequences: list[dict[str, Any]], prompt_logprobs: list[float | None] | None) -> bytes:
    import numpy as np

    pb = _pb()
    resp = pb.SampleResponse()
    for s in sequences:
        resp.sequences.add(tokens=np.asarray(s["tokens"], np.int32).tobytes(),
                           logprobs=np.asarray(s["logprobs"], np.float32).tobytes(),
                           stop_reason=pb.STOP_REASON_STOP if s["stop_reason"] == "stop" else pb.STOP_REASON_LENGTH)
    if prompt_logprobs is not None:
        resp.prompt_logprobs = np.asarray([math.nan if v is None else v for v in prompt_logprobs], np.float32).tobytes()
    return resp.SerializeToString()
