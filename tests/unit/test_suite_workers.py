"""How the suite's groups are handed to its workers (tests/workers.py): the order, and which
worker runs the ranks group at what priority."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.workers import GROUPS_ENV, OTHERS_NICE, RANKS, RANKS_WORKER, SSH, heavy_first

ROOT = Path(__file__).resolve().parents[2]

SLOW = {"tests/integration/test_demo.py::test_long": "trains the demo",
        "tests/integration/test_rl.py::test_ppo": "PPO", "tests/integration/test_rl.py::test_grpo": "GRPO"}


def test_the_ranks_group_first_then_integration_by_its_slow_tests_and_unit_modules_last() -> None:
    groups = {
        "tests/unit/cli/test_bad_inputs.py": [f"tests/unit/cli/test_bad_inputs.py::test_bad[{i}]" for i in range(259)],
        "tests/integration/test_cli.py": [f"tests/integration/test_cli.py::test_{i}" for i in range(16)],
        "tests/integration/test_demo.py": ["tests/integration/test_demo.py::test_long",
                                           "tests/integration/test_demo.py::test_short"],
        SSH: [f"tests/integration/test_ssh.py::test_{i}" for i in range(32)],
        "tests/integration/test_rl.py": ["tests/integration/test_rl.py::test_ppo[a]", "tests/integration/test_rl.py::test_grpo"],
        RANKS: ["tests/integration/test_faults.py::test_kill"],
        "tests/unit/test_small.py": ["tests/unit/test_small.py::test_one"],
    }
    order = sorted(groups, key=lambda g: heavy_first(g, groups[g], SLOW))
    # xdist's own order (most tests first) would start the 259 quick unit tests first and the
    # 2-test demo module near the end.
    assert order == [RANKS, "tests/integration/test_rl.py", "tests/integration/test_demo.py", SSH,
                     "tests/integration/test_cli.py", "tests/unit/cli/test_bad_inputs.py", "tests/unit/test_small.py"]


RANKS_MODULE = '''
import json, os, time
import pytest

pytestmark = pytest.mark.ranks

@pytest.mark.parametrize("i", range(4))
def test_ranks(i):
    time.sleep(0.2)
    with open(os.environ["CT_SEEN"], "a") as f:
        f.write(json.dumps({"test": f"ranks-{i}", "worker": os.environ["PYTEST_XDIST_WORKER"], "nice": os.nice(0)}) + "\\n")
'''

OTHER_MODULE = '''
import json, os, time

def test_other():
    time.sleep(0.1)
    with open(os.environ["CT_SEEN"], "a") as f:
        f.write(json.dumps({"test": __name__, "worker": os.environ["PYTEST_XDIST_WORKER"], "nice": os.nice(0)}) + "\\n")
'''


def test_on_three_workers_the_ranks_group_runs_on_the_first_and_the_others_yield_the_cpu_to_it(tmp_path: Path) -> None:
    (tmp_path / "test_m_ranks.py").write_text(RANKS_MODULE)
    for name in "abcdef":
        (tmp_path / f"test_{name}.py").write_text(OTHER_MODULE)
    seen, slow = tmp_path / "seen.jsonl", tmp_path / "slow.txt"
    slow.write_text("")
    env = {**os.environ, "CT_SEEN": str(seen), "CT_SLOW_LIST": str(slow), "PYTHONPATH": str(ROOT)}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", GROUPS_ENV):
        env.pop(name, None)  # the generated run is its own controller
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.workers", "-p", "no:cacheprovider", "-q",
                          "-n", "3", "--dist", "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(rows) == 10, rows
    ranks = [r for r in rows if r["test"].startswith("ranks-")]
    others = [r for r in rows if not r["test"].startswith("ranks-")]
    base = os.nice(0)
    assert {(r["worker"], r["nice"]) for r in ranks} == {(RANKS_WORKER, base)}, ranks
    # While the ranks worker is busy the others take every other group, at a lower priority.
    assert {r["worker"] for r in others} >= {"gw1", "gw2"}, others
    assert all(r["nice"] == min(base + OTHERS_NICE, 19) for r in others if r["worker"] != RANKS_WORKER), others
