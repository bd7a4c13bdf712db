"""A sweep on an SSH cluster of two real sshd hosts: its trials (one host each) are spread over
both, two at a time, each an ordinary run whose results come back here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import TINY_CAUSAL, cli_here, read_jsonl, with_

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)


def test_trials_are_spread_over_both_hosts(ssh_cluster, tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(with_(
        TINY_CAUSAL, train={"max_steps": 8, "log_every": 4, "eval_at_start": False},
        launch={"backend": "ssh", "cluster": "loop", "nodes": 1, "procs_per_node": 1,
                "site_packages_from": sys.executable})))
    dry = cli_here("sweep", str(recipe), "train.seed=0,1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "on the recipe's SSH hosts, 2 at a time (one on each group of 1 host(s))" in dry.stdout

    out = cli_here("sweep", str(recipe), "train.seed=0,1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "trial 0 (train.seed=0) on host(s) " in out.stderr and "trial 1 (train.seed=1) on host(s) " in out.stderr
    runs = Path(os.environ["CLUSTERTUNE_RUNS"])
    (sweep_dir,) = (runs / "sweeps").iterdir()
    report = json.loads(cli_here("sweep", "show", sweep_dir.name, "--json").stdout)
    assert [r["state"] for r in report["trials"]] == ["COMPLETED", "COMPLETED"]
    hosts = []
    for r in report["trials"]:
        info = json.loads((runs / r["run_id"] / "run.json").read_text())
        hosts.append(tuple(info["remote"]["nodes"]))
        # The results came back: the metrics as each host's rank 0 wrote them.
        assert [m["step"] for m in read_jsonl(runs / r["run_id"] / "metrics.jsonl") if m["kind"] == "train"] == [4, 8]
    assert sorted(hosts) == [(0,), (1,)]
