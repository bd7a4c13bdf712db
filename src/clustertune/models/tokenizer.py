"""Tokenizers: a hub name, a local directory, or a byte-level BPE trained on the spot."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from clustertune.errors import ModelError
from clustertune.fsutil import atomic_write_json, build_dir_once, canonical_json, digest

log = logging.getLogger("clustertune")
TOKENIZER_META = "clustertune-tokenizer.json"
# Bump when the files of a tokenizer trained on the spot change for the same inputs.
TOKENIZER_FORMAT = 2

EOS = "<|endoftext|>"
PAD = "<pad>"
CLS = "<cls>"
SEP = "<sep>"
MASK = "<mask>"
SPECIAL_TOKENS = [EOS, PAD, CLS, SEP, MASK]
# ChatML's turn markers, single special tokens of every tokenizer trained for a generative model:
# a model pretrained from scratch can then be chat-tuned (the markers never split into pieces,
# the end-of-turn token can stop generation).
CHAT_MARKERS = ["<|im_start|>", "<|im_end|>"]


def train_bpe(texts: Iterable[str], vocab_size: int, *, classification: bool, model_max_length: int) -> Any:
    """Train a byte-level BPE (GPT-2 style) on ``texts`` and wrap it for transformers.

    For classification the tokenizer frames each example as ``<cls> text <sep>``, like BERT's,
    so encoder models pool a token that sees the whole sentence.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = SPECIAL_TOKENS if classification else SPECIAL_TOKENS + CHAT_MARKERS
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if classification:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{CLS} $A {SEP}",
            pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
            special_tokens=[(CLS, tok.token_to_id(CLS)), (SEP, tok.token_to_id(SEP))],
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        unk_token=EOS,
        pad_token=PAD,
        cls_token=CLS,
        sep_token=SEP,
        mask_token=MASK,
        model_max_length=model_max_length,
        **({} if classification else {"additional_special_tokens": CHAT_MARKERS}),
    )


def load_tokenizer(name_or_path: str, key: str = "model.tokenizer", **options: Any) -> Any:
    """A pretrained tokenizer from a local directory or the hub, with clear offline errors;
    ``options`` (revision, trust_remote_code) go to ``from_pretrained``."""
    from transformers import AutoTokenizer

    p = Path(name_or_path).expanduser()
    if p.exists():
        if not p.is_dir():
            raise ModelError(f"{key}: {name_or_path!r} is a file; give the directory that holds tokenizer files")
        try:
            return AutoTokenizer.from_pretrained(str(p), **options)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{key}: cannot load a tokenizer from {str(p)!r}: {exc}") from exc
    if name_or_path.startswith(("/", "./", "../", "~")):
        raise ModelError(f"{key}: directory {name_or_path!r} does not exist")
    try:
        return AutoTokenizer.from_pretrained(name_or_path, **options)
    except (OSError, ValueError) as exc:
        raise ModelError(hub_unreachable_message(key, name_or_path, exc)) from exc


def hub_unreachable_message(key: str, name: str, exc: BaseException) -> str:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    why = (
        "HF_HUB_OFFLINE=1 is set and it is not in the local Hugging Face cache"
        if offline
        else "it is not a local directory and could not be fetched from the Hugging Face Hub"
    )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"{key}: cannot load {name!r}: {why} ({first}). This machine may not reach the hub: on a machine "
        f"with internet save it with `save_pretrained(DIR)` (or `hf download {name} --local-dir DIR`), "
        f"copy DIR here and set {key}=DIR"
    )


def fix_pad_token(tok: Any) -> Any:
    """GPT-2-style tokenizers ship without a pad token: pad with EOS (what every run does)."""
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok


def cached_trained_tokenizer(
    cache_root: Path,
    key: dict[str, Any],
    texts: Callable[[], Iterable[str]],
    vocab_size: int,
    *,
    classification: bool,
    model_max_length: int,
) -> tuple[Path, str]:
    """A byte-level BPE trained on ``texts()`` once per ``key``, cached under ``cache_root/tokenizers/``.

    ``key`` identifies the training corpus (its fingerprint); the trainer settings, the
    tokenizers version and :data:`TOKENIZER_FORMAT` are added
    here. Training is deterministic (two runs give the same files byte for byte, a test checks
    it), and the prepared data's fingerprint uses the trained tokenizer's content anyway.
    Returns the directory (``save_pretrained`` layout) and the content sha256. ``texts`` is
    only called on a miss; concurrent callers build once (file lock) and the others wait.
    """
    import tokenizers

    full_key = {
        "corpus": key, "vocab_size": vocab_size, "classification": classification,
        "model_max_length": model_max_length, "tokenizers": tokenizers.__version__, "format": TOKENIZER_FORMAT,
    }
    base = cache_root / "tokenizers"
    final = base / digest(full_key, 20)

    def hit() -> tuple[Path, str] | None:
        try:
            meta = json.loads((final / TOKENIZER_META).read_text(encoding="utf-8"))
            return final, str(meta["sha256"])
        except (OSError, ValueError, KeyError):
            return None

    def build(tmp: Path) -> None:
        t0 = time.perf_counter()
        tok = train_bpe(texts(), vocab_size, classification=classification, model_max_length=model_max_length)
        tok.save_pretrained(str(tmp))
        atomic_write_json(tmp / TOKENIZER_META, {"sha256": tokenizer_content_hash(tok), "key": full_key})
        log.info("trained a byte-level BPE tokenizer (%d tokens) in %.1fs; cached in %s",
                 len(tok), time.perf_counter() - t0, final)

    # A directory without its meta file is damaged (a crash before this layout existed): rebuilt.
    build_dir_once(final, build, what=f"the tokenizer being trained for {final.name}",
                   is_complete=lambda _: hit() is not None, lock=base / f".{final.name}.lock")
    found = hit()
    assert found is not None  # build_dir_once returns only once the meta file is in place
    return found


def tokenizer_content_hash(tok: Any) -> str:
    """sha256 of what decides a tokenizer's output: never its class name or path."""
    special = {k: (v if isinstance(v, list) else str(v)) for k, v in sorted(tok.special_tokens_map.items())}
    if getattr(tok, "is_fast", False) and getattr(tok, "backend_tokenizer", None) is not None:
        backend = json.loads(tok.backend_tokenizer.to_str())
        # Truncation/padding on the backend are call-time state, not content.
        backend.pop("truncation", None)
        backend.pop("padding", None)
        content: dict[str, Any] = {"backend": backend}
    else:
        content = {"vocab": sorted(tok.get_vocab().items(), key=lambda kv: kv[1])}
    content.update({"special": special, "padding_side": getattr(tok, "padding_side", "right")})
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()
