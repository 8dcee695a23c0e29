"""The rows of a dataset verification: one published number, its recomputation, a status."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RowStatus", "VerifyRow"]


class RowStatus(StrEnum):
    """How a published number compares with its recomputation."""

    OK = "ok"
    #: Both are numbers, further apart than the tolerance (or of another status).
    DIFFERS = "differs"
    #: One side is a number, the other has none.
    MISSING = "missing"
    #: The samples cannot reproduce it; ``reason`` says why.
    NOT_RECOMPUTABLE = "not_recomputable"
    #: Neither side has a number (both null): nothing was compared.
    ABSENT = "absent"
    #: A published bound that excludes the ground truth.
    OUTSIDE = "outside"


class VerifyRow(BaseModel):
    """One published number and its recomputation (in the number's own unit)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(description="Measurement key, or the JSON path in aggregates.json.")
    published: float | None
    recomputed: float | None
    difference: float | None = Field(None, description="recomputed - published.")
    tolerance: float | None = Field(None, description="Largest |difference| counted as equal.")
    status: RowStatus
    reason: str = ""
