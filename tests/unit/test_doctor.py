"""`clustertune doctor` says what a run would do on this machine: the precision `auto` resolves to
(as the run records it) and, for a missing extra, the command that installs it here."""

from __future__ import annotations

import pytest
import torch

from clustertune import doctor
from clustertune.extras import install_hint
from clustertune.recipe.load import load_recipe
from clustertune.train import precision
from tests.helpers import TINY_CAUSAL, with_


@pytest.mark.parametrize(("bf16_instructions", "name"), [(True, "bf16"), (False, "fp32")])
def test_doctor_reports_the_precision_a_run_records(monkeypatch: pytest.MonkeyPatch, bf16_instructions: bool,
                                                    name: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision, "cpu_bf16", lambda: bf16_instructions)
    found = {c.name: c.value for c in doctor.devices()}
    assert found["GPUs"] == "none visible: training runs on the CPU"
    assert found["precision"].split()[0] == name
    # what a run with `precision: auto` records, decided by the same function
    assert precision.precision_name(load_recipe(with_(TINY_CAUSAL, train={"precision": "auto"}))) == name


def test_a_missing_optional_package_names_the_command_for_this_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = doctor.installed_version
    monkeypatch.setattr(doctor, "installed_version", lambda pkg: None if pkg in ("fastapi", "deepspeed") else real(pkg))
    fixes = {c.name: c.fix for c in doctor.versions() if not c.value[0].isdigit()}
    assert fixes["fastapi"] == f"{install_hint('serve')} (clustertune serve)"
    assert fixes["deepspeed"].startswith(install_hint("deepspeed"))
    assert not any("clustertune[" in fix for fix in fixes.values())
