"""Losing a machine mid-run, on the real services of the test suite (too slow for CI):

- SLURM node loss: a 2-node job (one rank per node) loses node n2 mid-run: its slurmd and every
  process of the job on it are SIGKILLed. The run is then resumed on what remains (1 node).
- SSH host death: a 2-host run loses host1 mid-run: its sshd and every process of the run on it
  are SIGKILLed. The run is then resumed on host0 alone.

Both resumes change the world size (2 ranks -> 1): the run must continue from the same sample
position (no replayed data) with a finite, continuing loss. The result is a table (fault,
survived, steps redone) on stdout, for benchmarks/RESULTS.md.

The scenarios run under pytest, which starts the SLURM cluster and the sshd hosts with the test
suite's own fixtures (tests/services/):

    .venv/bin/python benchmarks/faults.py
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.helpers import TINY_CAUSAL, cli, read_jsonl, start_and_inject, steps_redone, with_  # noqa: E402

RESULTS_ENV = "CT_FAULT_RESULTS"
TRAIN = {"max_steps": 400, "log_every": 1, "save_every": 20, "keep_last": 2, "eval_at_start": False}


def _record(fault: str, survived: bool, redone: Any, note: str) -> None:
    with open(os.environ[RESULTS_ENV], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"fault": fault, "survived": survived, "redone": redone, "note": note}) + "\n")


def _procs_with(pred: Any) -> list[int]:
    """Pids of this machine's processes for which ``pred(pid)`` holds (unreadable ones skipped)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if pred(p):
                    out.append(int(p.name))
            except OSError:
                continue
    return out


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    parent = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                parent[int(p.name)] = int(p.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [pid]
    while todo:
        cur = todo.pop()
        out.append(cur)
        todo += [c for c, pp in parent.items() if pp == cur]
    return out


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _continuity(run_dir: Path, resumed_step: int, per_step_before: int, per_step_after: int) -> tuple[bool, str]:
    """Whether the resumed attempt continued from the checkpoint's sample with no replay, and
    its loss stayed finite."""
    rows = {r["step"]: r for r in read_jsonl(run_dir / "metrics.jsonl") if r["kind"] == "train"}
    steps = sorted(rows)
    ok_steps = steps == list(range(1, TRAIN["max_steps"] + 1))
    want = resumed_step * per_step_before + (TRAIN["max_steps"] - resumed_step) * per_step_after
    got = rows[steps[-1]]["samples_seen"]
    finite = all(math.isfinite(r["loss"]) for r in rows.values())
    after = [rows[s]["loss"] for s in steps if s > resumed_step]
    note = (f"resumed from step {resumed_step}; samples seen {got} (expected {want}); "
            f"loss {rows[resumed_step]['loss']:.3f} at the checkpoint, {after[0]:.3f} next, {after[-1]:.3f} at the end")
    return ok_steps and got == want and finite, note


def _redone(run_dir: Path) -> Any:
    try:
        return steps_redone(run_dir)
    except OSError as exc:
        return f"not known ({exc})"


def _judge_resume(run: Any, out: Any, survived: bool, note: str) -> tuple[bool, Any, str]:
    """After the resume: did it start from a checkpoint, continue from the same sample with no
    replayed data, and how many steps were redone (else the end of the resume's output)."""
    if not survived:
        return False, None, f"{note}; resume: {(out.stdout + out.stderr)[-400:]}"
    if run.attempts[-1].resumed_from is None:
        return False, None, f"{note}; the resume started from step 0 (no checkpoint found)"
    resumed = int(run.attempts[-1].resumed_from.split("-")[1])
    ok, more = _continuity(run.paths.root, resumed, 2 * TRAIN_BATCH, TRAIN_BATCH)
    return ok, _redone(run.paths.root), f"{note}; {more}"


# -- SLURM: node n2 lost ---------------------------------------------------------------------


def _slurm_node_processes(node: str, job_id: str) -> list[int]:
    """The job's processes on ``node``: ranks and agents carry SLURMD_NODENAME in their
    environment; the node's slurmstepd processes work in its spool directory."""
    def on_node(p: Path) -> bool:
        env = p.joinpath("environ").read_bytes().split(b"\0")
        if f"SLURMD_NODENAME={node}".encode() in env and f"SLURM_JOB_ID={job_id}".encode() in env:
            return True
        cmd = p.joinpath("cmdline").read_bytes()
        return cmd.startswith(b"slurmstepd") and os.readlink(p / "cwd").rstrip("/").endswith(f"/spool/{node}")
    return _procs_with(on_node)


@pytest.mark.usefixtures("slurm_cluster")
def test_slurm_node_lost_mid_run(tmp_path: Path, slurm_cluster: Any) -> None:
    from clustertune.launch import job_for
    from clustertune import api
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.store import get_run

    root = tmp_path / "runs"
    recipe = load_recipe(with_(TINY_CAUSAL, train=TRAIN, launch={"backend": "slurm", "nodes": 2, "procs_per_node": 1,
                                                                  "cpus_per_task": 1, "max_requeues": 0}))
    lost: dict[str, Any] = {}

    def lose_n2(run: Any) -> None:
        job = job_for(run).job_id
        slurmd = int((slurm_cluster.root / "slurmd-n2.pid").read_text().strip())
        victims = [slurmd, *_slurm_node_processes("n2", job)]
        lost["pids"] = len(victims)
        _kill(victims)
        lost["step"] = max(r["step"] for r in read_jsonl(run.paths.metrics) if r["kind"] == "train")

    run = start_and_inject(lambda: api.run(recipe, runs_root_dir=root), lambda r: r.paths.metrics, 30, lose_n2)
    # slurmctld declares a silent node DOWN after SlurmdTimeout (300 s by default); an operator
    # or health check does it sooner. Either way the job on it ends, and so does the run.
    subprocess.run(["scontrol", "update", "NodeName=n2", "State=DOWN", "Reason=lost in a fault benchmark"],
                   check=True, timeout=30)
    # SLURM requeues a job whose node failed (JobRequeue=1); it then waits for two nodes that are
    # not there. The user takes it back and resumes it on what remains.
    job = job_for(run)
    deadline = time.monotonic() + 120
    while (view := subprocess.run(["squeue", "-h", "-j", job.job_id, "-o", "%T"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()) == "RUNNING" and time.monotonic() < deadline:
        time.sleep(1)
    slurm_did = f"SLURM set the job {view or 'ended'}"
    if view:
        cancelled = cli("cancel", run.id, "--runs-root", str(root))
        slurm_did += f"; `clustertune cancel` exited {cancelled.returncode}"
    run = get_run(run.id, root)
    first_state, first_reason = run.state.value, slurm_did
    out = cli("run", "--resume", run.id, "launch.nodes=1", "--runs-root", str(root), timeout=600)
    survived = out.returncode == 0
    if survived:
        run = get_run(run.id, root)
        state = job_for(run).wait(timeout=600)
        run = get_run(run.id, root)
        survived = state.value == "COMPLETED"
    survived, redone, note = _judge_resume(run, out, survived, f"first attempt {first_state} ({first_reason})")
    note += f"; killed slurmd n2 and {lost.get('pids', 0) - 1} job processes on n2 after step {lost.get('step')}"
    _record("SLURM node n2 lost (slurmd + its job processes SIGKILLed), resumed on n1", survived, redone, note)
    subprocess.run(["slurmd", "-f", str(slurm_cluster.conf), "-N", "n2"], capture_output=True, timeout=60)
    subprocess.run(["scontrol", "update", "NodeName=n2", "State=RESUME"], capture_output=True, timeout=30)
    assert survived, note


TRAIN_BATCH = TINY_CAUSAL["train"]["batch_size"]


# -- SSH: host1 dies ---------------------------------------------------------------------------


def test_ssh_host_dies_mid_run(ssh_cluster: Any, sshd_service: Any, tmp_path: Path) -> None:
    import yaml

    from clustertune.remote.config import add_cluster
    from clustertune.runs.store import get_run

    root = Path(os.environ["CLUSTERTUNE_RUNS"])
    recipe = with_(TINY_CAUSAL, train=TRAIN, launch={"backend": "ssh", "cluster": "loop", "nodes": 2, "procs_per_node": 1,
                                                      "site_packages_from": sys.executable})
    recipe_file = tmp_path / "recipe.yaml"
    recipe_file.write_text(yaml.safe_dump(recipe))
    host_roots = [h.root / tmp_path.name for h in sshd_service.hosts]
    exe = Path(sys.executable).with_name("clustertune")
    lost: dict[str, Any] = {}

    def start() -> subprocess.Popen[str]:
        # Metrics come back to this machine at the end; while the run goes on, rank 0 writes them
        # in the run's directory on its own host, whichever of the two that is.
        proc = subprocess.Popen([str(exe), "run", str(recipe_file), "--no-progress"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 300
        while not (found := [p for r in host_roots for p in r.glob("train/*/metrics.jsonl")]):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        lost["metrics"] = found[0]
        lost["rank0_host"] = next(i for i, r in enumerate(host_roots) if str(found[0]).startswith(str(r)))
        lost["run_dir"] = root / found[0].parent.name
        return proc

    def host_dies(_proc: Any) -> None:
        # The host without rank 0 dies (rank 0's host holds the checkpoints it seals).
        dead = 1 - lost["rank0_host"]
        mark = str(host_roots[dead]).encode()

        def on_it(p: Path) -> bool:
            return mark in p.joinpath("cmdline").read_bytes() or mark in p.joinpath("environ").read_bytes() \
                or os.readlink(p / "cwd").encode().startswith(mark)
        # The host's sshd with its per-connection children (open sessions drop as when a machine dies).
        victims = [*_descendants(sshd_service.hosts[dead].pid), *_procs_with(on_it)]
        lost["dead"], lost["pids"] = dead, len(victims)
        lost["step"] = max(r["step"] for r in read_jsonl(lost["metrics"]) if r["kind"] == "train")
        _kill(victims)

    proc = start_and_inject(start, lambda _p: lost["metrics"], 30, host_dies, timeout=300)
    try:
        lost["client_out"] = proc.communicate(timeout=600)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    run = get_run(lost["run_dir"].name, root)
    first_state = run.state.value
    first_reason = (run.info.reason or "").splitlines()[0][:160] if run.info.reason else ""
    # What a user does: take the dead host out of the cluster, resume on the one that is left.
    alive = 1 - lost["dead"]
    add_cluster("loop", [ssh_cluster.hosts[alive]])
    out = cli("run", "--resume", run.id, "launch.nodes=1", "--no-progress", timeout=600)
    run = get_run(run.id, root)
    survived = out.returncode == 0 and run.state.value == "COMPLETED"
    note = f"first attempt {first_state} ({first_reason}), `clustertune run` exited {proc.returncode}"
    if proc.returncode not in (0, 1):
        note += f" ({lost['client_out'].strip().splitlines()[-1][:200] if lost['client_out'].strip() else ''})"
    survived, redone, note = _judge_resume(run, out, survived, note)
    note += (f"; killed host{lost['dead']}'s sshd, its sessions and the run's processes there ({lost['pids']} processes) after step "
             f"{lost['step']}; rank 0 was on host{lost['rank0_host']}")
    _record("SSH host dies (its sshd + the run's processes there SIGKILLed), resumed on the other", survived, redone, note)
    assert survived, note


def main() -> int:
    import tempfile

    results = Path(tempfile.mkstemp(prefix="ct-faults-", suffix=".jsonl")[1])
    os.environ[RESULTS_ENV] = str(results)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    t0 = time.time()
    basetemp = tempfile.mkdtemp(prefix="ct-faults-")  # kept: the runs' directories, to look at
    print(f"runs under {basetemp}", flush=True)
    rc = pytest.main([__file__, "-p", "tests.conftest", f"--basetemp={basetemp}/t", "-q", "-x" if "-x" in sys.argv else "-q",
                      "-o", "python_files=faults.py", "--rootdir", str(HERE.parent), *[a for a in sys.argv[1:] if a != "-x"]])
    rows = read_jsonl(results) if results.stat().st_size else []
    print(f"\n{len(rows)} faults in {time.time() - t0:.0f} s; load average {os.getloadavg()}\n")
    print("| fault | survived | steps redone | what happened |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {'yes' if r['survived'] else 'no'} | {r['redone']} | {r['note']} |")
    return int(rc)


if __name__ == "__main__":
    raise SystemExit(main())
