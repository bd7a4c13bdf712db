"""Library warnings during a run go to the run's log, not the terminal (nor above an error when no
run started, unless --debug), clustertune's own warnings still show, and everything is put back
afterwards."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

import pytest
from transformers.utils import logging as hf_logging

from clustertune.runs.library_logs import LibraryLogs


def _emit_everything() -> None:
    hf_logging.get_logger("transformers.modeling_utils").warning("loss_type=None was set in the config")
    warnings.warn("a torch-style UserWarning", UserWarning, stacklevel=1)
    logging.getLogger("bitsandbytes.backends.cpu.ops").warning("Failed to load CPU gemm_4bit_forward")
    logging.getLogger("DeepSpeed").warning("Setting accelerator to CPU")


@pytest.fixture
def deepspeed_like_logger() -> logging.Logger:
    """A logger shaped like DeepSpeed's: its own stdout handler, no propagation."""
    lg = logging.getLogger("DeepSpeed")
    handler = logging.StreamHandler(sys.stdout)
    lg.addHandler(handler)
    lg.propagate = False
    yield lg
    lg.removeHandler(handler)
    lg.propagate = True


@pytest.fixture
def bitsandbytes_at_its_default_level() -> None:
    """The `generate`/`chat` commands silence bitsandbytes for their process; tests calling them
    in this one may have done so already."""
    lg = logging.getLogger("bitsandbytes")
    level = lg.level
    lg.setLevel(logging.NOTSET)
    yield
    lg.setLevel(level)


def test_warnings_go_to_the_run_log_including_those_before_it_existed(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], deepspeed_like_logger: logging.Logger,
        bitsandbytes_at_its_default_level: None) -> None:
    libs = LibraryLogs().start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            _emit_everything()  # before the run's log exists: held
            handler = logging.FileHandler(tmp_path / "run.log", encoding="utf-8")
            handler.setLevel(logging.WARNING)
            libs.attach(handler)
            hf_logging.get_logger("transformers.generation").warning("after attach")
    finally:
        libs.stop()
        handler.close()
    out = capfd.readouterr()
    assert out.out == "" and out.err == "", out
    text = (tmp_path / "run.log").read_text()
    for message in ("loss_type=None", "torch-style UserWarning", "gemm_4bit_forward", "Setting accelerator", "after attach"):
        assert message in text, text


def test_everything_is_put_back_and_held_warnings_are_dropped_if_no_run_started_but_for_debug(
        capfd: pytest.CaptureFixture[str]) -> None:
    shown_before = warnings.showwarning
    lib = logging.getLogger("transformers")
    hf_logging.get_logger()
    handlers_before, propagate_before = list(lib.handlers), lib.propagate
    libs = LibraryLogs().start()
    hf_logging.get_logger("transformers.modeling_utils").warning("held, then dropped")
    libs.stop()  # the run never started (a failure before its directory existed): not above its error
    assert "held, then dropped" not in capfd.readouterr().err
    ours = logging.getLogger("clustertune")
    level = ours.level
    ours.setLevel(logging.DEBUG)  # what --debug sets
    try:
        again = LibraryLogs().start()
        hf_logging.get_logger("transformers.modeling_utils").warning("held, then shown for --debug")
        again.stop()
    finally:
        ours.setLevel(level)
    assert "held, then shown for --debug" in capfd.readouterr().err
    assert warnings.showwarning is shown_before
    assert logging.getLogger().handlers == [h for h in logging.getLogger().handlers if h is not libs.sink]
    # transformers prints through its own handler again
    assert lib.handlers == handlers_before and lib.handlers and lib.propagate is propagate_before


def test_two_overlapping_runs_that_stop_out_of_order_put_everything_back() -> None:
    """Runs in threads of one process overlap: the first to start may stop first."""
    lib = logging.getLogger("transformers")
    hf_logging.get_logger()
    handlers_before, propagate_before = list(lib.handlers), lib.propagate
    shown_before = warnings.showwarning
    first = LibraryLogs().start()
    second = LibraryLogs().start()
    first.stop()
    assert lib.handlers == [] and lib.propagate is True  # the second run still diverts
    second.stop()
    assert lib.handlers == handlers_before and lib.handlers
    assert lib.propagate is propagate_before
    assert warnings.showwarning is shown_before
    root = logging.getLogger().handlers
    assert first.sink not in root and second.sink not in root


def test_clustertune_s_own_warnings_are_not_taken_for_a_library_s(capfd: pytest.CaptureFixture[str]) -> None:
    """The diversion's handler on the root keeps Python from printing warnings that reach no other
    handler: clustertune's own are printed still, once."""
    ours = logging.getLogger("clustertune.launch")
    saved = logging.getLogger("clustertune").handlers[:]
    for h in saved:
        logging.getLogger("clustertune").removeHandler(h)
    libs = LibraryLogs().start()
    try:
        ours.warning("our own warning")
    finally:
        libs.stop()
        for h in saved:
            logging.getLogger("clustertune").addHandler(h)
    err = capfd.readouterr().err
    assert err.count("our own warning") == 1, err


def test_the_real_deepspeeds_import_warning_is_taken_off_the_terminal_for_the_run() -> None:
    """DeepSpeed's own logger (its handler on stdout, not propagating) warns on import on a
    machine without a GPU. A plain run no longer imports DeepSpeed (models/saving.py), so the
    end-to-end terminal tests see no library warning at all; this is where the real one is kept
    off the terminal and handed to the run's log."""
    import json
    import subprocess

    code = ("import json; from clustertune.runs.library_logs import libraries_quiet\n"
            "records = []\n"
            "with libraries_quiet(records):\n"
            "    import deepspeed\n"
            "print('RECORDS ' + json.dumps([r.getMessage() for r in records]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("RECORDS ")]
    assert any(m.startswith("Setting accelerator to CPU") for m in json.loads(line.removeprefix("RECORDS ")))
    rest = out.stdout.replace(line, "") + out.stderr
    assert "Setting accelerator" not in rest, rest


LAZY = r"""
import logging, os, sys
from clustertune.runs.library_logs import LibraryLogs
libs = LibraryLogs().start()
assert "transformers" not in sys.modules, "the diversion imported transformers"
from transformers.utils import logging as hf_logging   # imported inside the block, as a model check does
hf_logging.get_logger("transformers.configuration_utils").warning("held: %s", "imported inside")
held = [r.getMessage() for r in libs.sink.held]
lib = logging.getLogger("transformers")
print("DIVERTED", lib.handlers == [] and lib.propagate, held)
libs.stop()
# as transformers set it up itself: its handler back, and not propagating but where it thinks it
# runs in CI (the CI environment variable), where it propagates
ci = os.getenv("CI", "").upper() in {"1", "ON", "YES", "TRUE"}
print("RESTORED", lib.handlers == [hf_logging._default_handler] and lib.propagate is ci)
again = LibraryLogs().start()     # transformers imported now: diverted at once
print("AGAIN", lib.handlers == [] and lib.propagate)
again.stop()
print("HOOKS", [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_AfterImport"])
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_block_that_never_imports_transformers_never_pays_for_it_and_one_that_does_is_diverted(ci: str) -> None:
    """Importing transformers takes a third of a second: `clustertune validate` of a checked model,
    `status` and the rest do without it, so the diversion waits for its import. Its library logger
    is put back as transformers made it, which differs where the CI variable is set."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    out = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "held: imported inside" not in out.stderr, out.stderr  # not printed by transformers' handler
    assert "DIVERTED True ['held: imported inside']" in out.stdout, out.stdout
    assert "RESTORED True" in out.stdout and "AGAIN True" in out.stdout and "HOOKS []" in out.stdout, out.stdout
