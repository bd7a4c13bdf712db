"""The order the suite's groups are handed to its two workers (tests/workers.py)."""

from __future__ import annotations

from tests.workers import RANKS, SSH, heavy_first

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
