"""Warnings of the libraries a run uses go to the run's log, not the terminal.

transformers, DeepSpeed, bitsandbytes, PEFT, torch (through Python's ``warnings``) and the rest
print on every run things a user cannot act on (bitsandbytes' "Failed to load CPU gemm_4bit_forward",
"Setting accelerator to CPU", deprecation notices of one library about another), in the middle of
the progress bar or above an error. While a run trains in this process they are written to its
``logs/run.log`` instead; what comes before the run directory exists (the preflight, resolving a
base model, preparing the data) is held and written there once it does. Where no run follows (the
preflight of ``validate``, a run refused before it starts) they are dropped, unless clustertune
logs at DEBUG level (``--debug``): then they are printed after all.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Libraries whose own logger writes to the terminal through a handler of its own (no
# propagation): a filter on that logger hands its records to the run log instead. DeepSpeed
# makes its logger on import, and keeps a filter put on it before.
_OWN_HANDLER_LOGGERS = ("DeepSpeed",)


class _Sink(logging.Handler):
    """Holds records until the run's log handler is known, then passes them on to it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.held: list[logging.LogRecord] = []
        self.target: logging.Handler | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if _ours(record.name):
            # clustertune's own warnings are not the libraries': a handler on the root (this one)
            # keeps Python from printing them, so where none of clustertune's own shows them, do.
            if not _shown_before_root(record.name) and logging.lastResort is not None \
                    and record.levelno >= logging.lastResort.level:
                logging.lastResort.handle(record)
            return
        if self.target is None:
            self.held.append(record)
        elif record.levelno >= self.target.level:
            self.target.handle(record)


def _ours(name: str) -> bool:
    return name == "clustertune" or name.startswith("clustertune.")


def _shown_before_root(name: str) -> bool:
    """Whether a record of logger ``name`` meets a handler before it reaches the root logger."""
    lg: logging.Logger | None = logging.getLogger(name)
    root = logging.getLogger()
    while lg is not None and lg is not root:
        if lg.handlers:
            return True
        if not lg.propagate:
            return False
        lg = lg.parent
    return False


class _Divert(logging.Filter):
    """On a library logger: its records go to the sink, never to its own handlers."""

    def __init__(self, sink: _Sink) -> None:
        super().__init__()
        self.sink = sink

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.sink.level:
            self.sink.handle(record)
        return False


class LibraryLogs:
    """``start()``, then ``attach(handler)`` once the run's log file is open, then ``stop()``
    (which puts every logger back as it was)."""

    def __init__(self) -> None:
        self.sink = _Sink()
        self._undo: list[Any] = []

    def start(self) -> LibraryLogs:
        root = logging.getLogger()
        # Loggers without handlers of their own (bitsandbytes, peft, torch...) reach the root:
        # with a handler there, Python's last-resort printing to stderr is not used.
        root.addHandler(self.sink)
        self._undo.append(lambda: root.removeHandler(self.sink))
        _shared.acquire()
        self._undo.append(_shared.release)
        for name in _OWN_HANDLER_LOGGERS:
            lg, f = logging.getLogger(name), _Divert(self.sink)
            lg.addFilter(f)
            self._undo.append(lambda lg=lg, f=f: lg.removeFilter(f))
        return self

    def attach(self, handler: logging.Handler) -> None:
        """From now on into ``handler`` (the run's log file), beginning with what was held."""
        self.sink.target = handler
        held, self.sink.held = self.sink.held, []
        for record in held:
            if record.levelno >= handler.level:
                handler.handle(record)

    def hold(self, records: list[logging.LogRecord]) -> LibraryLogs:
        """Start with ``records`` already held (what an earlier diversion handed over)."""
        self.sink.held[:0] = records
        return self

    def hand_over(self) -> list[logging.LogRecord]:
        """Stop, returning what is held for the next diversion instead of printing it."""
        held, self.sink.held = self.sink.held, []
        self.stop()
        return held

    def stop(self) -> None:
        while self._undo:
            self._undo.pop()()
        if self.sink.target is None and self.sink.held:
            # No run took them (a failure before its directory existed, or none was to start).
            show_if_debugging(self.sink.held)
        self.sink.held = []
        self.sink.target = None


LIBRARY_LOG_FORMAT = "%(asctime)s %(levelname)s [%(name)s] %(message)s"


def run_log_handler(path: Path) -> logging.FileHandler:
    """A handler that appends the libraries' warnings to a run's log (``logs/run.log``), each with
    its logger's name."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(LIBRARY_LOG_FORMAT))
    return handler


def show_if_debugging(records: list[logging.LogRecord]) -> None:
    """Held warnings no run took: printed only when clustertune logs at DEBUG level (``--debug``)."""
    if not logging.getLogger("clustertune").isEnabledFor(logging.DEBUG):
        return
    fmt = logging.Formatter("%(name)s %(levelname)s: %(message)s")
    for record in records:
        print(fmt.format(record), file=sys.stderr)


@contextlib.contextmanager
def libraries_quiet(into: list[logging.LogRecord] | None = None) -> Iterator[None]:
    """The libraries' warnings of the block, kept off the terminal: appended to ``into`` (for a run's
    log, once the run exists), or, with no list or when the block fails, dropped (see
    :func:`show_if_debugging`)."""
    libraries = LibraryLogs().start()
    try:
        yield
    except BaseException:
        libraries.stop()
        raise
    if into is None:
        libraries.stop()
    else:
        into.extend(libraries.hand_over())


class _SharedDiversion:
    """What belongs to the process, not to one run: ``warnings`` captured into logging and
    transformers' own stderr handler switched off. Runs in threads of one process may overlap
    and stop in any order, so the first start changes it and the last stop puts it back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._undo: list[Any] = []

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users > 1:
                return
            if not _warnings_captured():
                logging.captureWarnings(True)  # warnings.warn(...) -> the "py.warnings" logger -> root
                self._undo.append(lambda: logging.captureWarnings(False))
            self._divert_transformers()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            while self._undo:
                self._undo.pop()()

    def _divert_transformers(self) -> None:
        """transformers' loggers propagate to its library logger, whose stderr handler prints
        them: that handler is switched off and the records propagate to the root instead. Where
        transformers is not imported yet, this happens when it is (importing it costs a third of
        a second, and a command that never touches a model never pays it)."""
        if _HF_LOGGING in sys.modules:
            self._undo.append(_divert_hf_logger())
            return
        hook = _AfterImport(_HF_LOGGING, self._on_hf_import)
        sys.meta_path.insert(0, hook)
        self._undo.append(hook.remove)

    def _on_hf_import(self) -> None:
        with self._lock:
            if self._users > 0:  # not released meanwhile
                self._undo.append(_divert_hf_logger())


_HF_LOGGING = "transformers.utils.logging"


def _divert_hf_logger() -> Any:
    """Switch transformers' own stderr handler off; returns what puts it back."""
    hf_logging = sys.modules[_HF_LOGGING]  # imported: before the diversion, or just now (the finder)
    lib = logging.getLogger("transformers")
    hf_logging.get_logger()  # makes sure the library logger and its handler exist
    propagate, handlers = lib.propagate, list(lib.handlers)
    for h in handlers:
        lib.removeHandler(h)
    lib.propagate = True

    def undo() -> None:
        lib.propagate = propagate
        for h in handlers:
            lib.addHandler(h)

    return undo


class _AfterImport:
    """A finder on ``sys.meta_path`` that runs ``then()`` once module ``name`` has been executed,
    whoever imports it; it finds nothing itself (the other finders find the module)."""

    def __init__(self, name: str, then: Any) -> None:
        self.name, self.then = name, then

    def remove(self) -> None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        self.remove()  # once; and the finders below find the module itself
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader:
    """The module's own loader, and ``then()`` once it has executed the module."""

    def __init__(self, real: Any, then: Any) -> None:
        self.real, self.then = real, then

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.real.exec_module(module)
        self.then()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks and inspect
        return getattr(self.real, name)


_shared = _SharedDiversion()


def _warnings_captured() -> bool:
    """Whether ``logging.captureWarnings(True)`` is already in force."""
    return warnings.showwarning.__module__ == "logging" and warnings.showwarning.__name__ == "_showwarning"
