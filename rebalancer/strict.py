"""The base of every settings model: unknown keys are refused, values are frozen, and a number
must be finite.

A misspelt limit that is silently dropped is a limit that does not hold; an infinite timeout or
threshold is no setting either.
"""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
)


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )
