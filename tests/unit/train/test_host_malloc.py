"""Freed host memory kept for the next step (train/host_malloc.py): a block a step frees is not
faulted in again at the next step, the user's own malloc settings are left alone, and a training
run sets it in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clustertune.train import host_malloc

# Forty times: 48 MiB asked for, every page written, freed. 48 MiB is over the 32 MiB that glibc's
# dynamic mmap threshold reaches at most, so with its defaults each round is a fresh mapping
# (its pages faulted in, zeroed by the kernel, unmapped at free).
CYCLES = textwrap.dedent("""
    import ctypes, json, resource, sys
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    kept = None
    if sys.argv[1] == "keep":
        from clustertune.train.host_malloc import keep_freed_memory
        kept = keep_freed_memory()
    elif sys.argv[1] == "run":
        import clustertune as ct
        ct.run(ct.load_recipe(sys.argv[2]), runs_root_dir=sys.argv[3], show_progress=False)
    size = 48 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(40):
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        libc.free(block)
    print(json.dumps({"kept": kept, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
""")


def cycles(*args: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k != host_malloc.OPT_OUT and k != "GLIBC_TUNABLES"
             and not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", CYCLES, *args], capture_output=True, text=True, timeout=300,
                         env={**clean, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def default() -> dict:
    """The forty rounds with glibc's own settings: each a fresh mapping, every page faulted in (12,288
    a round at 4 KiB pages; fewer, larger faults where the kernel backs them with huge pages)."""
    return cycles("default")


def test_a_freed_block_is_used_again_without_faulting_its_pages_in_again(default: dict) -> None:
    kept = cycles("keep")
    assert kept["kept"] is True
    # The first round's pages, then the same block again: a fortieth of the faults, or close to it.
    assert kept["faults"] * 4 < default["faults"], (kept, default)


def test_the_opt_out_leaves_glibcs_defaults(default: dict) -> None:
    out = cycles("keep", **{host_malloc.OPT_OUT: "0"})
    assert out["kept"] is False and out["faults"] * 2 > default["faults"], (out, default)


@pytest.mark.parametrize(("env", "named"), [
    ({"CLUSTERTUNE_KEEP_FREED_MEMORY": "0"}, "CLUSTERTUNE_KEEP_FREED_MEMORY=0"),
    ({"CLUSTERTUNE_KEEP_FREED_MEMORY": "off"}, "CLUSTERTUNE_KEEP_FREED_MEMORY=off"),
    ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, "GLIBC_TUNABLES"),
    ({"MALLOC_ARENA_MAX_": "2", "MALLOC_TRIM_THRESHOLD_": "0"}, "MALLOC_ARENA_MAX_"),
    ({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}, "jemalloc"),
    ({"LD_PRELOAD": "libtcmalloc_minimal.so.4"}, "tcmalloc"),
])
def test_the_users_own_malloc_settings_are_theirs(env: dict[str, str], named: str) -> None:
    why = host_malloc.users_own_choice(env)
    assert why is not None and named in why


@pytest.mark.parametrize("env", [{}, {"CLUSTERTUNE_KEEP_FREED_MEMORY": "1"}, {"GLIBC_TUNABLES": "glibc.rtld.nns=2"},
                                 {"LD_PRELOAD": "libfoo.so"}, {"MALLOC_CHECK": "3"}])
def test_other_settings_do_not_stop_it(env: dict[str, str]) -> None:
    assert host_malloc.users_own_choice(env) is None


def test_a_glibc_that_refuses_1_gib_gets_its_largest_threshold_and_one_that_refuses_all_keeps_its_own() -> None:
    calls: list[tuple[int, int]] = []

    def older_glibc(param: int, value: int) -> int:  # refuses an mmap threshold over 32 MiB, as glibc 2.34 does
        calls.append((param, value))
        return 0 if param == host_malloc.M_MMAP_THRESHOLD and value > 32 << 20 else 1

    assert host_malloc.apply(older_glibc) is True
    assert calls == [(host_malloc.M_MMAP_THRESHOLD, 1 << 30), (host_malloc.M_MMAP_THRESHOLD, 32 << 20),
                     (host_malloc.M_TRIM_THRESHOLD, 1 << 30)]
    calls.clear()

    def refuses(param: int, value: int) -> int:
        calls.append((param, value))
        return 0

    # Never the trim threshold alone: that would fix the mmap threshold at 128 KiB.
    assert host_malloc.apply(refuses) is False
    assert [p for p, _ in calls] == [host_malloc.M_MMAP_THRESHOLD, host_malloc.M_MMAP_THRESHOLD]


def test_a_training_run_keeps_freed_memory_in_its_process(tmp_path: Path, default: dict) -> None:
    import yaml

    from tests.helpers import TINY_CAUSAL, with_

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(with_(TINY_CAUSAL, train={**TINY_CAUSAL["train"], "max_steps": 1,
                                                                "eval_at_start": False})))
    after_run = cycles("run", str(recipe), str(tmp_path / "runs"), CLUSTERTUNE_CACHE=str(tmp_path / "cache"),
                       HF_HUB_OFFLINE="1")
    assert after_run["faults"] * 4 < default["faults"], (after_run, default)
