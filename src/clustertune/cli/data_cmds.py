"""``prepare``, ``cache ls|rm|verify`` and ``stage``."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import typer

from clustertune.cli.completion import complete_override, complete_recipe
from clustertune.cli.tables import print_table
from clustertune.errors import DataError
from clustertune import api
from clustertune.recipe.load import load_recipe

CacheDir = typer.Option(None, "--cache-dir", help="Cache root (default: data.cache_dir, $CLUSTERTUNE_CACHE, ~/.cache/clustertune).")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _age(iso: str) -> str:
    try:
        s = (datetime.now(timezone.utc) - datetime.fromisoformat(iso)).total_seconds()
    except ValueError:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{int(s // size)}{unit}"
    return f"{int(s)}s"


def _source(inputs: dict) -> str:
    src = inputs.get("corpus", {}).get("source", {})
    kind = src.get("kind", "?")
    if kind == "builtin":
        return f"builtin:{src.get('name')}"
    if kind == "hub":
        return f"{src.get('name')}{'/' + src['config'] if src.get('config') else ''}@{str(src.get('commit', ''))[:8]}"
    if kind == "files":
        return f"{len(src.get('train', []))} file(s)"
    return kind


def _cache_root(cache_dir: Path | None) -> Path:
    """The cache root ``cache ls|rm|verify`` look at."""
    return api.data.cache_root(cache_dir)


def prepare(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name.", autocompletion=complete_recipe),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides.", autocompletion=complete_override),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Tokenizing processes (default: data.workers, $SLURM_CPUS_PER_TASK, the CPU affinity mask)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the cache has it (replaces it atomically)."),
    cache_dir: Optional[Path] = CacheDir,
) -> None:
    """Tokenize (and pack) a recipe's data once into the content-addressed cache."""
    r = api.validate(recipe, overrides or [], need_base=True).recipe  # what `run` would refuse, before any work
    t0 = time.perf_counter()
    p = api.data.prepare(r, workers=workers, force=force, cache_dir=cache_dir)
    secs = time.perf_counter() - t0
    tr, va = p.counts("train"), p.counts("validation")
    print(f"fingerprint {p.fingerprint} ({'cache hit' if p.hit else 'prepared'} in {secs:.2f}s)")
    print(f"  dir       {p.dir}")
    print(f"  size      {_mb(p.total_bytes)} in {len(p.manifest.files)} files, ids as {p.manifest.record.dtype}")
    if p.streaming:
        print("  train     streamed: tokenized and packed on the fly while training")
    else:
        print(f"  train     {tr['samples']} samples, {tr['tokens']:,} tokens from {tr['examples']} examples")
    print(f"  eval      {va['samples']} samples, {va['tokens']:,} tokens from {va['examples']} examples")
    for split in ("train", "validation") if r.traits.templated else ():
        s = p.manifest.split(split)
        rows = "packed" if s.packed else "one example per row"
        print(f"  {split:<9} sft: {s.trained_tokens or 0:,} trained tokens, {rows}; "
              f"{s.truncated or 0} truncated, {s.dropped_too_long or 0} dropped as longer than data.max_length, "
              f"{s.dropped_no_loss or 0} dropped with no trained token")
    if not p.hit:
        sec = p.manifest.record.seconds
        print(f"  tokenize  {sec.get('tokenize', 0):.2f}s with {p.manifest.record.created_by.get('workers', 1)} worker(s), "
              f"write {sec.get('write', 0):.2f}s")

cache_app = typer.Typer(help="The prepared-data cache: ls, rm, verify.", no_args_is_help=True)

@cache_app.command("ls")
def cache_ls(cache_dir: Optional[Path] = CacheDir,
             as_json: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout.")) -> None:
    """Prepared entries: fingerprint, task, source, samples, tokens, size, age."""
    root = _cache_root(cache_dir)
    entries = api.data.cache_entries(root)
    if as_json:
        print(json.dumps([_entry_record(m) for m in entries], indent=2))
        return
    if not entries:
        print(f"no prepared data under {root}")
        return
    rows = []
    for m in entries:
        rec = m.record
        tr = rec.splits.get("train")
        rows.append([m.fingerprint, str(rec.task), _source(rec.inputs), str(tr.samples) if tr else "stream",
                     f"{sum(s.tokens for s in rec.splits.values()):,}", _mb(m.total_bytes),
                     _age(rec.created_at or "")])
    print_table(["fingerprint", "task", "source", "train samples", "tokens", "size", "age"], rows,
                drop_first=["age", "tokens", "train samples", "task", "size", "source"])
    print(f"{len(entries)} entries, {_mb(sum(m.total_bytes for m in entries))} under {root}")


def _entry_record(m: Any) -> dict[str, Any]:
    """A prepared entry as plain JSON (``cache ls --json``); keys are stable."""
    rec = m.record
    return {"fingerprint": m.fingerprint, "task": rec.task, "source": _source(rec.inputs),
            "dir": str(m.dir), "bytes": m.total_bytes, "created_at": rec.created_at,
            "splits": {name: split.model_dump(include={"samples", "tokens", "examples"}, exclude_none=True)
                       for name, split in rec.splits.items()}}

@cache_app.command("rm")
def cache_rm(
    fingerprints: Optional[list[str]] = typer.Argument(None, help="Fingerprints (or unique prefixes)."),
    all_: bool = typer.Option(False, "--all", help="Remove every prepared entry."),
    cache_dir: Optional[Path] = CacheDir,
) -> None:
    """Remove prepared entries (waits for a prepare of the same fingerprint to finish)."""
    root = _cache_root(cache_dir)
    if all_:
        targets = [m.dir for m in api.data.cache_entries(root)]
    elif fingerprints:
        targets = api.data.find_cache_entries(root, fingerprints)
    else:
        raise DataError("give fingerprints to remove (`clustertune cache ls` lists them) or --all")
    for d in targets:
        api.data.remove_cache_entry(d)
        print(f"removed {d}")

@cache_app.command("verify")
def cache_verify(
    fingerprints: Optional[list[str]] = typer.Argument(None, help="Fingerprints (or prefixes); default all."),
    cache_dir: Optional[Path] = CacheDir,
) -> None:
    """Check every file's size and sha256 against its manifest; exit 2 if any is bad."""
    root = _cache_root(cache_dir)
    dirs = api.data.find_cache_entries(root, fingerprints) if fingerprints else api.data.entry_dirs(root)
    bad = []
    for d in dirs:
        try:
            m = api.data.read_entry(d)
            m.verify()
            print(f"ok   {d.name}  {len(m.files)} files, {_mb(m.total_bytes)}")
        except DataError as exc:
            bad.append(str(exc))
            print(f"BAD  {d.name}  {exc}")
    if bad:
        raise DataError(f"{len(bad)} of {len(dirs)} prepared entries failed verification")
    print(f"{len(dirs)} entries verified")


def stage(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name.", autocompletion=complete_recipe),
    dest: str = typer.Argument(..., help="Destination root (node-local disk); the data goes to DEST/<fingerprint>/."),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides.", autocompletion=complete_override),
    cache_dir: Optional[Path] = CacheDir,
) -> None:
    """Copy a recipe's prepared data to DEST (what data.stage_to does on each node), verified."""
    r = load_recipe(recipe, overrides or [])
    p, res = api.data.stage(r, dest, cache_dir=cache_dir)
    print(f"staged {p.fingerprint} to {res.dir}")
    print(f"  {_mb(res.copied_bytes)} copied ({res.copied_files} of {res.files} files; the rest were there and valid) "
          f"in {res.seconds:.2f}s, {res.mb_per_s:.0f} MB/s")

def fetch(
    recipe: str = typer.Argument(..., help="Recipe file or shipped name.", autocompletion=complete_recipe),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides.", autocompletion=complete_override),
    store: Path = typer.Option(..., "--store", help="Directory for the local copies (models/, datasets/)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write the local recipe (default STORE/<name>.yaml)."),
    no_prepare: bool = typer.Option(False, "--no-prepare", help="Do not prepare the data afterwards."),
) -> None:
    """On a machine with internet: download the recipe's hub model, tokenizer and dataset into
    STORE and write a recipe that uses those copies (for nodes without internet)."""
    r = load_recipe(recipe, overrides or [])
    res = api.data.fetch(r, store, out, prepare_data=not no_prepare)
    for key, name, dest in res.fetched:
        print(f"{key}: {name} -> {dest}")
    if not res.fetched:
        print("nothing to fetch: the recipe uses no hub model, tokenizer or dataset")
    print(f"recipe: {res.recipe_path}")
    print(f"  run it offline: HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 clustertune run {res.recipe_path}")
