"""Every module of the package stays under 500 lines: past that a file holds two subjects, and
the second gets a module of its own (as recipe/data_schema.py, data/source_checks.py,
train/held_state.py and serve/tinker/sampling.py did)."""

from __future__ import annotations

from pathlib import Path

import clustertune

PACKAGE = Path(clustertune.__file__).parent
LIMIT = 500


def test_no_module_is_over_500_lines() -> None:
    sizes = {p.relative_to(PACKAGE).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100, "the package's modules are read"
    over = {path: n for path, n in sizes.items() if n > LIMIT}
    assert over == {}, f"over {LIMIT} lines: {over}; split each by subject"
