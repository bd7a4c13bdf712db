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


# The most bytes a compressed forward_backward body may decompress to.
MAX_DECOMPRESSED = 1 << 30
# The most cells one tensor may have once dense: a sparse tensor's shape is only a claim, and
# 2**24 float32 cells (64 MiB) is far more than any datum's inputs.
MAX_CELLS = 1 << 24


def _values(raw: bytes, dtype: Any, what: str) -> Any:
    """``raw`` read as an array of ``dtype``; a length that is not a whole number of values is refused."""
    import numpy as np

    size = np.dtype(dtype).itemsize
    if len(raw) % size:
        raise TinkerUserError(f"{what}: {len(raw)} bytes is not a whole number of {np.dtype(dtype).name} values")
    return np.frombuffer(raw, dtype=dtype)


def tensor(t: Any, what: str = "a tensor") -> Any:
    """A ``Tensor`` message as a numpy array (dense or 2-d sparse CSR, absent cells 0); one that
    does not hold together (a shape its values do not fill, CSR indices out of range) is refused,
    naming it as ``what``."""
    import numpy as np

    dtype, shape = _dtype(t.dtype), [int(s) for s in t.shape]
    if any(s < 0 for s in shape) or math.prod(shape) > MAX_CELLS:
        raise TinkerUserError(f"{what}: shape {shape}: every size must be 0 or more, at most {MAX_CELLS} cells in all")
    if t.WhichOneof("encoding") == "sparse_csr":
        if len(shape) != 2:
            raise TinkerUserError(f"{what}: a sparse tensor must be 2-d (shape {shape})")
        values = _values(t.sparse_csr.values, dtype, what)
        crow = _values(t.sparse_csr.crow_indices, np.int64, f"{what} (crow_indices)")
        col = _values(t.sparse_csr.col_indices, np.int64, f"{what} (col_indices)")
        rows, cols = shape
        if (len(crow) != rows + 1 or crow[0] != 0 or bool(np.any(np.diff(crow) < 0)) or crow[-1] != len(values)
                or len(col) != len(values) or bool(np.any((col < 0) | (col >= cols)))):
            raise TinkerUserError(f"{what}: not a sparse CSR tensor of shape {shape} (crow_indices: {rows + 1} "
                                  f"non-decreasing offsets from 0 to the {len(values)} values; col_indices: one "
                                  f"column from 0 to {cols - 1} per value)")
        out = np.zeros(shape, dtype=dtype)
        for r in range(rows):
            out[r, col[crow[r]:crow[r + 1]]] = values[crow[r]:crow[r + 1]]
        return out
    flat = _values(t.dense, dtype, what).copy()  # writable: torch takes it as it is
    if shape and math.prod(shape) != flat.size:
        raise TinkerUserError(f"{what}: a tensor of shape {shape} carries {flat.size} values")
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

        chunks: list[bytes] = []
        size = 0
        try:
            # Read through a stream, never past the limit: a few kB of zstd can claim gigabytes.
            with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
                while size <= MAX_DECOMPRESSED and (chunk := reader.read(min(1 << 24, MAX_DECOMPRESSED + 1 - size))):
                    chunks.append(chunk)
                    size += len(chunk)
        except zstandard.ZstdError as exc:
            raise TinkerUserError(f"the zstd body does not decompress: {exc}") from None
        raw = b"".join(chunks)
        if size > MAX_DECOMPRESSED:
            raise TinkerUserError(f"the zstd body decompresses to more than {MAX_DECOMPRESSED >> 20} MiB: send the "
                                  "data in smaller forward_backward requests")
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
            tokens.extend(_values(chunk.encoded_text.tokens, np.int32, f"datum {i}: model_input").tolist())
        data.append({"tokens": tokens, "inputs": {k: tensor(v, f"datum {i}: loss_fn_inputs[{k!r}]")
                                                  for k, v in sorted(d.loss_fn_inputs.items())}})
    if msg.loss_fn_config_v2:
        config = {}
        for k, v in msg.loss_fn_config_v2.items():
            which = v.WhichOneof("value")
            if which is None:
                raise TinkerUserError(f"loss_fn_config[{k!r}] has no value (a number or a text)")
            config[k] = getattr(v, which)
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


# The SDK's filler for a position without top-k entries (tinker.types.topk_logprobs.MASK_LOGPROB).
TOPK_EMPTY = (0, -99999.0)


def sample_response(sequences: list[dict[str, Any]], prompt_logprobs: list[float | None] | None,
                    topk_prompt: list[list[tuple[int, float]] | None] | None = None) -> bytes:
    """A SampleResponse; ``topk_prompt``: per prompt position its (token, log-probability) pairs,
    or None, and a sequence's ``"topk"`` the same per sampled token, each sent as the SDK's two
    dense (positions, k) matrices filled with its sentinel."""
    import numpy as np

    pb = _pb()
    resp = pb.SampleResponse()
    for s in sequences:
        seq = resp.sequences.add(tokens=np.asarray(s["tokens"], np.int32).tobytes(),
                                 logprobs=np.asarray(s["logprobs"], np.float32).tobytes(),
                                 stop_reason=pb.STOP_REASON_STOP if s["stop_reason"] == "stop" else pb.STOP_REASON_LENGTH)
        if "topk" in s:
            seq.topk_sampled_logprobs.CopyFrom(_topk_matrices(pb, s["topk"]))
    if prompt_logprobs is not None:
        resp.prompt_logprobs = np.asarray([math.nan if v is None else v for v in prompt_logprobs], np.float32).tobytes()
    if topk_prompt is not None:
        resp.topk_prompt_logprobs.CopyFrom(_topk_matrices(pb, topk_prompt))
    return resp.SerializeToString()


def _topk_matrices(pb: Any, rows_in: list[list[tuple[int, float]] | None]) -> Any:
    import numpy as np

    k = max((len(row) for row in rows_in if row), default=0)
    rows = [list(row or []) + [TOPK_EMPTY] * (k - len(row or [])) for row in rows_in]
    return pb.TopkLogprobs(token_ids=np.asarray([[t for t, _ in r] for r in rows], np.int32).reshape(len(rows), k).tobytes(),
                           logprobs=np.asarray([[v for _, v in r] for r in rows], np.float32).reshape(len(rows), k).tobytes(),
                           k=k, length=len(rows))
