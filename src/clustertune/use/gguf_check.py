"""Read a written GGUF file back and compare it with the model directory it was converted from.

Run on every GGUF export, with the ``gguf`` package from PyPI (not the converter's own copy),
so the file is read by other code than wrote it:

- every tensor of the model is in the file, under the name llama.cpp looks it up by, with the
  same number of values, and the values agree: stored as F32 exactly, as F16 within F16's
  rounding (half a unit in the last place, relative 2**-11), as Q8_0 within 0.57 of its block's
  step (a block is 32 values along a row; its step is the block's largest magnitude / 127:
  half a step for rounding to an integer, plus the scale's own F16 rounding times 127);
- the vocabulary (every id's token), the BPE merges and the token types of the special tokens
  (CONTROL, so llama.cpp parses ``<|im_end|>`` in a prompt as one token) equal the tokenizer's;
- the ids of the bos, eos, unk and pad tokens and the chat template are there and equal.

Where the converter changes a tensor's layout the comparison follows it: a transpose (GPT-2's
Conv1D weights), and the llama layout's query and key rows, which llama.cpp stores reordered
within each head for its rotary embedding (the interleaved pairs of the original checkpoints).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

Q8_BLOCK = 32
Q8_STEPS = 0.5 + 127 * 2.0 ** -11 + 1e-3  # the stated bound, in units of a block's step
F16_REL = 2.0 ** -11
F16_TINY = 2.0 ** -24  # F16's smallest subnormal: the rounding floor near zero
# Buffers some checkpoints carry that are not weights (GPT-2's causal mask).
_NOT_WEIGHTS = (".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq")
_SPECIAL_IDS = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
CONTROL = 3  # gguf.TokenType.CONTROL


def check_gguf(gguf_file: Path, model_dir: Path) -> list[str]:
    """Every difference between ``gguf_file`` and ``model_dir`` (a save_pretrained directory),
    one line each; an empty list when the file holds the model and its tokenizer."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_file))
    fields = {name: _value(f) for name, f in reader.fields.items()}
    problems = _check_tensors(gguf, reader, fields, model_dir)
    problems += _check_tokenizer(fields, model_dir)
    return problems


def _value(field: Any) -> Any:
    try:
        return field.contents()
    except Exception:  # noqa: BLE001 - a field the reader cannot decode is compared as missing
        return None


# -- tensors ------------------------------------------------------------------------------------


def _hf_tensors(model_dir: Path) -> dict[str, Any]:
    from safetensors.numpy import load_file

    out: dict[str, Any] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        try:
            out.update(load_file(str(f)))
        except TypeError:  # bf16 has no numpy dtype: read through torch
            from safetensors.torch import load_file as load_torch

            out.update({k: v.float().numpy() for k, v in load_torch(str(f)).items()})
    return out


def _check_tensors(gguf: Any, reader: Any, fields: dict[str, Any], model_dir: Path) -> list[str]:
    arch_name = fields.get("general.architecture")
    archs = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}
    if arch_name not in archs:
        return [f"general.architecture {arch_name!r} is not one the gguf reader knows tensor names for"]
    n_blocks = int(fields.get(f"{arch_name}.block_count") or 0)
    names = gguf.get_tensor_name_map(archs[arch_name], n_blocks)
    stored = {t.name: t for t in reader.tensors}
    config = json.loads((model_dir / "config.json").read_text())
    problems = []
    for hf_name, value in sorted(_hf_tensors(model_dir).items()):
        if hf_name.endswith(_NOT_WEIGHTS) or not np.issubdtype(value.dtype, np.floating):
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None or name not in stored:
            if name == "output.weight" and config.get("tie_word_embeddings", True) and "token_embd.weight" in stored:
                continue  # a tied output layer is the embedding, stored once
            problems.append(f"tensor {hf_name}: not in the file" + (f" (looked for {name})" if name else ""))
            continue
        heads = _rope_heads(fields, arch_name, name)
        problems += _compare(gguf, hf_name, np.asarray(value, dtype=np.float32), stored[name], heads)
    return problems


def _rope_heads(fields: dict[str, Any], arch: str, name: str) -> int | None:
    """The head count whose rows llama.cpp reorders in this tensor, None where it does not."""
    if arch not in ("llama", "mistral") or not name.startswith("blk.") or ".attn_" not in name:
        return None
    if ".attn_q." in name:
        return fields.get(f"{arch}.attention.head_count")
    if ".attn_k." in name:
        return fields.get(f"{arch}.attention.head_count_kv") or fields.get(f"{arch}.attention.head_count")
    return None


def _rope_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Rows in llama.cpp's order: within each head, the two halves interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _compare(gguf: Any, hf_name: str, want: np.ndarray, t: Any, rope_heads: int | None = None) -> list[str]:
    kind = t.tensor_type.name
    got = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
    where = f"tensor {hf_name} ({t.name}, {kind})"
    if got.size != want.size:
        return [f"{where}: {got.size} values, the model has {want.size} (shape {list(want.shape)})"]
    if rope_heads:
        want = _rope_rows(want, int(rope_heads))
    # A 2-D weight is compared as stored or transposed (GPT-2's Conv1D weights are stored
    # transposed; a square one has the same shape both ways).
    layouts = [w for w in (want, want.T if want.ndim == 2 else None) if w is not None and w.size == got.size]
    worst: tuple[int, float, float] | None = None
    for w in layouts:
        g = got.reshape(w.shape)
        tol = _tolerance(kind, w)
        if tol is None:
            return [f"{where}: stored as {kind}, which this check has no stated error for"]
        diff = np.abs(g - w)
        bad = ~(diff <= tol)  # NaN counts as bad
        if not bad.any():
            return []
        i = int(np.argmax(np.where(bad, diff - tol, -np.inf)))
        if worst is None or bad.sum() < worst[0]:
            worst = (int(bad.sum()), float(diff.ravel()[i]), float(tol.ravel()[i]))
    assert worst is not None
    return [f"{where}: {worst[0]} of {want.size} values differ beyond {kind}'s error; the largest "
            f"{worst[1]:.3g} where {worst[2]:.3g} is allowed"]


def _tolerance(kind: str, want: np.ndarray) -> np.ndarray | None:
    """The largest difference each value may show, stored as ``kind``."""
    if kind == "F32":
        return np.abs(want) * 1e-7
    if kind in ("F16", "BF16"):
        return np.abs(want) * (F16_REL if kind == "F16" else 2.0 ** -8) + F16_TINY
    if kind == "Q8_0" and want.shape[-1] % Q8_BLOCK == 0:
        blocks = np.abs(want).reshape(*want.shape[:-1], -1, Q8_BLOCK).max(axis=-1, keepdims=True)
        return np.broadcast_to(blocks / 127 * Q8_STEPS, blocks.shape[:-1] + (Q8_BLOCK,)).reshape(want.shape) + 1e-12
    return None


# -- tokenizer ----------------------------------------------------------------------------------


def _check_tokenizer(fields: dict[str, Any], model_dir: Path) -> list[str]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    config = json.loads((model_dir / "config.json").read_text())
    problems = []
    vocab = {i: t for t, i in tok.get_vocab().items()}
    size = max(int(config.get("vocab_size") or 0), max(vocab) + 1)
    want = [vocab.get(i, f"[PAD{i}]") for i in range(size)]
    got = list(fields.get("tokenizer.ggml.tokens") or [])
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        problems.append(f"vocabulary: {len(got)} tokens, the tokenizer has {len(want)}; first difference at id "
                        f"{first}: {got[first] if first < len(got) else None!r} vs {want[first] if first < len(want) else None!r}")
    spec_file = model_dir / "tokenizer.json"
    spec = json.loads(spec_file.read_text(encoding="utf-8")) if spec_file.is_file() else {}
    if spec.get("model", {}).get("type") == "BPE":
        merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"].get("merges", [])]
        got_merges = list(fields.get("tokenizer.ggml.merges") or [])
        if got_merges != merges:
            problems.append(f"merges: {len(got_merges)} in the file, the tokenizer has {len(merges)}")
    types = list(fields.get("tokenizer.ggml.token_type") or [])
    specials = sorted({i for i, t in tok.added_tokens_decoder.items() if t.special} | set(tok.all_special_ids))
    not_control = [vocab.get(i) for i in specials if i < len(types) and types[i] != CONTROL]
    if not_control:
        problems.append(f"special tokens not marked CONTROL (llama.cpp would split them into text): {not_control}")
    for attr, key in _SPECIAL_IDS.items():
        want_id = getattr(tok, f"{attr}_token_id")
        if want_id is not None and fields.get(f"tokenizer.ggml.{key}") != want_id:
            problems.append(f"{attr} token: id {fields.get(f'tokenizer.ggml.{key}')} in the file, {want_id} in the tokenizer")
    template = tok.chat_template.get("default") if isinstance(tok.chat_template, dict) else tok.chat_template
    if template and fields.get("tokenizer.chat_template") != template:
        problems.append("chat template: " + ("missing from the file" if "tokenizer.chat_template" not in fields
                                             else "differs from the tokenizer's"))
    return problems
