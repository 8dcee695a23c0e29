"""A finding: one code raised on one expression (or variable) of one file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.lint.codes import Severity

__all__ = ["Finding", "sort_key"]


class Finding(BaseModel):
    """What ``lint`` found, where, why it matters and, where one exists, the fix."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(description="Stable code, e.g. OBS101; docs/lint.md explains each.")
    name: str = Field(description="The code's short name, e.g. quantile-per-series.")
    severity: Severity = Field(description="error, warning or info.")
    file: str = Field(description="The file, as given on the command line.")
    where: str = Field(description="Panel title, rule name, or variable ($name).")
    ref: str = Field(default="", description="Grafana refId, rule kind, or empty.")
    line: int | None = Field(default=None, description="1-based line in the file, when known.")
    expression: str = Field(
        default="", description="The expression as written (empty for a variable)."
    )
    message: str = Field(description="One line naming what is wrong in this expression.")
    explanation: str = Field(description="One paragraph in plain words: why it matters.")
    fix: str | None = Field(
        default=None,
        description="The corrected expression, when one exists (built by the builders).",
    )


def sort_key(finding: Finding) -> tuple[str, int, str, str, str]:
    """Group by file, then in file order, then by code."""
    return (finding.file, finding.line or 0, finding.where, finding.ref, finding.code)
