"""Where the suite's time goes, and a limit on it.

Each test's own time is its call plus its own setup: the function-scoped fixtures it builds.
What a session- or module-scoped fixture costs (a service started, a base run trained) is a fixed
cost, paid once by whichever test asks first; it is counted apart, so that a test's figure does
not depend on the order the tests ran in (which differs between runs under pytest-xdist).

With ``--slow-limit S`` (``scripts/test.sh`` passes 30), a test whose own time is over S seconds
fails the session unless ``tests/slow_tests.txt`` lists it with the reason. The end of the
session prints the fixed costs, each fixture's setup in seconds, beside pytest's own durations.

S is seconds on an idle machine of the size CI runs on. A machine that is slower, or shared with
other work, runs every test slower by about the same factor, so the limit is scaled by the pace:
a fixed piece of work timed before the first test and after the last, against the time it takes
on the idle reference machine (never below 1, at most 3). The summary prints the factor it used.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

# CT_SLOW_LIST names another list: the suite's own test of this plugin runs it on a generated suite.
SLOW_LIST = Path(os.environ.get("CT_SLOW_LIST") or Path(__file__).with_name("slow_tests.txt"))
_SHARED_KEY = "ct_shared_fixture_s"  # seconds spent in higher-scoped fixtures during a test's setup
_FIXED_KEY = "ct_fixed_costs"  # [(scope:fixture, seconds)] set up during a test's setup

# Median seconds of _work() on an idle 2-core CI-size machine (2026-12-02: 0.144-0.162 over 14 runs).
PACE_REFERENCE_S = float(os.environ.get("CT_PACE_REFERENCE") or 0.154)
PACE_CAP = 3.0

_pending: dict[str, float] = defaultdict(float)  # this process's fixture seconds, per fixture
_current: list[str] = []  # the nodeid being set up in this process


def read_slow_list(path: Path = SLOW_LIST) -> dict[str, str]:
    """``nodeid  # reason`` per line (a parametrized test may be named without its brackets)."""
    listed: dict[str, str] = {}
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        nodeid, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise ValueError(f"{path}:{n}: every slow test says why it is slow: `{nodeid.strip()}  # reason`")
        listed[nodeid.strip()] = reason.strip()
    return listed


def _work() -> float:
    """Seconds for a fixed piece of single-core work: interpreter loops and hashing, what tests do."""
    start = time.perf_counter()
    total = 0
    for i in range(600_000):
        total += i * i % 7
    digest = hashlib.sha256()
    for _ in range(2000):
        digest.update(b"x" * 4096)
    return time.perf_counter() - start


def pace() -> float:
    """How much slower this machine is now than the idle reference (1 when not slower, at most 3)."""
    return min(PACE_CAP, max(1.0, statistics.median(_work() for _ in range(7)) / PACE_REFERENCE_S))


def _listed(nodeid: str, listed: dict[str, str]) -> bool:
    return nodeid in listed or nodeid.split("[", 1)[0] in listed


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow-limit", type=float, default=None, metavar="S",
                     help="fail the session when a test not listed in tests/slow_tests.txt takes over S seconds "
                          "(its call plus its own setup)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    _current.append(item.nodeid)
    try:
        yield
    finally:
        _current.pop()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Iterator[None]:
    # A fixture's own dependencies are set up before this hook runs for it, so nothing is counted twice.
    start = time.perf_counter()
    yield
    if fixturedef.scope != "function" and _current:
        _pending[f"{fixturedef.scope}:{fixturedef.argname}"] += time.perf_counter() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if call.when == "setup" and _pending:
        report = outcome.get_result()
        # user_properties travel with the report from a pytest-xdist worker to the controller.
        report.user_properties.append((_SHARED_KEY, sum(_pending.values())))
        report.user_properties.append((_FIXED_KEY, sorted(_pending.items())))
        _pending.clear()


class _Tally:
    def __init__(self) -> None:
        self.own: dict[str, float] = defaultdict(float)
        self.fixed: dict[str, float] = defaultdict(float)
        self.busy: dict[str, float] = defaultdict(float)  # seconds of tests and fixtures, per worker
        self.started = time.perf_counter()
        self.paces: list[float] = []  # before the first test and after the last (--slow-limit only)

    def limit(self, base: float) -> float:
        return base * max(self.paces, default=1.0)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        gateway = getattr(getattr(report, "node", None), "gateway", None)  # the pytest-xdist worker it ran on
        self.busy[getattr(gateway, "id", "main")] += report.duration
        if report.when not in ("setup", "call"):
            return
        props = dict(report.user_properties)
        self.own[report.nodeid] += report.duration - props.get(_SHARED_KEY, 0.0)
        for name, seconds in props.get(_FIXED_KEY, []):
            self.fixed[name] += seconds

    def over(self, base: float, floor: float = 1.0) -> list[tuple[str, float]]:
        """Unlisted tests over the scaled limit (with ``floor`` 0.5: over half of it)."""
        listed = read_slow_list()
        limit = self.limit(base)
        return sorted(((n, s) for n, s in self.own.items() if s > limit * floor and not _listed(n, listed)),
                      key=lambda x: -x[1])


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller (or a run without workers) sums it up
        tally = _Tally()
        if config.getoption("--slow-limit") is not None:
            tally.paces.append(pace())
        config.pluginmanager.register(tally, "ct-tally")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    tally: _Tally | None = config.pluginmanager.get_plugin("ct-tally")
    if tally is None:
        return
    tr = terminalreporter
    if fixed := sorted(((n, s) for n, s in tally.fixed.items() if s >= 0.1), key=lambda x: -x[1])[:25]:
        tr.section("fixed costs: session and module fixtures, seconds to set up (summed over workers)")
        for name, seconds in fixed:
            tr.write_line(f"{seconds:8.2f}s  {name}")
    if len(tally.busy) > 1:
        wall = time.perf_counter() - tally.started
        tr.write_line(f"busy per worker (tests and fixtures; session {wall:.0f} s): "
                      + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(tally.busy.items())))
    limit = config.getoption("--slow-limit")
    if limit is None:
        return
    scaled = tally.limit(limit)
    tr.write_line(f"slow-test limit: {limit:g} s x pace {max(tally.paces, default=1.0):.2f} (this machine against the idle "
                  f"reference, before and after: {', '.join(f'{p:.2f}' for p in tally.paces)}) = {scaled:g} s")
    if over := tally.over(limit):
        tr.section(f"tests over {scaled:g} s not listed in {SLOW_LIST.name}", red=True)
        for nodeid, seconds in over:
            tr.write_line(f"{seconds:8.2f}s  {nodeid}")
        tr.write_line("make them faster, or list each with the reason it needs the time")
    if near := [(n, s) for n, s in tally.over(limit, floor=0.5) if s <= scaled]:
        tr.section(f"near the line: unlisted tests over {scaled / 2:g} s (a slower machine may take them past it)")
        for nodeid, seconds in near:
            tr.write_line(f"{seconds:8.2f}s  {nodeid}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    tally: _Tally | None = session.config.pluginmanager.get_plugin("ct-tally")
    limit = session.config.getoption("--slow-limit")
    if tally is None or limit is None:
        return
    tally.paces.append(pace())  # before the summary prints the limit it used
    if tally.over(limit) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
