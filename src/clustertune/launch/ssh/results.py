"""The job of a recipe trained on SSH hosts (the ``ssh`` backend), reattached from ``run.json``.

Every host runs the ranks of one attempt as a run of its helper under the attempt key
``<run id>-<attempt>``; global rank 0 records how the attempt ended in its host's copy of
``run.json``. Results come back from every host (newest file wins) unless they are kept on
the cluster; a resume first spreads the newest checkpoint to every host.
"""

from __future__ import annotations

import posixpath
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clustertune.errors import ClusterError, RunError
from clustertune.recipe.load import load_recipe
from clustertune.remote.cluster import Cluster
from clustertune.calls.host_job import HostJob, cluster_of
from clustertune.remote.transport import shell_join
from clustertune.launch.command import FailedRank, describe_failed, failed_ranks, root_cause_time
from clustertune.runs.paths import CANCEL_FILE, LOGS_DIR, STOP_FILE, HostRunPaths, checkpoint_step, rank_log_name
from clustertune.runs.records import RunInfo
from clustertune.runs.run import CANCELLED_BY_USER, Run
from clustertune.runs.state import RunState
from clustertune.runs.sealed import SIGNATURE, STATE, vouch_for_copy

# Files the submitting side owns (never copied back) and node-side scratch (never copied at all).
# The host's own copies name its paths (data.json, the recipe naming its snapshots, files/).
LOCAL_ONLY = ("/run.json", "/data.json", "/recipe.yaml", "/files/")
SCRATCH = (".tmp-*", f"/{STOP_FILE}", f"/{CANCEL_FILE}")
# How long a cancel waits for the ranks to agree on a step and checkpoint before killing them.
GRACEFUL_CANCEL_S = 90.0


def attempt_key(run_id: str, attempt: int) -> str:
    """The run key of one attempt on the hosts (a host never reuses a key)."""
    return f"{run_id}-{attempt}"


def _remote(run: Run) -> dict[str, Any]:
    if run.info.remote is None:
        raise RunError(f"run {run.id} has no 'remote' section in {run.paths.run_json}")
    return run.info.remote


# -- following a run ----------------------------------------------------------------------------


class SshJob(HostJob):
    """A recipe trained on the hosts; each attempt is a run of the helper under its own key."""

    @property
    def key(self) -> str:
        return str(self.remote["key"])  # the attempt's key, recorded when it was submitted

    def _rank0_record(self, cluster: Cluster) -> tuple[RunState, str | None, str | None] | None:
        """How global rank 0 recorded the attempt's end in its host's run.json (it may be on
        any host), and the checkpoint it resumed from; None when no host has a terminal record
        (a crash before it could write)."""
        for i in self._nodes():
            try:
                r = cluster.conn(i).run(["cat", HostRunPaths(cluster.root(i), self.run.id).file(self.run.paths.run_json.name)])
            except ClusterError:
                continue  # a host that is gone: rank 0 may have been on another
            try:
                info = RunInfo.model_validate_json(r.text) if r.rc == 0 else None
            except ValueError:  # pydantic's ValidationError is one: a torn or foreign file
                continue
            if info is None or len(info.attempts) != len(self.run.attempts):
                continue  # a copy from an earlier attempt
            if info.state.terminal:
                last = info.attempts[-1] if info.attempts else None
                return info.state, info.reason, last.resumed_from if last else None
        return None

    def state(self) -> RunState:
        self.run.reload()
        if self.run.info.remote is None:
            return self.run.state  # data still being prepared here: no host has it yet
        if self.run.state.terminal:
            self._gather_once()
            return self.run.state
        if self.run.state is not RunState.RUNNING:
            return self.run.state
        cluster = self._cluster()
        states = self._reachable_states(cluster)
        if any(s.get("state") in ("RUNNING", "UNKNOWN") for s in states):
            return self.run.state  # the ranks left on reachable hosts end (or their watchdog ends them)
        lost = [f"node {i}: {s['reason']}" for i, s in zip(self._nodes(), states) if s.get("state") == "UNREACHABLE"]
        final = self._rank0_record(cluster)
        if self.remote.get("cancel_requested"):
            state, reason = RunState.CANCELLED, CANCELLED_BY_USER
        elif final is not None:
            state, reason = final[0], final[1]
        elif all(s.get("state") == "COMPLETED" for s in states):
            state, reason = RunState.COMPLETED, None
        else:
            why = "; ".join(f"node {i}: {s.get('reason') or s.get('state')}" for i, s in zip(self._nodes(), states))
            own = self._failing_rank(cluster) if self.run.paths.is_command else None
            state, reason = RunState.FAILED, f"{why}\n{own}" if own else f"{why}\nlast lines:\n{self._tail(cluster)}"
        self.run.reload()
        if final is not None and final[2] and self.run.last_attempt is not None \
                and not self.run.last_attempt.resumed_from:
            # Only the host knows which checkpoint the ranks found there (a resume on fewer
            # hosts finds the one rank 0's host kept): the record here says so too.
            self.run.record_attempt(resumed_from=final[2])
        if self.run.paths.is_command and self.run.last_attempt is not None:
            codes = [s.get("exit_code") for s in states if s.get("exit_code") is not None]
            if codes:  # a user's own command: the first host's failure, else 0
                self.run.record_attempt(exit_code=next((c for c in codes if c), codes[0]))
        if lost and final is not None and state is not RunState.COMPLETED:  # the lost host is the cause, rank 0's error its consequence
            reason = "; ".join(lost) + (f"; then {reason}" if reason else "")
        if not self.run.state.terminal:
            self.run.transition(state, reason=reason)
        self._gather_once()
        return self.run.state

    def _reachable_states(self, cluster: Cluster) -> list[dict[str, Any]]:
        """Each host's state of the attempt; a host that cannot be reached (it died, its sshd
        is gone) is UNREACHABLE instead of stopping the follower with an error, so the run is
        recorded as ended once the ranks on the other hosts have."""

        def one(i: int) -> dict[str, Any]:
            try:
                return cluster.helper_json(i, "status", self.key)
            except ClusterError as exc:
                return {"state": "UNREACHABLE", "reason": f"{cluster.hosts[i].label} unreachable ({str(exc)[:300]})"}

        return cluster.each(one, self._nodes())

    def _failing_rank(self, cluster: Cluster) -> str | None:
        """A command's failure in its failing ranks' own words (:func:`describe_failed`), each
        rank's last lines read from its log on its host."""
        found = []
        for i in self._nodes():
            try:
                text = cluster.helper(i, "logs", self.key).text
                for rank, code in failed_ranks(text):
                    log = HostRunPaths(cluster.root(i), self.run.id).file(LOGS_DIR, rank_log_name(rank))
                    # GNU date: the log's last write, to the nanosecond.
                    r = cluster.conn(i).run(shell_join(["date", "-r", log, "+%s.%N"], ";", ["tail", "-n", "15", log]))
                    when, _, lines = r.text.partition("\n")
                    if r.rc == 0 and lines.strip():
                        found.append(FailedRank(rank, code, root_cause_time(text), float(when.strip() or 0), "",
                                                lines.rstrip(), host=cluster.hosts[i].label))
            except (ClusterError, ValueError):
                continue  # an unreachable host (or an unreadable log): another may name a rank
        return describe_failed(found)

    def _tail(self, cluster: Cluster, lines: int = 15) -> str:
        out = []
        for i in self._nodes():
            try:
                text = cluster.helper(i, "logs", self.key).text
            except ClusterError as exc:
                text = f"(unreachable: {exc})"
            out += [f"[node {i}] {line}" for line in text.splitlines()[-lines:]]
        return "\n".join(out)

    def stop_hosts(self, graceful_s: float = 0.0) -> None:
        """Ask every host's ranks to checkpoint and stop (the stop file, agreed at the next log
        step); after ``graceful_s`` seconds kill whatever still runs."""
        cluster = self._cluster()
        nodes = self._nodes()

        def ask(i: int) -> None:
            host = HostRunPaths(cluster.root(i), self.run.id)
            cluster.conn(i).run(shell_join(["test", "-d", host.run_dir], "&&", "{", ["touch", host.cancel_request],
                                           "&&", ["echo", "TERM"], ">", [host.stop_request], ";", "}"))

        cluster.each(ask, nodes)
        deadline = time.monotonic() + graceful_s
        while time.monotonic() < deadline:
            if all(s.get("state") not in ("RUNNING",) for s in self._host_states(cluster)):
                return
            time.sleep(1.0)
        for i in nodes:
            cluster.helper(i, "cancel", self.key)

    def cancel(self) -> None:
        state = self.state()
        deadline = time.monotonic() + 300
        while state in (RunState.CREATED, RunState.PENDING) and time.monotonic() < deadline:
            time.sleep(1.0)  # still being copied and started: stop it once every host runs it
            state = self.state()
        if state.terminal:
            raise RunError(f"run {self.run.id} is already {state.value}; nothing to cancel")
        if self.run.info.remote is None:  # its submitting process went away before any host had it
            self.run.transition(RunState.CANCELLED, reason=f"{CANCELLED_BY_USER} before it started")
            return
        self.run.update_remote(cancel_requested=True)
        self.stop_hosts(GRACEFUL_CANCEL_S)
        self.state()

    # -- results ---------------------------------------------------------------------------

    def _gather_once(self) -> None:
        if self.remote.get("gathered") or self.remote.get("keep_on_cluster") or not self.remote.get("started"):
            return
        try:
            gather(self.run)
        except ClusterError as exc:
            # The state is known; the results wait on the hosts for the next status/resume.
            print(f"clustertune: results of run {self.run.id} not brought back yet: {exc}", file=sys.stderr)
            return
        self.run.update_remote(gathered=True)


def gather(run: Run) -> None:
    """Copy every host's run directory back (newest copy of each file wins: rank 0 may have
    been on any host), then keep only the checkpoints rank 0 kept."""
    cluster = cluster_of(run)
    excludes = [f"--exclude={p}" for p in (*LOCAL_ONLY, *SCRATCH)]
    for i in _remote(run)["nodes"]:
        conn = cluster.conn(int(i))
        src = HostRunPaths(cluster.root(int(i)), run.id).run_dir
        conn.rsync(["-a", "--update", *excludes, conn.remote(src + "/"), f"{run.paths.root}/"])
    if run.paths.is_command:
        return  # a user's own script keeps the checkpoints it keeps
    keep = load_recipe(run.paths.recipe).train.keep_last
    found = run.paths.checkpoint_dirs()

    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


# What a finished run leaves behind, in the order `clustertune run` prints it.
_RESULTS = (("model", "model"), ("metrics", "metrics.jsonl"), ("checkpoints", "checkpoints"))


def kept_result_lines(run: Run) -> list[str]:
    """Where the results of a run kept on the cluster are: which host holds each (rank 0 may
    have been on any of them), its absolute path there, and the command that copies it here.
    Nothing is printed as a local path, since nothing was brought back."""
    cluster = cluster_of(run)
    found: dict[str, list[tuple[int, str]]] = {}
    unreachable = []
    for i in (int(n) for n in _remote(run)["nodes"]):
        rdir = HostRunPaths(cluster.root(i), run.id).run_dir
        # One round trip: the absolute run directory, then those of the results it holds.
        try:
            r = cluster.conn(i).run(shell_join(["cd", rdir], "&&", ["pwd", "-P"], "&&",
                                               ["ls", "-d", "--", *(name for _, name in _RESULTS)], "2>/dev/null"))
        except ClusterError as exc:
            unreachable.append(f"  {cluster.hosts[i].label}: not listed now ({exc}); its results are under {rdir}")
            continue
        lines = r.text.splitlines()
        if not lines:
            continue  # no run directory there (removed by gc, or never started)
        for name in lines[1:]:
            found.setdefault(name, []).append((i, posixpath.join(lines[0], name)))
    out = [f"  results kept on cluster {cluster.name} (launch.keep_on_cluster):"]
    for label, name in _RESULTS:
        where = "; ".join(f"{path} on {cluster.hosts[i].label}" for i, path in found.get(name, [])) or "none written"
        out.append(f"  {label + ':':<13}{where}")
    out += unreachable
    holders = found.get("model") or found.get("metrics.jsonl")
    if holders:
        i, path = holders[0]
        conn = cluster.conn(i)
        src = conn.remote(posixpath.dirname(path) + "/")
        fetch = ["rsync", "-a", "--protect-args", "--exclude=/run.json", "-e", shlex.join(conn.plain_ssh()),
                 src, f"{run.paths.root}/"]
        out.append("  copy them here with: " + shlex.join(fetch))
    return out


def _kept_checkpoints(run: Run) -> tuple[Cluster, dict[int, str], dict[int, set[str]], str | None]:
    """For a run whose results stay on the cluster: the hosts, each one's run directory, the
    checkpoints each holds, and the newest of them all."""
    cluster = cluster_of(run)
    nodes = [int(n) for n in _remote(run)["nodes"]]
    rdir = {i: HostRunPaths(cluster.root(i), run.id).run_dir for i in nodes}
    have: dict[int, set[str]] = {}
    for i in nodes:
        r = cluster.conn(i).run(["ls", posixpath.join(rdir[i], "checkpoints")])
        have[i] = {n for n in r.text.split() if checkpoint_step(n) is not None} if r.rc == 0 else set()
    newest = max((n for names in have.values() for n in names), default=None)
    return cluster, rdir, have, newest


def spread_checkpoints(run: Run) -> None:
    """Before a resume with results kept on the cluster: every host needs the newest checkpoint,
    which only rank 0's host wrote. It is relayed through this machine (hosts need not reach
    each other) and not kept here."""
    cluster, rdir, have, newest = _kept_checkpoints(run)
    if newest is None:
        return
    holders = [i for i in rdir if newest in have[i]]
    with tempfile.TemporaryDirectory(prefix="clustertune-ckpt-") as tmp:
        # A sharded checkpoint is in parts: rank 0's host sealed it, each other host holds its
        # ranks' shards under the same name. The union goes to every host.
        for i in holders:
            conn = cluster.conn(i)
            conn.rsync(["-a", conn.remote(posixpath.join(rdir[i], "checkpoints", newest) + "/"), f"{tmp}/{newest}/"])
        for i in rdir:
            if newest not in have[i] or len(holders) > 1:
                c = cluster.conn(i)
                c.check_call(["mkdir", "-p", posixpath.join(rdir[i], "checkpoints")], what="creating checkpoints/")
                c.rsync(["-a", f"{tmp}/{newest}/", c.remote(posixpath.join(rdir[i], "checkpoints", newest) + "/")])


def vouch_for_kept_checkpoint(run: Run, trust: bool) -> None:
    """The signature check a resume makes of a local checkpoint, for one kept on the cluster:
    refused before anything starts when it is unsigned or signed with another key, or (``trust``)
    signed with this user's key on every host that holds it. Only state.json and state.sig
    travel; each rank still checks every file's digest against state.json before loading it."""
    cluster, rdir, have, newest = _kept_checkpoints(run)
    if newest is None:
        return
    holders = [i for i in rdir if newest in have[i]]
    # The sealed part (state.json) is on rank 0's host; the others may hold shards only.
    first = next((i for i in holders if cluster.conn(i).run(
        ["test", "-f", posixpath.join(rdir[i], "checkpoints", newest, STATE)]).rc == 0), holders[0])
    where = posixpath.join(rdir[first], "checkpoints", newest)
    shown = f"{newest} on {cluster.hosts[first].label} ({where})"
    with tempfile.TemporaryDirectory(prefix="clustertune-ckpt-") as tmp:
        conn = cluster.conn(first)
        files = [conn.remote(posixpath.join(where, STATE)), f"{tmp}/"]
        conn.rsync(["-a", *files])
        conn.rsync(["-a", "--ignore-missing-args", conn.remote(posixpath.join(where, SIGNATURE)), f"{tmp}/"])
        if not vouch_for_copy(Path(tmp), run.id, shown, trust):
            return
        for i in holders:
            c = cluster.conn(i)
            c.rsync(["-a", f"{tmp}/{SIGNATURE}", c.remote(posixpath.join(rdir[i], "checkpoints", newest, SIGNATURE))])
