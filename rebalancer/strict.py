"""The base of every settings model: unknown keys are refused, values are frozen.

A misspelt limit that is silently dropped is a limit that does not hold.
"""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
