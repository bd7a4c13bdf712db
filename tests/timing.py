"""Where the suite's time goes, and a limit on it.

Each test's own time is its call plus its own setup: the function-scoped fixtures it builds.
What a session- or module-scoped fixture costs (a service started, a base run trained) is a fixed
cost, paid once by whichever test asks first; it is counted apart, so that a test's figure does
not depend on the order the tests ran in (which differs between runs under pytest-xdist).

With ``--slow-limit S`` (``scripts/test.sh`` passes 30), a test whose own time is over S seconds
fails the session unless ``tests/slow_tests.txt`` lists it with the reason. The end of the
session prints the fixed costs, each fixture's setup in seconds, beside pytest's own durations.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

# CT_SLOW_LIST names another list: the suite's own test of this plugin runs it on a generated suite.
SLOW_LIST = Path(os.environ.get("CT_SLOW_LIST") or Path(__file__).with_name("slow_tests.txt"))
_SHARED_KEY = "ct_shared_fixture_s"  # seconds spent in higher-scoped fixtures during a test's setup
_FIXED_KEY = "ct_fixed_costs"  # [(scope:fixture, seconds)] set up during a test's setup

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

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when not in ("setup", "call"):
            return
        props = dict(report.user_properties)
        self.own[report.nodeid] += report.duration - props.get(_SHARED_KEY, 0.0)
        for name, seconds in props.get(_FIXED_KEY, []):
            self.fixed[name] += seconds

    def over(self, limit: float) -> list[tuple[str, float]]:
        listed = read_slow_list()
        return sorted(((n, s) for n, s in self.own.items() if s > limit and not _listed(n, listed)),
                      key=lambda x: -x[1])


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the controller (or a run without workers) sums it up
        config.pluginmanager.register(_Tally(), "ct-tally")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    tally: _Tally | None = config.pluginmanager.get_plugin("ct-tally")
    if tally is None:
        return
    tr = terminalreporter
    if fixed := sorted(((n, s) for n, s in tally.fixed.items() if s >= 0.1), key=lambda x: -x[1])[:25]:
        tr.section("fixed costs: session and module fixtures, seconds to set up (summed over workers)")
        for name, seconds in fixed:
            tr.write_line(f"{seconds:8.2f}s  {name}")
    limit = config.getoption("--slow-limit")
    if limit is not None and (over := tally.over(limit)):
        tr.section(f"tests over {limit:g} s not listed in {SLOW_LIST.name}", red=True)
        for nodeid, seconds in over:
            tr.write_line(f"{seconds:8.2f}s  {nodeid}")
        tr.write_line("make them faster, or list each with the reason it needs the time")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    tally: _Tally | None = session.config.pluginmanager.get_plugin("ct-tally")
    limit = session.config.getoption("--slow-limit")
    if tally is not None and limit is not None and tally.over(limit) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
