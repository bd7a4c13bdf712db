"""A recipe naming local files (a relative model directory, a user DeepSpeed JSON, a chat
template file, a launch.files script) runs unchanged on two real sshd hosts and as a two-node
job of the real loopback SLURM cluster, submitted from another directory than the recipe's.

SSH: each file reaches each host once per content (a second run sends nothing: rsync's own
count), and a file edited after submission does not reach the resumed run. SLURM: the files
are snapshotted into the run directory, and the setup lines find launch.files by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from clustertune import api
from clustertune.data.templates import CHATML
from clustertune.launch import job_for
from clustertune.runs.state import RunState
from tests.helpers import read_jsonl
from tests.sft_fixtures import arithmetic_rows, make_base, write_jsonl

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

STEPS = 4


def _project(root: Path) -> Path:
    """A user's folder beside the recipe: their base model, DeepSpeed JSON, template, data, setup."""
    root.mkdir(parents=True)
    make_base(root / "distgpt2")
    # ZeRO stage 1: each rank's optimizer shard is written on its own host; the resume below
    # needs the parts of the sealed checkpoint brought together.
    (root / "ds_config.json").write_text(json.dumps({"zero_optimization": {"stage": 1}}))
    (root / "chat.jinja").write_text(CHATML)
    write_jsonl(root / "chats.jsonl", arithmetic_rows(48))
    (root / "setup.sh").write_text('export CT_SETUP_SAYS="set up from launch.files"\n')
    return root


def _recipe(proj: Path, launch: dict, env: dict | None = None) -> Path:
    recipe = {
        "name": "travel", "task": "sft",
        "model": {"name_or_path": "./distgpt2"},
        "data": {"train_files": ["./chats.jsonl"], "max_length": 64, "validation_fraction": 0.1,
                 "sft": {"chat_template": "./chat.jinja", "generation_samples": 0}},
        "train": {"precision": "fp32", "batch_size": 4, "lr": 3e-3, "max_steps": STEPS, "log_every": 1,
                  "save_every": 2, "cpu_threads": 1, "eval_at_start": False,
                  "strategy": "deepspeed", "deepspeed_config": "./ds_config.json"},
        "launch": {"nodes": 2, "procs_per_node": 1, "files": ["./setup.sh"], **launch, "env": env or {}},
    }
    path = proj / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_ssh_hosts_get_each_file_once_and_a_resume_keeps_what_was_submitted(ssh_cluster, sshd_service, tmp_path,
                                                                            monkeypatch):
    proj = _project(tmp_path / "proj")
    once = tmp_path / "fault-fired"
    recipe = _recipe(proj, {"backend": "ssh", "cluster": "loop", "site_packages_from": sys.executable},
                     env={"CLUSTERTUNE_FAULT": "kill:0:3:step", "CLUSTERTUNE_FAULT_ONCE": str(once)})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative paths start beside the recipe

    first = api.run(str(recipe), show_progress=False)
    assert first.state is RunState.FAILED and once.exists(), first.info.reason  # rank 0 killed at step 3
    sent_first = first.info.remote["files_sent_bytes"]
    model_bytes = sum(f.stat().st_size for f in (proj / "distgpt2").iterdir())
    assert all(n > model_bytes for n in sent_first), (sent_first, model_bytes)

    second = api.run(str(recipe), show_progress=False)  # the same files: nothing new goes
    assert second.state is RunState.COMPLETED, second.info.reason
    assert second.info.remote["files_sent_bytes"] == [0, 0]

    # The user edits the JSON and the template after submitting; the resumed run keeps the copies.
    (proj / "ds_config.json").write_text("{ not json")
    (proj / "chat.jinja").write_text("{% broken")
    resumed = api.run(resume=first.id, show_progress=False)
    assert resumed.state is RunState.COMPLETED, resumed.info.reason
    assert [a.state for a in resumed.attempts] == [RunState.FAILED, RunState.COMPLETED]
    assert resumed.info.remote["files_sent_bytes"] == [0, 0]
    summary = json.loads(resumed.paths.summary.read_text())
    assert summary["steps"] == STEPS and summary["resumed_from_step"] == 2
    losses = {r["step"]: r["loss"] for r in read_jsonl(resumed.paths.metrics) if r["kind"] == "train"}
    assert sorted(losses) == [1, 2, 3, 4]
    # Each rank's optimizer shard came back from its host: the resumed steps are the steps of the
    # run that was never interrupted.
    straight = {r["step"]: r["loss"] for r in read_jsonl(second.paths.metrics) if r["kind"] == "train"}
    assert losses == pytest.approx(straight, rel=1e-5), (losses, straight)
    kept = sorted((resumed.paths.root / "checkpoints").glob("step-*"))
    assert kept and all(sorted(p.name for p in (k / "deepspeed").glob("zero_pp_rank_*")) ==
                        [f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)] for k in kept), kept

    # run.json: where each came from, its digest and how it travelled.
    files = {d["key"]: d for d in json.loads(resumed.paths.run_json.read_text())["files"]}
    assert files["model.name_or_path"]["path"] == str(proj / "distgpt2")
    assert files["train.deepspeed_config"]["how"] == "shipped"
    assert files["data.train_files.0"]["how"] == "prepared here"  # read here: the prepared data travels
    local_recipe = yaml.safe_load(resumed.paths.recipe.read_text())
    for h in sshd_service.hosts:
        root = h.root / tmp_path.name
        digests = sorted(p.name for p in (root / "files").iterdir())
        # model, JSON, template and setup.sh: one snapshot each, none added by the edits.
        assert len(digests) == 4 and sorted(d["digest"] for d in files.values() if d["digest"]) == digests
        host_recipe = yaml.safe_load((root / "train" / first.id / "recipe.yaml").read_text())
        assert host_recipe["model"]["name_or_path"] == str(root / "files" / files["model.name_or_path"]["digest"]
                                                           / "distgpt2")
        ds = Path(host_recipe["train"]["deepspeed_config"])
        assert ds.is_relative_to(root / "files") and json.loads(ds.read_text())["zero_optimization"]["stage"] == 1
        link = root / "train" / first.id / "files" / "setup.sh"
        assert "set up from launch.files" in link.read_text()
    # The local recipe names the local store's copies, never a host's paths.
    assert "/files/" in local_recipe["train"]["deepspeed_config"]
    assert not local_recipe["train"]["deepspeed_config"].startswith(str(tmp_path / "sshd"))


def test_slurm_two_node_job_reads_snapshots_in_the_run_directory(slurm_cluster, runs_root, tmp_path, monkeypatch):
    proj = _project(tmp_path / "proj")
    recipe = _recipe(proj, {"backend": "slurm", "cpus_per_task": 1,
                            "setup": ['. "$CLUSTERTUNE_FILES/setup.sh"', 'echo "setup: $CT_SETUP_SAYS"']})
    monkeypatch.chdir(tmp_path)
    dry = api.dry_run(str(recipe))
    assert f"# model.name_or_path: {proj / 'distgpt2'} (" in dry and "snapshotted into the run directory" in dry
    run = api.run(str(recipe), show_progress=False)
    state = job_for(run).wait(timeout=300)
    assert state is RunState.COMPLETED, f"{run.reload().info.reason}\n{job_for(run).logs()}"
    node_recipe = yaml.safe_load(run.paths.recipe.read_text())
    for key in (("model", "name_or_path"), ("train", "deepspeed_config"), ("data", "sft", "chat_template")):
        value = node_recipe
        for k in key:
            value = value[k]
        assert Path(value).is_relative_to(run.paths.snapshots), (key, value)
    assert Path(node_recipe["data"]["train_files"][0]).is_relative_to(run.paths.snapshots)  # the job prepares it
    # The batch script's own output (setup lines run there, before the data step).
    logs = "".join(p.read_text() for p in run.paths.logs_dir.glob("slurm-*.out"))
    assert "setup: set up from launch.files" in logs, logs[-3000:]
    summary = json.loads(run.paths.summary.read_text())
    assert summary["steps"] == STEPS
    ranks = "".join(p.read_text() for p in run.paths.logs_dir.glob("rank-*.log"))
    assert "rank 1/2 on node" in ranks

    # A site whose nodes see the project directory: its files are read there, nothing is copied.
    shared = api.run(str(recipe), [f"launch.node_visible=[{tmp_path}]", "train.max_steps=2"], show_progress=False)
    state = job_for(shared).wait(timeout=300)
    assert state is RunState.COMPLETED, f"{shared.reload().info.reason}\n{job_for(shared).logs()}"
    node_recipe = yaml.safe_load(shared.paths.recipe.read_text())
    assert node_recipe["model"]["name_or_path"] == str(proj / "distgpt2")
    assert node_recipe["train"]["deepspeed_config"] == str(proj / "ds_config.json")
    assert not shared.paths.snapshots.exists()
    assert {d["how"] for d in shared.info.files} == {"in place"}

