"""A model's first download from the Hugging Face Hub, reported as it goes.

huggingface_hub's own progress bars are off during a run (train/execute.py turns them off: in a
SLURM log file a bar is thousands of carriage returns). Without them a first download of a large
model would be minutes of silence after one line. So before ``from_pretrained`` runs, the hub is
asked for the sizes of the weight files it will fetch (one API call, honouring the revision and
the token huggingface_hub finds), and while it runs a thread counts the bytes that have arrived
in the cache (``blobs/<etag>.<id>.incomplete`` while a file downloads, ``blobs/<etag>`` once it
is complete) and logs a line every :data:`REPORT_EVERY` seconds. ``from_pretrained`` still
decides what it downloads; this only watches. Anything that goes wrong here (offline, a gated
repo, a cache on a strange file system) costs the report, never the run.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("clustertune")

REPORT_EVERY = 10.0  # seconds between byte-count lines: a line in a log file, not a bar
SIZE_QUERY_TIMEOUT = 10.0  # seconds the hub gets to say how large the files are

# The weight files from_pretrained looks for, in its order: one file, else an index and its
# shards (save_pretrained's names; another variant's or another library's files are not read).
_WEIGHT_CHOICES = (
    ("model.safetensors", None),
    ("model.safetensors.index.json", re.compile(r"model-\d+-of-\d+\.safetensors")),
    ("pytorch_model.bin", None),
    ("pytorch_model.bin.index.json", re.compile(r"pytorch_model-\d+-of-\d+\.bin")),
)


@dataclass(frozen=True)
class HubFile:
    name: str
    etag: str  # its blob's name in the cache: the LFS sha256, or the git blob id of a small file
    size: int


@dataclass(frozen=True)
class Download:
    """The weight files of ``repo_id`` that are not in the cache yet, and where they will arrive."""

    repo_id: str
    files: tuple[HubFile, ...]
    blobs: Path  # the repo's blobs folder in the Hugging Face cache

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files)

    def summary(self) -> str:
        n = len(self.files)
        return f"{n} file{'s' if n != 1 else ''}, {mb(self.total)} MB"

    def partials(self) -> set[Path]:
        """The partial files of these blobs there are now (left by a process that was killed)."""
        return {p for f in self.files for p in self.blobs.glob(f"{f.etag}*.incomplete")}

    def arrived(self, stale: AbstractSet[Path] = frozenset()) -> int:
        """Bytes of these files in the cache now: a complete blob counts whole, one still
        downloading by its size so far (the largest when several processes fetch it)."""
        done = 0
        for f in self.files:
            if (self.blobs / f.etag).exists():
                done += f.size
                continue
            sizes = [0]
            for p in self.blobs.glob(f"{f.etag}*.incomplete"):
                if p not in stale:
                    try:
                        sizes.append(p.stat().st_size)
                    except OSError:  # renamed into place or removed between the glob and the stat
                        pass
            done += min(max(sizes), f.size)
        return done


def mb(n: int | float) -> str:
    return f"{n / 1e6:,.1f}"


def _left(remaining: int, rate: float) -> str:
    """", about 3 min left" at this rate; nothing when done, stalled or under a second away."""
    secs = remaining / rate if rate > 0 else 0
    if secs < 1:
        return ""
    return f", about {secs:.0f} s left" if secs < 90 else f", about {secs / 60:.0f} min left"


def plan_download(repo_id: str, revision: str | None = None) -> Download | None:
    """What a first ``from_pretrained(repo_id)`` will download, or None when the hub cannot
    say (offline, unreachable, gated without a token, not a hub repo) or nothing is missing."""
    try:
        from huggingface_hub import HfApi, constants
        from huggingface_hub.file_download import repo_folder_name

        info = HfApi().model_info(repo_id, revision=revision, files_metadata=True, timeout=SIZE_QUERY_TIMEOUT)
        files = weight_files(info.siblings or [])
        blobs = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model") / "blobs"
    except Exception as exc:  # the report is optional: whatever failed, the load itself says it better
        log.debug("model: the sizes of %s's files are not known (%s: %s)", repo_id, type(exc).__name__, exc)
        return None
    missing = tuple(f for f in files if not (blobs / f.etag).exists())
    return Download(repo_id, missing, blobs) if missing else None


def weight_files(siblings: list[Any]) -> list[HubFile]:
    """The files among a repo's ``siblings`` (``model_info(files_metadata=True)``) that
    ``from_pretrained`` downloads for the weights; empty when their sizes are not all known."""
    names = {s.rfilename: s for s in siblings}
    for first, shards in _WEIGHT_CHOICES:
        if first in names:
            chosen = [names[first]] + ([s for n, s in sorted(names.items()) if shards.fullmatch(n)] if shards else [])
            break
    else:
        return []
    out = []
    for s in chosen:
        etag = s.lfs.sha256 if s.lfs is not None else s.blob_id
        size = s.lfs.size if s.lfs is not None else s.size
        if not etag or size is None:
            return []
        out.append(HubFile(s.rfilename, etag, int(size)))
    return out


@contextmanager
def reporting(download: Download | None, every: float | None = None) -> Iterator[None]:
    """Log the bytes of ``download`` that have arrived every ``every`` seconds (default
    :data:`REPORT_EVERY`) while the body runs; a line only when the count moved, and a last
    one when it is complete, if the download was long enough to have been reported."""
    if download is None:
        yield
        return
    interval = REPORT_EVERY if every is None else every
    stop = threading.Event()
    stale = download.partials()
    start = time.monotonic()
    shown: list[int] = []

    def watch() -> None:
        last, last_t = 0, start
        while not stop.wait(interval):
            try:
                now, t = download.arrived(stale), time.monotonic()
            except Exception:  # a cache we cannot read: no more lines, the download goes on
                return
            if now == last:
                continue
            rate = (now - last) / max(t - last_t, 1e-9)
            log.info("model: downloaded %s of %s MB of %s (%s MB/s%s)", mb(now), mb(download.total),
                     download.repo_id, mb(rate), _left(download.total - now, rate))
            shown.append(now)
            last, last_t = now, t

    thread = threading.Thread(target=watch, name="clustertune-download-report", daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        thread.join(timeout=5)
        if ok and shown:
            try:
                total = download.arrived(stale)
            except Exception:
                total = 0
            if total >= download.total:
                log.info("model: downloaded %s MB of %s into the Hugging Face cache", mb(total), download.repo_id)
