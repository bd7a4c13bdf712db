"""Unwrapping and saving a model without importing DeepSpeed where no DeepSpeed engine can exist.

Accelerate's ``extract_model_from_parallel`` (behind ``Accelerator.unwrap_model`` and behind
transformers' ``save_pretrained``, which unwraps the model it saves) imports ``deepspeed``
whenever the package is installed, only to add ``DeepSpeedEngine`` to an ``isinstance`` test.
That import takes 1.5-3 s of CPU in every process that saves a model or unwraps one, DDP and
single-process runs included (measured on 2 CPU cores: RESULTS.md, "The test suite itself").
No model can be a DeepSpeed engine before ``deepspeed`` has been imported, so while it is not in
``sys.modules`` the test is answered without it; once it is, Accelerate's own check runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def no_deepspeed_import() -> Iterator[None]:
    """Inside it, Accelerate's unwrap does not import ``deepspeed`` to look for its engine.

    Only the name that ``extract_model_from_parallel`` reads (in ``accelerate.utils.other``, its
    one use there) is swapped, for the length of the block, and only while ``deepspeed`` is not
    imported. A second thread inside at the same time may find Accelerate's own function back
    and import deepspeed: slower, never wrong."""
    try:
        from accelerate.utils import other
    except ImportError:  # without Accelerate there is no probe to skip
        yield
        return
    real = other.is_deepspeed_available
    if "deepspeed" in sys.modules or getattr(real, "_clustertune_skip", False):
        yield
        return

    def imported_only() -> bool:
        # An engine exists only once deepspeed is imported; then Accelerate's own answer.
        return "deepspeed" in sys.modules and real()

    imported_only._clustertune_skip = True  # type: ignore[attr-defined]
    other.is_deepspeed_available = imported_only
    try:
        yield
    finally:
        other.is_deepspeed_available = real


def save_pretrained(model: Any, directory: str, **kwargs: Any) -> None:
    """``model.save_pretrained(directory, **kwargs)``, without the deepspeed import above."""
    with no_deepspeed_import():
        model.save_pretrained(directory, **kwargs)
