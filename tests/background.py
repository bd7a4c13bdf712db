"""Costly runs that tests only read, started as soon as the tests are collected and run beside them
on the cores' spare time.

The suite's two workers leave about a third of the two cores idle (measured with process
accounting: 1,980 CPU seconds in a 1,378 s run): tests wait on SLURM, on servers and on each
other's ranks. Runs such as the quickstart that many tests read, the SFT demo trained on it, and
the benchmark smokes and the GPU script's CPU rehearsal are work with no timing asserted, so
one process, the
runner, starts them at the start under ``SCHED_IDLE`` (a core's spare time only, never taken from
a test), one after another, and writes each result as JSON. A test that reads one waits for it
(its worker then idles, so the run has a core to itself) and asserts what it asserted before.

- A job is a function ``job(folder, need) -> dict`` (JSON), named in :data:`JOBS` with the
  fixture whose tests read it; ``need(name)`` gives another job's folder and result.
- The workers say which jobs the collected tests read (by fixture name); the controller starts
  the runner once (``pytest_xdist_node_collection_finished``, or ``pytest_collection_finish``
  without workers) and stops it at the end.
- Without a runner (a job no collected test named, or a session started without this plugin's
  controller) a test builds the job itself, once across workers, as before.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ENV = "CT_BACKGROUND_DIR"
ROOT = Path(__file__).resolve().parents[1]
# name -> (fixture whose tests read it, "module:function" that builds it, jobs it reads first).
JOBS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "quickstart": ("quickstart_cli_run", "tests.quickstart_fixture:train", ()),
    "smokes": ("one_process_smoke_runs", "tests.integration.test_benchmark_smoke_one_process:run_all", ()),
    "rank-smokes": ("rank_smoke_runs", "tests.integration.test_benchmark_smoke:run_all", ()),
    "sft-demo": ("sft_demo_run", "tests.integration.test_sft_demo:run_demo", ("quickstart",)),
    "sft-chats": ("sft_chats_run", "tests.integration.test_sft_demo:run_chats", ("quickstart",)),
    "gpu-rehearsal": ("rehearsal", "tests.integration.test_gpu_hour_rehearsal:rehearse", ()),
}
WAIT_S = 1800  # the runner is one process doing at most a few minutes of work per job


def jobs_for(fixturenames: set[str]) -> list[str]:
    """The jobs tests with these fixtures read, each after the jobs it reads, in JOBS' order."""
    wanted = {name for name, (fixture, _, _) in JOBS.items() if fixture in fixturenames}
    for name in list(wanted):
        wanted.update(JOBS[name][2])
    return [name for name in JOBS if name in wanted]


def reader_groups() -> set[str]:
    """The test groups (tests/workers.py) with a test that reads a job: the scheduler hands them
    out after the other integration groups, so the jobs have had the most spare time."""
    folder = _folder()
    needs = folder / "needs.json" if folder else None
    return set(json.loads(needs.read_text())["readers"]) if needs and needs.is_file() else set()


def _folder() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


# --- the controller: start the runner once the tests are known, stop it at the end -------------

def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None and ENV not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="ct-background-"))
        os.environ[ENV] = str(folder)
        config.stash[_OWNED] = folder
        # One client identity for the whole test run, as one user has on one machine: a
        # checkpoint the runner's quickstart wrote is one that every worker's tests may load.
        from clustertune.identity import IDENTITY_FILE, create_once

        create_once(folder / "config" / IDENTITY_FILE, secrets.token_hex(32) + "\n")


def share_identity(config_dir: Path) -> None:
    """Give a worker's config directory the test run's one identity key (the runner's too)."""
    folder = _folder()
    if folder is not None:
        from clustertune.identity import IDENTITY_FILE

        key = folder / "config" / IDENTITY_FILE
        if key.is_file():
            shutil.copy2(key, config_dir / IDENTITY_FILE)


_OWNED = pytest.StashKey[Path]()
_RUNNER = pytest.StashKey[subprocess.Popen[bytes]]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    folder = _folder()
    if folder is None:
        return
    from tests.workers import group_of

    names, readers = set(), set()
    for item in session.items:
        fixtures = set(getattr(item, "fixturenames", ()))
        names.update(fixtures)
        if jobs_for(fixtures):
            readers.add(group_of(item))
    jobs = jobs_for(names)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Before xdist's own hook tells the controller that this worker has collected.
        tmp = folder / f"needs.{os.environ['PYTEST_XDIST_WORKER']}"
        tmp.write_text(json.dumps({"jobs": jobs, "readers": sorted(readers)}))
        os.replace(tmp, folder / "needs.json")
    elif _OWNED in session.config.stash:  # no workers: this process runs the tests
        _start(session.config, jobs)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Any) -> None:
    config = node.config
    folder = config.stash.get(_OWNED, None)
    if folder is not None and _RUNNER not in config.stash and (folder / "needs.json").is_file():
        _start(config, json.loads((folder / "needs.json").read_text())["jobs"])


def _start(config: pytest.Config, jobs: list[str]) -> None:
    folder = config.stash[_OWNED]
    (folder / "planned.json").write_text(json.dumps(jobs))
    if not jobs:
        return
    log = open(folder / "runner.log", "wb")  # noqa: SIM115 - the runner's, closed when it ends
    config.stash[_RUNNER] = subprocess.Popen([sys.executable, "-m", "tests.background", str(folder), *jobs],
                                             cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    runner = config.stash.get(_RUNNER, None)
    if runner is not None and runner.poll() is None:
        try:
            os.killpg(runner.pid, signal.SIGKILL)  # its runs too: each is in the runner's session
        except ProcessLookupError:
            pass
        runner.wait()
    folder = config.stash.get(_OWNED, None)
    if folder is not None:
        _end_cgroup(folder)
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(ENV, None)


# --- a test's side: the result, waited for, or built here -----------------------------------------

def result(name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Job ``name``'s folder and JSON: the runner's (waited for) when it was planned, else built by
    this process once across workers (tests.workers.once_across_workers)."""
    folder = _folder()
    planned = folder / "planned.json" if folder else None
    deadline = time.monotonic() + 60
    while planned is not None and not planned.is_file() and time.monotonic() < deadline:
        time.sleep(0.2)  # the controller writes it when the workers have collected, before any test
    if planned is not None and planned.is_file() and name in json.loads(planned.read_text()):
        return _wait(folder, name)  # type: ignore[arg-type]
    from tests.workers import once_across_workers

    return once_across_workers(tmp_path_factory, name,
                               lambda where: _build(name, where, lambda dep: result(dep, tmp_path_factory)))


def _wait(folder: Path, name: str) -> tuple[Path, dict[str, Any]]:
    done, failed = folder / f"{name}.json", folder / f"{name}.error"
    deadline = time.monotonic() + WAIT_S
    while not done.is_file():
        if failed.is_file():
            raise RuntimeError(f"the background job {name!r} failed:\n{failed.read_text()[-4000:]}")
        if (folder / "runner.exit").is_file() and not done.is_file():
            log = (folder / "runner.log").read_text(errors="replace")[-4000:]
            raise RuntimeError(f"the background runner ended without {name!r}; its log:\n{log}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the background job {name!r} is not done after {WAIT_S} s")
        time.sleep(0.5)
    return folder / name, json.loads(done.read_text())


def _build(name: str, where: Path, need: Callable[[str], tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    module, func = JOBS[name][1].split(":")
    return getattr(importlib.import_module(module), func)(where, need)


# --- the runner: python -m tests.background FOLDER JOB... ------------------------------------------

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")


def _cgroup(folder: Path) -> Path:
    return CGROUP_CPU / f"clustertune-tests-{folder.name}"


def _idle_only(folder: Path) -> None:
    """This process and all it starts get the cores' spare time only.

    SCHED_IDLE alone is not enough: with the kernel's autogroups (on here), each session is a
    group that shares the cores equally with the others, and a job's launcher that starts its
    ranks in a session of their own makes a new group at full weight (measured: the tests beside
    the jobs ran 1.4x slower). A cpu cgroup marked idle holds every process the jobs start, in
    whatever session; where none can be made, the runner's own autogroup gets the lowest weight."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    group = _cgroup(folder)
    try:
        group.mkdir()
        (group / "cpu.idle").write_text("1")
        (group / "cgroup.procs").write_text(str(os.getpid()))
        print(f"in the idle cpu cgroup {group}", flush=True)
    except OSError as exc:
        Path("/proc/self/autogroup").write_text("19")
        print(f"no idle cpu cgroup ({exc}); autogroup nice 19", flush=True)


def _end_cgroup(folder: Path) -> None:
    """Stop what the jobs left in the cgroup (a launcher's ranks in sessions of their own) and
    remove it. The runner calls it last, from outside it; the controller again, in case the
    runner was killed."""
    group = _cgroup(folder)
    if not group.is_dir():
        return
    if str(os.getpid()) in (group / "cgroup.procs").read_text().split():
        (CGROUP_CPU / "cgroup.procs").write_text(str(os.getpid()))
    for _ in range(50):
        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    try:
        group.rmdir()
    except OSError:
        pass


def _run(folder: Path, jobs: list[str]) -> None:
    _idle_only(folder)
    os.environ.update({"CLUSTERTUNE_CACHE": str(folder / "data-cache"), "CLUSTERTUNE_CONFIG_DIR": str(folder / "config"),
                       "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                       # One core's spare time at a time: a second thread would wait on the first.
                       "OMP_NUM_THREADS": "1"})
    (folder / "data-cache").mkdir()
    results: dict[str, tuple[Path, dict[str, Any]]] = {}
    for name in jobs:
        where = folder / name
        where.mkdir()
        start = time.monotonic()
        try:
            out = _build(name, where, lambda dep: results[dep])
        except Exception:  # the tests that read it report it
            (folder / f"{name}.error").write_text(traceback.format_exc())
            continue
        results[name] = (where, out)
        tmp = folder / f"{name}.json.tmp"
        tmp.write_text(json.dumps(out))
        os.replace(tmp, folder / f"{name}.json")
        print(f"{name}: {time.monotonic() - start:.1f} s", flush=True)


def main(argv: list[str]) -> None:
    try:
        _run(Path(argv[0]), argv[1:])
    finally:
        _end_cgroup(Path(argv[0]))
        Path(argv[0], "runner.exit").write_text("")


if __name__ == "__main__":
    main(sys.argv[1:])
