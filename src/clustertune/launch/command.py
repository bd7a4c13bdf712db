"""A user's own command (``clustertune launch [launch keys | launch.yaml] -- COMMAND``): the
``launch`` section it runs under, its run directory, and how a finished attempt is recorded.

It takes the recipes' path from the plan on: the same backends, run directory, logs, stop
requests and requeue; only what runs on each rank differs (the command under
``clustertune.script.rank`` instead of the training entry).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

import yaml

from clustertune.errors import LaunchError, UserError
from clustertune.recipe.load import load_recipe
from clustertune.recipe.schema import Recipe
from clustertune.runs.paths import RunPaths
from clustertune.runs.run import CANCELLED_BY_USER, Run
from clustertune.runs.state import RunState
import clustertune.script as helper
from clustertune.script.stage import env_name

# What a YAML given to `clustertune launch` may hold besides its launch section.
LAUNCH_FILE_KEYS = frozenset({"launch", "name", "description"})
# Launch keys that act on clustertune's own trainer only, with why.
NOT_FOR_SCRIPTS = {
    "watchdog_minutes": "the hang watchdog counts the trainer's optimizer steps, which a script does not report",
    "keep_on_cluster": "a script's outputs stay where it writes them; nothing is copied back",
}
# A command has no model or data; the recipe schema wants one of each, so its launch section is
# validated inside the smallest recipe (never written anywhere: only the launch section is kept).
_CARRIER = {"model": {"config": "gpt2", "tokenizer": "train"}, "data": {"dataset": "builtin:pydoc"}}
# Backends a command runs on today.
COMMAND_BACKENDS = ("local", "slurm", "ssh")
TASK = "command"


def load_launch(source: str | Path | None, overrides: list[str], command: list[str] | None = None) -> Recipe:
    """The launch section a command runs under: a YAML file with a ``launch`` section, and
    ``launch.*`` overrides; every key that does not apply to a script is an error. The run is
    named after the file's ``name``, else the command's script."""
    bad = [o for o in overrides if not o.strip().startswith("launch.")]
    if bad:
        raise UserError(f"{', '.join(bad)}: only launch.* keys apply to your own script "
                        "(its own arguments go after `--`)")
    data: dict = {"name": run_name(command)} if command else {}
    if source is not None:
        path = Path(source)
        if not path.is_file():
            raise UserError(f"{source}: no such file; give a YAML file with a launch section, or launch.* keys")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            raw = None
        if not isinstance(raw, dict):
            load_recipe(path, [])  # says where the YAML is malformed, as for recipes
            raise UserError(f"{path}: a launch file is a mapping with a launch section")
        extra = sorted(set(raw) - LAUNCH_FILE_KEYS)
        if extra:
            raise UserError(f"{path}: {', '.join(extra)} do(es) not apply to your own script; "
                            "a launch file holds a launch section (and a name)")
        data = {**data, **raw}
    recipe = load_recipe({**_CARRIER, **data}, overrides)
    check_launch(recipe)
    return recipe


def check_launch(recipe: Recipe) -> None:
    ln = recipe.launch
    problems = [f"launch.{k}: {why}" for k, why in NOT_FOR_SCRIPTS.items() if getattr(ln, k)]
    if ln.runner == "none" and ln.procs_per_node is not None:
        problems.append("launch.procs_per_node: with launch.runner=none the command starts its own "
                        "processes (e.g. `accelerate launch --num_processes N`); leave it unset")
    names: dict[str, str] = {}
    for p in ln.stage:
        if not Path(p).exists() and ln.prepare is None:  # launch.prepare makes it in the job
            problems.append(f"launch.stage: {p!r} does not exist here (relative paths start in {Path.cwd()})")
        elif names.setdefault(env_name(p), p) != p:
            problems.append(f"launch.stage: {names[env_name(p)]!r} and {p!r} would both be {env_name(p)}; "
                            "give them different last parts")
    if ln.runner == "srun" and ln.backend != "slurm":
        problems.append(f"launch.runner: srun starts the ranks as SLURM tasks; with launch.backend={ln.backend} "
                        "use launch.runner=torchrun (it sets the same RANK, LOCAL_RANK, WORLD_SIZE...)")
    if ln.backend not in COMMAND_BACKENDS:
        problems.append(f"launch.backend={ln.backend}: your own script runs on {', '.join(COMMAND_BACKENDS)}")
    if problems:
        raise LaunchError("does not apply to your own script:\n  - " + "\n  - ".join(problems))


# Programs that start the ranks themselves: under torchrun every rank would start them all again.
RANK_STARTERS = ("mpirun", "mpiexec", "srun", "torchrun", "deepspeed", "accelerate")


def check_command(command: list[str], runner: str = "torchrun") -> None:
    if not command or not command[0].strip():
        raise UserError("give the command to run after `--`, e.g. "
                        "`clustertune launch launch.procs_per_node=2 -- python train.py`")
    starter = Path(command[0]).name
    if runner == "torchrun" and starter in RANK_STARTERS:
        srun = " on SLURM, launch.runner=srun starts each rank as a SLURM task without it;" if starter in (
            "mpirun", "mpiexec", "srun") else ""
        raise UserError(f"`{starter} ...` starts the ranks itself, and under launch.runner=torchrun (the default) every "
                        f"rank would start it again: give the script alone (`-- python train.py`) and torchrun "
                        f"starts the ranks;{srun} launch.runner=none runs the command as written, once per node")


def run_name(command: list[str]) -> str:
    """The run's name: the script the command runs (``train`` for ``python train.py``), or the
    subcommand of clustertune's own (``serve`` for ``clustertune serve RUN``)."""
    if Path(command[0]).name == "clustertune" and len(command) > 1 and not command[1].startswith("-"):
        return command[1]
    script = next((a for a in command[1:] if a.endswith(".py")), command[0])
    return Path(script).stem or "command"


def launch_yaml(recipe: Recipe) -> str:
    return yaml.safe_dump({"name": recipe.name, "launch": recipe.launch.model_dump(mode="json")},
                          sort_keys=False, default_flow_style=False)


def create_run(recipe: Recipe, command: list[str], root: Path, cli_command: list[str], run_id: str | None = None) -> Run:
    """The run directory of a command: run.json, its argv, its launch section, and the helper."""
    run = Run.create(root, recipe.name, TASK, None, cli_command, backend=recipe.launch.backend, run_id=run_id)
    run.paths.command.write_text(json.dumps(command) + "\n", encoding="utf-8")
    write_launch(run.paths, recipe)
    copy_helper(run.paths)
    return run


def write_launch(paths: RunPaths, recipe: Recipe) -> None:
    paths.launch_section.write_text(launch_yaml(recipe), encoding="utf-8")


def read_command(paths: RunPaths) -> list[str]:
    return [str(a) for a in json.loads(paths.command.read_text(encoding="utf-8"))]


def command_log(paths: RunPaths) -> Path:
    """A command's own log, what ``clustertune logs RUN`` shows of it as its foreground does: rank
    0's output (with its wrapper's lines: staging, stop requests); under ``launch.runner: none``,
    where the command starts its own processes, the first node's output."""
    try:
        runner = (yaml.safe_load(paths.launch_section.read_text(encoding="utf-8")) or {})["launch"]["runner"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        runner = "torchrun"  # a run directory from before launch.yaml named a runner: ranks under torchrun
    return paths.node_log(0) if runner == "none" else paths.rank_log(0)


def copy_helper(paths: RunPaths) -> None:
    """``clustertune.script`` (stdlib only) into the run directory, for nodes without clustertune."""

    # No clustertune/__init__.py: the copy is a namespace package, and Python prefers a regular
    # package anywhere on the path to a namespace portion. So where clustertune is installed, a
    # script (or `clustertune serve` run as the command) imports the whole package, not this copy.
    dest = paths.script_lib / "clustertune"
    (dest / "script").mkdir(parents=True, exist_ok=True)
    for f in Path(helper.__file__).parent.glob("*.py"):
        shutil.copy2(f, dest / "script" / f.name)


# torchrun's summary of a failed rank: "exitcode  : 127 (pid: ...)"
_RANK_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")
_CANNOT_START = re.compile(r"^clustertune: cannot start .*$", re.M)


_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\):\s*\[\d+\]:(?P<block>(?:\n +\S.*)+)")


# How torchrun itself stops the other ranks once one has failed: a rank that got one of these
# did not cause the failure.
_SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_FAILURES = re.compile(r"Failures:\s*\n(?P<block>(?:.*\n)*?)-{10,}\s*\nRoot Cause \(first observed failure\):")
_ENTRY = re.compile(r"rank\s*:\s*(\d+)[^\n]*\n(?:[^\n]*\n)*?\s*exitcode\s*:\s*(-?\d+)")


_RANK_TAG = re.compile(r"^((?:\[node \d+\] )?)\[rank (\d+)\] ")
_OWN_LINE = re.compile(r"^(?:\[node \d+\] )?clustertune")


def shown_line(line: str, tee: str) -> str | None:
    """A line of a node's output as the foreground of a command under ``torchrun`` or ``srun``
    shows it (the rank wrapper tags each rank's lines): under ``tee: rank0`` rank 0's lines
    without their ``[rank 0]`` tag and no other rank's (they are in the ranks' own logs); under
    ``all`` every rank's, tagged. clustertune's own lines show either way; torchrun's (its
    warnings, its failure block) stay in the node logs: the run's end names a failing rank in
    its own words, as locally."""
    tagged = _RANK_TAG.match(line)
    if tagged is None:
        return line if _OWN_LINE.match(line) else None
    if tee == "all":
        return line
    return tagged[1] + line[tagged.end():] if tagged[2] == "0" else None


def _how(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "a signal"
        return f"died of {name} (signal {-code})"
    return f"exited with code {code}"


def failed_ranks(log_text: str) -> list[tuple[int, int]]:
    """Every rank torchrun's latest failure summary lists, with its exit code (negative: the
    signal that killed it), the "first observed failure" first; the ranks torchrun itself
    stopped once another had failed (SIGTERM, SIGINT, SIGHUP) are left out. Empty without one."""
    found = list(_ROOT_CAUSE.finditer(log_text))
    if not found:
        return []
    last = found[-1]
    block = last.group("block")  # the latest summary (a restarted job writes one per failure)
    rank, code = re.search(r"rank\s*:\s*(\d+)", block), _RANK_EXIT.search(block)
    if rank is None or code is None:
        return []
    entries = [(int(rank.group(1)), int(code.group(1)))]
    failures = [m for m in _FAILURES.finditer(log_text[:last.end()])]
    if failures:
        entries += [(int(r), int(c)) for r, c in _ENTRY.findall(failures[-1].group("block"))]
    # A user's command under its wrapper reports such a signal as the shell does: 128 + its number.
    stopped = [-int(sig) for sig in _SHUTDOWN_SIGNALS] + [128 + int(sig) for sig in _SHUTDOWN_SIGNALS]
    seen: dict[int, int] = {}
    for r, c in entries:
        if c not in stopped:
            seen.setdefault(r, c)
    return list(seen.items()) or entries[:1]


def crashed(code: int) -> bool:
    """Killed by a signal of its own (a crash, the OOM killer), not stopped by torchrun."""
    return code < 0


def root_cause(log_text: str) -> tuple[int, str] | None:
    """The rank that caused a torchrun failure and how, from its failure summary: ``(1, "died
    of SIGSEGV (signal 11)")`` or ``(0, "exited with code 1")``; None when there is no summary.

    A rank killed by a signal of its own (a crash, the OOM killer) is the cause wherever torchrun
    lists it: the others then fail in the collective it left (exit code 1), and which of them
    torchrun observes first is a race. Otherwise torchrun's "first observed failure" counts."""
    entries = failed_ranks(log_text)
    if not entries:
        return None
    r, c = next(((r, c) for r, c in entries if crashed(c)), entries[0])
    return r, _how(c)


def root_cause_time(log_text: str) -> str:
    """When torchrun's latest summary says its root cause failed (``2026-11-28_13:59:10``, which
    sorts as text); "" without one. Of several nodes' summaries, the earliest is the cause."""
    found = list(_ROOT_CAUSE.finditer(log_text))
    when = re.search(r"time\s*:\s*(\S+)", found[-1].group("block")) if found else None
    return when.group(1) if when else ""


def command_exit_code(rc: int, log_text: str) -> int:
    """The command's own exit code: the first failed rank's under torchrun, else ``rc``."""
    found = _RANK_EXIT.search(log_text) if rc != 0 else None
    return int(found.group(1)) if found else rc


def tail(path: Path, lines: int = 20) -> str:
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


@dataclass(frozen=True)
class FailedRank:
    """One rank torchrun's summary lists as failed, with its own last lines, wherever read."""

    rank: int
    code: int
    summary_time: str
    """The node summary's time (:func:`root_cause_time`), sortable as text."""
    last_write: float
    """When its own log was last written (seconds): the cause wrote its last line first."""
    where: str
    """Its log's path on this machine, as the reason names it ("" where it is on a host)."""
    lines: str
    host: str = ""
    """The host it ran on, where that is not this machine."""


def describe_failed(found: list[FailedRank]) -> str | None:
    """The failing ranks in their own words, the cause first: a rank that crashed, else the one
    whose summary time, then whose log's last write, is earliest (the others usually failed in
    the collectives it left, after it had written its last line). None when there are none."""
    order = sorted(found, key=lambda f: (not crashed(f.code), f.summary_time, f.last_write, f.rank))
    return "\n".join(f"rank {f.rank} {_how(f.code)}" + (f" on {f.host}" if f.host else "") + "; its last lines"
                     + (f" ({f.where})" if f.where else "") + f":\n{f.lines}" for f in order) or None


def failing_ranks(paths: RunPaths, node_logs: list[str]) -> str | None:
    """:func:`describe_failed` for the ranks the nodes' logs (``node_logs``: their texts) name,
    their own logs read from this machine's run directory."""
    found = []
    for text in node_logs:
        for rank, code in failed_ranks(text):
            own = paths.rank_log(rank)
            if own.is_file():
                found.append(FailedRank(rank, code, root_cause_time(text), own.stat().st_mtime, str(own), tail(own, 15)))
    return describe_failed(found)


def failure_text(paths: RunPaths, code: int, log: Path, log_text: str) -> str:
    """Why a command failed on this host, in its failing rank's own words (:func:`failing_ranks`);
    the node's last lines where no rank is named (``runner: none``)."""
    cannot = _CANNOT_START.findall(log_text)
    first = f"{cannot[0]}\n" if cannot else ""
    own = failing_ranks(paths, [log_text])
    if own is not None:
        return first + own
    return f"{first}the command exited with code {code}; last lines of {log}:\n{tail(log)}"


def finish_attempt(run: Run, rc: int, log: Path) -> RunState:
    """Record how an attempt of a command ended on this machine: CANCELLED when a cancel asked
    for it, COMPLETED on exit code 0, else FAILED with the failing rank's own message first."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    code = command_exit_code(rc, text)
    run.reload()
    if run.last_attempt is not None:
        run.record_attempt(exit_code=code)
    if run.state.terminal:
        return run.state
    if run.paths.cancel_request.is_file():
        run.transition(RunState.CANCELLED, reason=CANCELLED_BY_USER)
    elif run.paths.stop_request.is_file():  # a stop request (a signal to the launcher): resume goes on
        why = run.paths.stop_request.read_text(encoding="utf-8", errors="replace").strip()
        run.transition(RunState.PREEMPTED, reason=f"stop request (SIG{why}); the command exited with code {code}")
    elif rc == 0:
        run.transition(RunState.COMPLETED)
    else:
        run.transition(RunState.FAILED, reason=failure_text(run.paths, code, log, text))
    return run.state
