"""The ``ssh-remote`` backend: runs started on SSH hosts (function calls, exec, objects),
reattached from ``run.json`` alone, from any process.

``run.json["remote"]`` records the cluster name, the hosts (as they were when the run started)
and which of them run it; the run id is the run key on the hosts.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

from clustertune.errors import RemoteCallError, RunError
from clustertune.remote.cluster import _stderr_printer
from clustertune.calls.host_job import HostJob
from clustertune.remote.config import client_id, run_secret
from clustertune.runs.run import CANCELLED_BY_USER, Run
from clustertune.runs.state import RunState

BACKEND = "ssh-remote"
_REMOTE_STATES = {"RUNNING": RunState.RUNNING, "COMPLETED": RunState.COMPLETED, "FAILED": RunState.FAILED,
                  "CANCELLED": RunState.CANCELLED}


class RemoteTraceback(Exception):
    """The traceback of an exception raised on a remote host (chained as the cause)."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


def decode_outcome(run_key: str, head: dict[str, Any], data: bytes, host_label: str) -> Any:
    """Verify the signature, unpickle, return the value or raise the remote exception."""
    import hashlib
    import hmac

    if not data:
        raise RemoteCallError(f"run {run_key} on {host_label} ended {head.get('state')} without a result"
                              + (f": {head['reason']}" if head.get("reason") else ""))
    expected = hmac.new(run_secret(run_key).encode(), data, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(str(head.get("sig", "")), expected):
        raise RemoteCallError(f"the result stored for run {run_key} on {host_label} is not signed by this client's "
                              "identity key; it was not unpickled (only results of calls this client made are loaded)")
    kind, value, tb, *rest = pickle.loads(data)
    if kind == "ok":
        return value
    if isinstance(value, BaseException):
        value.add_note(f"(raised on {host_label} in run {run_key}; remote traceback above)")
        raise value from RemoteTraceback(tb)
    raise RemoteCallError(f"run {run_key} on {host_label} failed:\n{tb}")


def parse_frame(stdout: bytes) -> tuple[dict[str, Any], bytes]:
    head, _, data = stdout.partition(b"\n")
    return json.loads(head), data


class RemoteJob(HostJob):
    """A function call, ``exec`` or object on the hosts; its run id is its key there."""

    poll = 0.5

    @property
    def remote(self) -> dict[str, Any]:
        return self.run.info.remote or {}

    def _on_hosts(self) -> bool:
        return True

    def _record(self, state: RunState, reason: str | None = None) -> None:
        self.run.reload()
        if self.run.state is not state and not self.run.state.terminal:
            self.run.transition(state, reason=reason)

    def state(self) -> RunState:
        self.run.reload()
        if self.run.state.terminal:
            return self.run.state
        c = self._cluster()
        states, reasons = [], []
        for i, st in zip(self._nodes(), self._host_states(c)):
            states.append(st.get("state"))
            if st.get("reason"):
                reasons.append(f"node {i}: {st['reason']}")
        if "UNKNOWN" in states or "RUNNING" in states:
            return self.run.state
        final = ("FAILED" if "FAILED" in states else "CANCELLED" if "CANCELLED" in states else "COMPLETED")
        self._record(_REMOTE_STATES[final], "; ".join(reasons) or None)
        return self.run.state

    def cancel(self) -> None:
        state = self.state()
        if state.terminal:
            raise RunError(f"run {self.run.id} is already {state.value}; nothing to cancel")
        c = self._cluster()
        for i in self._nodes():
            c.helper_json(i, "cancel", self.run.id)
        self._record(RunState.CANCELLED, CANCELLED_BY_USER)

    def fetch_result(self, timeout: float | None = None, stream: bool = False) -> Any:
        """The call's value (waits for it; verified and unpickled here)."""
        if self.remote.get("kind") != "call":
            raise RunError(f"run {self.run.id} is a {self.remote.get('kind')} run; it has no return value")
        if self.remote.get("client") != client_id():
            raise RemoteCallError(f"run {self.run.id} was started by another client identity; its result is not loaded here")
        c = self._cluster()
        i = self._nodes()[0]
        args = ["--timeout", str(timeout if timeout is not None else 86400.0)] + (["--stream"] if stream else [])

        r = c.helper(i, "result", self.run.id, *args, on_stderr=_stderr_printer() if stream else None)
        if r.rc == 3:
            raise RemoteCallError(f"run {self.run.id} does not exist on {c.hosts[i].label} (removed by gc?)")
        head, data = parse_frame(r.stdout)
        state = _REMOTE_STATES.get(str(head.get("state")))
        if state is None or not state.terminal:
            raise RemoteCallError(f"run {self.run.id} is still {head.get('state')} after {timeout} s")
        self._record(state, head.get("reason"))
        return decode_outcome(self.run.id, head, data, c.hosts[i].label)


class RemoteLauncher:
    name = BACKEND

    def job(self, run: Run) -> RemoteJob:
        if run.info.remote is None:
            raise RunError(f"run {run.id} says backend {BACKEND} but has no 'remote' section in run.json")
        return RemoteJob(run)
