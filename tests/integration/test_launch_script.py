"""`clustertune launch -- COMMAND` on this host: a plain PyTorch DDP script with its own
checkpointing on 2 ranks, cancelled part-way (it saves on SIGTERM) and resumed as a new attempt
to the same final loss as an uninterrupted run; a command the node does not have; runner none."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clustertune.launch import job_for
from clustertune import api
from clustertune.runs.state import RunState
from tests.helpers import as_from_a_terminal, cli
from tests.integration.script_fixtures import ACCELERATE_SCRIPT, DDP_SCRIPT

pytestmark = pytest.mark.ranks  # starts several processes of its own (tests/workers.py)

STEPS = 30


def _only_run(runs_root: Path) -> Path:
    (run,) = [d for d in runs_root.iterdir() if (d / "run.json").is_file()]
    return run


def _info(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


def _wait_progress(run_dir: Path, step: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = (run_dir / "progress").read_text().strip() if (run_dir / "progress").is_file() else ""
        if text and int(text) >= step:
            return
        time.sleep(0.2)
    raise AssertionError(f"the script did not reach step {step}: {sorted(p.name for p in (run_dir / 'logs').iterdir())}")


@pytest.fixture(scope="module")
def uninterrupted_loss(tmp_path_factory: pytest.TempPathFactory) -> float:
    """The DDP script's final loss on 2 ranks, never interrupted (the local backend, via the CLI)."""
    where = tmp_path_factory.mktemp("straight")
    (where / "train.py").write_text(DDP_SCRIPT)
    out = cli("launch", "launch.procs_per_node=2", "--runs-root", str(where / "runs"), "--",
              sys.executable, "train.py", str(STEPS), cwd=where)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads((_only_run(where / "runs") / "final.json").read_text())["loss"]


def test_a_ddp_script_cancelled_part_way_resumes_to_the_uninterrupted_loss(
        tmp_path: Path, runs_root: Path, uninterrupted_loss: float) -> None:
    (tmp_path / "train.py").write_text(DDP_SCRIPT)
    want = uninterrupted_loss

    exe = Path(sys.executable).with_name("clustertune")
    first = subprocess.Popen([str(exe), "launch", "launch.procs_per_node=2", "launch.stop_grace_seconds=20", "--",
                              sys.executable, "train.py", str(STEPS)], cwd=tmp_path, env={**os.environ, "STEP_PAUSE": "0.1", "HOLD_AT": "5"},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    deadline = time.monotonic() + 60
    while not list(runs_root.glob("*/run.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    run = _only_run(runs_root)
    _wait_progress(run, 3)
    status = cli("status", run.name)
    assert status.returncode == 0 and "RUNNING" in status.stdout, status.stdout + status.stderr
    assert cli("cancel", run.name).returncode == 0
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 130, stdout + stderr  # the launching process was interrupted by the cancel
    assert [(a["state"], a["exit_code"]) for a in _info(run)["attempts"]] == [("CANCELLED", 0)]
    saved_at = int((run / "progress").read_text())
    assert saved_at == 5  # where the script waited for the cancel

    again = cli("launch", "--resume", run.name, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    final = json.loads((run / "final.json").read_text())
    assert final == {"loss": want, "attempt": 2}
    info = _info(run)
    assert info["state"] == "COMPLETED" and info["task"] == "command"
    assert [(a["state"], a["exit_code"]) for a in info["attempts"]] == [("CANCELLED", 0), ("COMPLETED", 0)]
    assert json.loads((run / "command.json").read_text()) == [sys.executable, "train.py", str(STEPS)]
    assert "procs_per_node: 2" in (run / "launch.yaml").read_text()
    rank1 = (run / "logs" / "rank-1.log").read_text()
    assert "rank 1/2 attempt 1 starts at step 0" in rank1 and f"attempt 2 starts at step {saved_at}" in rank1
    logs = cli("logs", run.name)
    assert "rank 0 saved at step" in logs.stdout and "rank 0 done" in logs.stdout
    listing = cli("runs")
    assert run.name in listing.stdout and "COMPLETED" in listing.stdout
    shown = cli("runs", "show", run.name).stdout
    assert f"command   {sys.executable} train.py {STEPS}" in shown
    assert "attempt 1  CANCELLED" in shown and "attempt 2  COMPLETED" in shown and "exit code 0" in shown


def test_sighup_to_the_launcher_is_a_stop_request_the_script_saves_on(tmp_path: Path, runs_root: Path) -> None:
    # The terminal closed: the script's ranks (in a session of their own) get the stop request,
    # save and exit 0; the run is PREEMPTED, so `--resume` goes on from the save.
    code = ("import time, sys\nfrom clustertune import script\n"
            "for step in range(100000):\n"
            "    (script.run_dir() / 'progress').write_text(str(step))\n"
            "    if script.should_stop():\n"
            "        print('saved at', step, flush=True); sys.exit(0)\n"
            "    time.sleep(0.05)\n")
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "launch", "--", sys.executable, "-c", code], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list(runs_root.glob("*/run.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        run = _only_run(runs_root)
        _wait_progress(run, 2, timeout=60)
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    info = _info(run)
    assert info["state"] == "PREEMPTED" and "SIGHUP" in info["reason"], info
    assert [(a["state"], a["exit_code"]) for a in info["attempts"]] == [("PREEMPTED", 0)]
    assert "saved at" in (run / "logs" / "rank-0.log").read_text()


def test_a_command_the_node_does_not_have_fails_with_its_message(tmp_path: Path, runs_root: Path) -> None:
    out = cli("launch", "--", "no-such-command-here", "--flag", cwd=tmp_path)
    assert out.returncode == 1
    info = _info(_only_run(runs_root))
    assert info["state"] == "FAILED" and info["attempts"][0]["exit_code"] == 127
    assert info["reason"].startswith("clustertune: cannot start 'no-such-command-here' on ")


def test_runner_none_runs_the_command_once_with_the_placeholders_filled(tmp_path: Path, runs_root: Path) -> None:
    # `python -S`: no site-packages, so no installed clustertune; the helper comes from the run directory.
    code = ("import os, sys; from clustertune import script; "
            "print('args', sys.argv[1:], 'rank', os.environ.get('RANK'), 'helper', script.__file__)")
    out = cli("launch", "launch.runner=none", "--", sys.executable, "-S", "-c", code, "{node_rank}/{nnodes}",
              "{master_addr}", "{unknown}", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    run = _only_run(runs_root)
    log = (run / "logs" / "node-0.log").read_text()
    assert f"args ['0/1', '127.0.0.1', '{{unknown}}'] rank None helper {run / 'lib' / 'clustertune' / 'script' / '__init__.py'}" in log


def test_launch_files_reach_a_users_command_by_name(tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "vocab.txt").write_text("alpha beta\n")
    code = ("import os, pathlib; d = pathlib.Path(os.environ['CLUSTERTUNE_FILES']); "
            "print('read', (d / 'vocab.txt').read_text().strip())")
    out = cli("launch", "launch.files=[./vocab.txt]", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    run = _only_run(runs_root)
    assert "read alpha beta" in (run / "logs" / "rank-0.log").read_text()
    assert os.readlink(run / "files" / "vocab.txt") == str(tmp_path / "vocab.txt")  # a local run: in place
    missing = cli("launch", "launch.files=[./nope.txt]", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert missing.returncode == 2 and "launch.files.0: './nope.txt' does not exist" in missing.stderr
    assert len(list(runs_root.glob("*/run.json"))) == 1  # nothing was created for it


# -- the same script on the 2-node SLURM test cluster -------------------------------------------


@pytest.mark.usefixtures("slurm_cluster")
def test_on_slurm_the_stop_signal_saves_requeues_and_the_next_attempt_resumes(
        tmp_path: Path, runs_root: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted_loss: float) -> None:
    script = tmp_path / "train.py"
    script.write_text(DDP_SCRIPT)
    monkeypatch.setenv("STEP_PAUSE", "0.2")  # the job's environment is this one
    run = api.launch_command([sys.executable, str(script), str(STEPS)], None, overrides=["launch.backend=slurm", "launch.nodes=2", "launch.procs_per_node=1", "launch.cpus_per_task=1",
                            "launch.stop_grace_seconds=20"])
    assert run.state is RunState.PENDING
    job = job_for(run)
    _wait_progress(run.paths.root, 3)
    # What SLURM sends the batch shell before the time limit; the shell passes it on as SIGTERM.
    subprocess.run(["scancel", "--signal=USR2", "--batch", job.job_id], check=True, timeout=30)
    state = job.wait(timeout=300)
    run.reload()
    assert state is RunState.COMPLETED, f"{run.info.reason}\n{job.logs()}"
    assert json.loads((run.paths.root / "final.json").read_text()) == {"loss": uninterrupted_loss, "attempt": 2}
    assert [a.state for a in run.attempts] == [RunState.PREEMPTED, RunState.COMPLETED]
    assert run.attempts[-1].exit_code == 0 and run.attempts[0].job_id == run.attempts[1].job_id
    batch = job.logs()
    assert "received SIGUSR2" in batch and "requeue:" in batch and "restart 1" in batch
    nodes = run.paths.node_log(0).read_text() + run.paths.node_log(1).read_text()  # ranks: as the rendezvous placed them
    assert "rank 0 saved at step" in nodes and "rank 1 saved at step" in nodes
    assert nodes.count("clustertune: stop requested: SIGTERM to the command") == 2
    assert "rank 1/2 attempt 2 starts at step" in (run.paths.rank_log(1)).read_text()


@pytest.mark.usefixtures("slurm_cluster")
def test_on_slurm_runner_none_runs_a_launcher_once_per_node_with_its_placeholders(tmp_path: Path, runs_root: Path) -> None:
    # A command that starts its own processes: torchrun itself, told its place by the placeholders.
    script = tmp_path / "allreduce.py"
    script.write_text("import os, torch, torch.distributed as dist\n"
                      "dist.init_process_group('gloo'); t = torch.tensor([dist.get_rank() + 1.0]); dist.all_reduce(t)\n"
                      "print('rank', dist.get_rank(), 'of', dist.get_world_size(), 'sum', t.item(), "
                      "'attempt', os.environ['CLUSTERTUNE_ATTEMPT'], flush=True)\n"
                      # Leave together: a gloo peer that exits first can abort the other (SIGABRT).
                      "dist.barrier(); dist.destroy_process_group()\n")
    run = api.launch_command([sys.executable, "-m", "torch.distributed.run", "--nnodes={nnodes}",
                                     "--node-rank={node_rank}", "--nproc-per-node=1", "--master-addr={master_addr}",
                                     "--master-port={master_port}", str(script)], None, overrides=["launch.backend=slurm", "launch.nodes=2", "launch.runner=none", "launch.cpus_per_task=1"])
    job = job_for(run)
    assert job.wait(timeout=180) is RunState.COMPLETED, f"{run.reload().info.reason}\n{job.logs()}"
    # {node_rank} was each node's own: node N's torchrun placed global rank N there.
    for node in (0, 1):
        log = run.paths.node_log(node).read_text()
        assert f"rank {node} of 2 sum 3.0 attempt 1" in log, log
    assert not list(run.paths.logs_dir.glob("rank-*.log"))  # the command's own processes: one log per node
    # `clustertune logs RUN` (and --follow) shows the command's own output, the first node's.
    assert "rank 0 of 2 sum 3.0 attempt 1" in cli("logs", run.id).stdout


@pytest.mark.usefixtures("slurm_cluster")
def test_on_slurm_runner_srun_makes_each_slurm_task_a_rank_on_two_nodes_of_two(tmp_path: Path, runs_root: Path) -> None:
    # The HPC guides' shape: srun starts every rank; the script reads torchrun's variables.
    script = tmp_path / "ranks.py"
    script.write_text("import os, torch, torch.distributed as dist\n"
                      "dist.init_process_group('gloo')  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE\n"
                      "t = torch.tensor([dist.get_rank() + 1.0]); dist.all_reduce(t)\n"
                      "e = os.environ\n"
                      "print('rank', e['RANK'], 'local', e['LOCAL_RANK'], 'of', e['WORLD_SIZE'], 'per node',\n"
                      "      e['LOCAL_WORLD_SIZE'], 'node', e['GROUP_RANK'], e['SLURMD_NODENAME'], 'sum', t.item(), flush=True)\n"
                      "dist.barrier(); dist.destroy_process_group()\n")
    run = api.launch_command([sys.executable, str(script)], None, overrides=["launch.backend=slurm", "launch.nodes=2", "launch.runner=srun", "launch.procs_per_node=2",
                            "launch.cpus_per_task=1"])
    job = job_for(run)
    assert job.wait(timeout=180) is RunState.COMPLETED, f"{run.reload().info.reason}\n{job.logs()}"
    for rank in range(4):
        node = rank // 2  # SLURM's block distribution: tasks 0-1 on the first node, 2-3 on the second
        log = run.paths.rank_log(rank).read_text()
        assert f"rank {rank} local {rank % 2} of 4 per node 2 node {node} n{node + 1} sum 10.0" in log, log
    assert "torch.distributed.run" not in (run.paths.root / "job.sbatch").read_text()


def test_on_slurm_launch_stage_copies_each_path_once_per_node_for_the_script(tmp_path: Path, runs_root: Path,
                                                                             slurm_cluster: Any) -> None:
    # The Mila shape: the user's own prepared data, read by their script from node-local disk.
    data = tmp_path / "my data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha")
    (data / "sub" / "b.bin").write_bytes(os.urandom(100_000))
    script = tmp_path / "reads.py"
    script.write_text("import os\n"
                      "p = os.environ['CLUSTERTUNE_STAGED_MY_DATA']\n"
                      "assert p.startswith(os.environ['SLURM_TMPDIR']), p\n"
                      "print('rank', os.environ['RANK'], 'on', os.environ['SLURMD_NODENAME'], 'read',\n"
                      "      open(os.path.join(p, 'a.txt')).read(), 'from', p, flush=True)\n")
    # The loopback cluster sets SLURM_TMPDIR per node and job, as sites do (tests/services/slurm.py).
    run = api.launch_command([sys.executable, str(script)], None, overrides=["launch.backend=slurm", "launch.nodes=2", "launch.procs_per_node=2", "launch.cpus_per_task=1",
                            f'launch.stage=["{data}"]'])
    job = job_for(run)
    assert job.wait(timeout=180) is RunState.COMPLETED, f"{run.reload().info.reason}\n{job.logs()}"
    job_id = run.reload().attempts[-1].job_id
    tmp = slurm_cluster.root / "node-tmp"
    for node, name in ((0, "n1"), (1, "n2")):
        copy = tmp / name / job_id / "clustertune-stage" / run.id / "my data"
        assert (copy / "sub" / "b.bin").read_bytes() == (data / "sub" / "b.bin").read_bytes()
        log = run.paths.node_log(node).read_text()
        assert log.count("clustertune: staged ") == 1, log  # once per node, by its first rank
    # The rendezvous places the ranks; each reads its own node's copy, two ranks on each node.
    seen = []
    for rank in range(4):
        line = run.paths.rank_log(rank).read_text()
        name = line.split(" on ", 1)[1].split()[0]
        assert f"rank {rank} on {name} read alpha from {tmp / name / job_id / 'clustertune-stage'}" in line, line
        seen.append(name)
    assert sorted(seen) == ["n1", "n1", "n2", "n2"]


def test_on_slurm_prepare_runs_once_before_the_stage_and_env_values_are_each_nodes_own(
        tmp_path: Path, runs_root: Path, slurm_cluster: Any) -> None:
    # An sbatch script's `srun --ntasks=1 python prepare_data.py`, then node-local copies of its output.
    out = tmp_path / "prepared set"
    out.mkdir()  # launch.stage's paths must exist when the job is submitted
    count = tmp_path / "prepare-count"
    prepare = f"echo prepared on $SLURMD_NODENAME > {shlex.quote(str(out / 'a.txt'))}; echo x >> {shlex.quote(str(count))}"
    script = tmp_path / "reads.py"
    script.write_text("import os\n"
                      "e = os.environ\n"
                      "text = open(os.path.join(e['CLUSTERTUNE_STAGED_PREPARED_SET'], 'a.txt')).read().strip()\n"
                      "print('node', e['SLURM_NODEID'], 'tag', e['NODE_TAG'], 'tmp', e['NODE_TMP'] == e['SLURM_TMPDIR'] + '/x',\n"
                      "      'read', text, flush=True)\n")
    run = api.launch_command([sys.executable, str(script)], None, overrides=["launch.backend=slurm", "launch.nodes=2", "launch.runner=none", "launch.cpus_per_task=1",
                            f"launch.prepare={prepare}", f'launch.stage=["{out}"]',
                            "launch.env={NODE_TAG: node-$SLURM_NODEID, NODE_TMP: $SLURM_TMPDIR/x}"])
    job = job_for(run)
    assert job.wait(timeout=180) is RunState.COMPLETED, f"{run.reload().info.reason}\n{job.logs()}"
    assert count.read_text() == "x\n" and run.paths.prepared.is_file()  # once, on the first node
    for node in (0, 1):
        log = run.paths.node_log(node).read_text()
        assert f"node {node} tag node-{node} tmp True read prepared on n1" in log, log
    assert "prepare: done" in job.logs()


def test_an_accelerate_script_runs_on_two_ranks(tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "train_acc.py").write_text(ACCELERATE_SCRIPT)
    out = cli("launch", "launch.procs_per_node=2", "--", sys.executable, "train_acc.py", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    run = _only_run(runs_root)
    final = json.loads((run / "final.json").read_text())
    assert final["processes"] == 2 and "MULTI_CPU" in final["type"]
    assert final["last"] < final["first"]
    assert (run / "checkpoints" / "accelerate").is_dir()
    assert "done on 2 processes" in cli("logs", run.name).stdout


# -- the same script on the 2 SSH test hosts ---------------------------------------------------


@pytest.mark.smoke  # one end-to-end check of this backend in `scripts/test.sh --fast`
def test_on_ssh_hosts_the_working_directory_is_synced_and_the_script_runs_across_both(
        ssh_cluster, tmp_path: Path, uninterrupted_loss: float) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    (work / "train.py").write_text(DDP_SCRIPT)
    (work / ".gitignore").write_text("big.bin\n")
    (work / "big.bin").write_bytes(b"0" * 1024)
    out = cli("launch", "launch.backend=ssh", "launch.cluster=loop", "launch.nodes=2", "launch.procs_per_node=1",
              # The hosts' env reuses this interpreter's packages (torch); `python` is that env's.
              f"launch.site_packages_from={sys.executable}", "--", "python", "train.py", str(STEPS), cwd=work, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    runs_root = Path(os.environ["CLUSTERTUNE_RUNS"])
    run = _only_run(runs_root)
    assert json.loads((run / "final.json").read_text()) == {"loss": uninterrupted_loss, "attempt": 1}
    info = _info(run)
    assert info["state"] == "COMPLETED" and info["attempts"][0]["exit_code"] == 0
    for host in ssh_cluster.hosts:
        synced = Path(host.root) / "proj"
        assert (synced / "train.py").is_file() and not (synced / "big.bin").exists()
    assert "rank 1 done" in cli("logs", run.name).stdout
    # The foreground showed rank 0's own lines as it wrote them, and no other rank's (launch.tee: rank0).
    shown = out.stderr.splitlines()
    assert any(re.fullmatch(r"\[node [01]\] rank 0/2 attempt 1 starts at step \d+", ln) for ln in shown), out.stderr
    assert not any("rank 1/2 attempt" in ln or "[rank " in ln for ln in shown), out.stderr


LIVE_SCRIPT = """\
import os, sys, time
from pathlib import Path

rank = int(os.environ["RANK"])
print(f"hello from rank {rank}")  # no flush: a script as people write it
go = Path(sys.argv[1])
while not go.exists():
    time.sleep(0.1)
if rank == 1:
    raise SystemExit("bad config: lr must be positive (rank 1's own words)")
time.sleep(30)  # rank 0 is stopped by torchrun once rank 1 failed
"""


def test_a_scripts_output_is_live_on_the_terminal_and_its_failure_quotes_the_failing_rank(
        tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "live.py").write_text(LIVE_SCRIPT)
    go = tmp_path / "go"
    exe = Path(sys.executable).with_name("clustertune")
    proc = subprocess.Popen([str(exe), "launch", "launch.procs_per_node=2", "--", sys.executable, "live.py", str(go)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # blocks until the launcher shows it: the script is still waiting
        assert first == "hello from rank 0\n", first
        assert proc.poll() is None and _info(_only_run(runs_root))["state"] == "RUNNING"
        go.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1
    live, summary = out.split("run live-", 1)
    assert "hello from rank 1" not in live  # the other ranks' output is in their own logs
    info = _info(_only_run(runs_root))
    assert info["state"] == "FAILED" and info["attempts"][0]["exit_code"] == 1
    # The reason is the script's own message and the rank that said it, not torchrun's block.
    assert info["reason"].startswith("rank 1 exited with code 1; its last lines"), info["reason"]
    assert "bad config: lr must be positive (rank 1's own words)" in info["reason"]
    assert "To enable traceback" not in info["reason"] and "Failures:" not in info["reason"]
    assert "rank 1 exited with code 1" in summary and "bad config: lr must be positive" in summary  # as it ends


def test_tee_all_shows_every_ranks_lines_with_its_rank(tmp_path: Path, runs_root: Path) -> None:
    code = "import os; print('hi from', os.environ['RANK'])"
    out = cli("launch", "launch.procs_per_node=2", "launch.tee=all", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(ln for ln in out.stdout.splitlines() if ln.startswith("[rank")) == [
        "[rank 0] hi from 0", "[rank 1] hi from 1"], out.stdout


def test_on_ssh_hosts_a_failing_script_is_reported_in_its_failing_ranks_own_words(
        ssh_cluster, tmp_path: Path) -> None:
    work = tmp_path / "proj"
    work.mkdir()
    # A DDP script whose rank 1 stops on bad input: rank 0 then fails in the barrier it left.
    (work / "fail.py").write_text(FAILING_DDP)
    out = cli("launch", "launch.backend=ssh", "launch.cluster=loop", "launch.nodes=2", "launch.procs_per_node=1",
              "launch.tee=all", f"launch.site_packages_from={sys.executable}", "--", "python", "fail.py", cwd=work,
              timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    # The foreground shows the hosts' output as it comes, each line with its node and (tee: all) its rank.
    for rank in (0, 1):
        assert any(re.fullmatch(rf"\[node [01]\] \[rank {rank}\] starting on rank {rank}", ln)
                   for ln in out.stderr.splitlines()), out.stderr
    info = _info(_only_run(Path(os.environ["CLUSTERTUNE_RUNS"])))
    assert info["state"] == "FAILED", info
    # Rank 1's own message, and its rank, lead. Rank 0 either failed in the barrier rank 1 left
    # (then it follows) or was stopped by its torchrun first (then it is left out): a race.
    reason = info["reason"]
    assert "rank 1 exited with code 1 on " in reason, reason
    assert "rank 0 exited" not in reason or reason.index("rank 1 exited") < reason.index("rank 0 exited"), reason
    assert "rank one refuses: no data at /nope" in reason and "To enable traceback" not in reason


def test_locally_launch_prepare_makes_what_launch_stage_copies_for_the_command(tmp_path: Path, runs_root: Path) -> None:
    made = tmp_path / "prepared-set"  # does not exist yet: launch.prepare makes it in the job
    prep = f"import pathlib; p = pathlib.Path({str(made)!r}); p.mkdir(); (p / 'rows.txt').write_text('42')"
    read = "import os, pathlib; print('read', (pathlib.Path(os.environ['CLUSTERTUNE_STAGED_PREPARED_SET']) / 'rows.txt').read_text())"
    out = cli("launch", f"launch.prepare=[{sys.executable}, -c, \"{prep}\"]", f"launch.stage=[{made}]",
              "--", sys.executable, "-c", read, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "read 42" in out.stdout  # the command read the node-local copy of what prepare made
    run = _only_run(runs_root)
    assert (run / "prepared").is_file() and (run / "logs" / "prepare.log").is_file()


FAILING_DDP = ("import os\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
               "print('starting on rank', os.environ['RANK'], flush=True)\n"
               "if os.environ['RANK'] == '1':\n    raise SystemExit('rank one refuses: no data at /nope')\n"
               "dist.barrier()\n")


@pytest.mark.usefixtures("slurm_cluster")
def test_on_slurm_a_failing_script_is_reported_in_its_failing_ranks_own_words(tmp_path: Path, runs_root: Path) -> None:
    (tmp_path / "fail.py").write_text(FAILING_DDP)
    run = api.launch_command([sys.executable, str(tmp_path / "fail.py")], None, overrides=["launch.backend=slurm", "launch.procs_per_node=2", "launch.cpus_per_task=1"])
    assert job_for(run).wait(timeout=180) is RunState.FAILED
    reason = run.reload().info.reason or ""
    # Rank 1's own words lead; rank 0, when it failed in the barrier before torchrun stopped it, follows.
    assert reason.find("rank 1 exited with code 1; its last lines") < reason.find("rank 0 exited") or \
        "rank 0 exited" not in reason, reason
    assert "rank 1 exited with code 1; its last lines" in reason
    assert "rank one refuses: no data at /nope" in reason and "To enable traceback" not in reason, reason
    assert "starting on rank 0" in cli("logs", run.id).stdout  # the script's own output, from its first node
