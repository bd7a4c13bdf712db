"""The suite holds its own line: a test over the limit fails the run unless tests/slow_tests.txt
lists it with a reason; a session fixture's cost is a fixed cost, not charged to whichever test
asked first; and every listed test still exists. Runs pytest on a small generated suite."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timing import SLOW_LIST, read_slow_list

ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import time
import pytest

@pytest.fixture(scope="session")
def base():
    time.sleep(0.8)  # a fixed cost: a service started, a base run trained
    return 1

def test_quick(base):
    assert base == 1

def test_after_quick(base):
    assert base == 1

def test_slow_listed():
    time.sleep(0.6)

def test_slow_unlisted():
    time.sleep(0.6)
'''


def _run(where: Path, *args: str, listed: str, reference: str = "1000") -> subprocess.CompletedProcess[str]:
    (where / "test_generated.py").write_text(SUITE)
    slow = where / "slow.txt"
    slow.write_text(listed)
    # A reference far slower than any machine holds the pace at 1, so the limit is what is passed.
    env = {**os.environ, "CT_SLOW_LIST": str(slow), "PYTHONPATH": str(ROOT), "CT_PACE_REFERENCE": reference}
    env.pop("PYTEST_XDIST_WORKER", None)  # the generated run is its own controller
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.timing", "-p", "no:cacheprovider",
                           "-q", "--rootdir", str(where), str(where / "test_generated.py"), *args],
                          capture_output=True, text=True, cwd=where, env=env, timeout=120)


def test_an_unlisted_slow_test_fails_the_run_and_is_named(tmp_path: Path) -> None:
    out = _run(tmp_path, "--slow-limit", "0.4", listed="test_generated.py::test_slow_listed  # sleeps on purpose\n")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "4 passed" in out.stdout  # every test passed: the limit alone failed the run
    over = out.stdout.split("tests over 0.4 s not listed", 1)[1]
    assert "test_generated.py::test_slow_unlisted" in over
    assert "test_slow_listed" not in over
    # The session fixture's 0.8 s is a fixed cost, reported apart, not a slow test_quick.
    assert "test_quick" not in over and "test_after_quick" not in over
    fixed = out.stdout.split("fixed costs", 1)[1]
    assert "session:base" in fixed


def test_on_a_machine_slower_than_the_reference_the_limit_grows_by_the_pace_and_says_so(tmp_path: Path) -> None:
    # A reference of 1 microsecond makes any machine "slower": the pace is held at its cap of 3,
    # so the 0.6 s test is under 0.4 s x 3 and passes; the summary names the factor it used.
    out = _run(tmp_path, "--slow-limit", "0.4", listed="", reference="0.000001")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "slow-test limit: 0.4 s x pace 3.00" in out.stdout and "= 1.2 s" in out.stdout
    assert "not listed" not in out.stdout

    # Past even the scaled limit, the test still fails the run.
    out = _run(tmp_path, "--slow-limit", "0.15", listed="", reference="0.000001")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "test_generated.py::test_slow_unlisted" in out.stdout.split("not listed", 1)[1]


def test_an_unlisted_test_past_half_the_limit_is_named_without_failing_the_run(tmp_path: Path) -> None:
    out = _run(tmp_path, "--slow-limit", "1", listed="test_generated.py::test_slow_listed  # sleeps on purpose\n")
    assert out.returncode == 0, out.stdout + out.stderr
    near = out.stdout.split("near the line: unlisted tests over 0.5 s", 1)[1]
    assert "test_generated.py::test_slow_unlisted" in near
    assert "test_slow_listed" not in near and "test_quick" not in near


def test_with_every_slow_test_listed_the_run_passes(tmp_path: Path) -> None:
    listed = ("test_generated.py::test_slow_listed  # sleeps on purpose\n"
              "test_generated.py::test_slow_unlisted  # this one too\n")
    out = _run(tmp_path, "--slow-limit", "0.4", listed=listed)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "not listed" not in out.stdout


def test_without_a_limit_nothing_is_enforced(tmp_path: Path) -> None:
    out = _run(tmp_path, listed="")
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_listed_test_without_a_reason_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "slow.txt"
    path.write_text("tests/unit/test_x.py::test_y\n")
    with pytest.raises(ValueError, match="says why"):
        read_slow_list(path)


def test_every_listed_slow_test_exists_and_says_why() -> None:
    listed = read_slow_list(SLOW_LIST)
    assert listed, "the list is read"
    for nodeid in listed:
        path, _, name = nodeid.split("[", 1)[0].partition("::")
        file = ROOT / path
        assert file.is_file(), f"{SLOW_LIST.name}: {nodeid}: no such file"
        tree = ast.parse(file.read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert name in names, f"{SLOW_LIST.name}: {nodeid}: no such test (renamed or removed? update the list)"
