"""The base of every recipe section: unknown keys are errors, values are frozen, field
docstrings are the documentation, no NaN or infinity, and no boolean where a number goes
(pydantic reads ``true`` as 1 for an int field: ``train.batch_size=true`` would train with 1)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

_NUMBERS = (int, float, int | None, float | None)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name and cls.model_fields[info.field_name].annotation in _NUMBERS:
            raise ValueError("expected a number, got a boolean")
        return value
