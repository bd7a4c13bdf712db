"""The typed shape of ``manifest.json``, the record a prepared-data directory keeps of itself.

Everything that reads a manifest reads it through these models: a file with a missing or
mistyped field is reported by :func:`clustertune.data.manifest.load_manifest` naming the field,
instead of failing later with a ``KeyError`` in the middle of staging or training. Fields added
by later versions are kept (``extra="allow"``), so a manifest stays readable both ways within
one format version.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class FileEntry(_Record):
    """One file of the directory: its size and checksums."""

    bytes: int = Field(ge=0)
    sha256: str
    xxh3_128: str | None = None  # entries written before XXH3 was recorded have sha256 only


class ShardRef(_Record):
    file: str
    rows: int = Field(ge=0)


class ArraySpec(_Record):
    """One array of a split (token ids, masks...), stored as row-aligned shards."""

    dtype: str
    shape: list[int]
    shards: list[ShardRef]


class SplitRecord(_Record):
    """A split's arrays and counts. SFT splits also count what was dropped or truncated."""

    arrays: dict[str, ArraySpec]
    tokens: int = Field(ge=0)
    samples: int | None = None
    examples: int | None = None
    packed: bool = False
    generation_file: str | None = None
    trained_tokens: int | None = None
    examples_kept: int | None = None
    dropped_too_long: int | None = None
    dropped_no_loss: int | None = None
    truncated: int | None = None
    examples_read: int | None = None  # after data.max_*_samples; with the counts below, what max_length cut
    tokens_before_cut: int | None = None  # trained tokens (SFT) or tokens (classification)
    tokens_cut: int | None = None
    longest: int | None = None


class TokenizerRef(_Record):
    dir: str
    sha256: str


class ManifestRecord(_Record):
    format: int
    fingerprint: str
    task: str | None = None
    created_at: str | None = None
    created_by: dict[str, Any] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)
    vocab_size: int | None = None
    dtype: str | None = None
    streaming: bool = False
    tokenizer: TokenizerRef | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, Any] | None = None
    splits: dict[str, SplitRecord]
    files: dict[str, FileEntry]
