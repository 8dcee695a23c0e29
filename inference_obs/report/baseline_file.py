"""A previous ``report.json`` read as a baseline: every field the comparison reads, checked.

:func:`read_report_json` parses the file under :mod:`inference_obs.documents`'
rules (no ``NaN`` or ``Infinity``, no repeated key, bounded nesting) and
validates the fields :mod:`~inference_obs.report.baseline` and
:mod:`~inference_obs.report.baseline_rules` read against
:class:`PreviousReport`. Only those fields: a report.json written by an
earlier version, with fewer or other sections, still serves as a baseline. A
field of the wrong type is refused naming its path
(``measurements[3].value: ...``), never met later as a Python error, and never
read as a number it is not (a value ``"1.5"`` is text, not 1.5).

:func:`check_in_common` refuses a baseline that shares no deployment with the
report: a baseline of another fleet or dataset would compare nothing, and a
``--fail-on regression`` run would pass without a word.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, PlainValidator, model_validator

from inference_obs.documents import json_document
from inference_obs.errors import DatasetError, DocumentError

__all__ = ["REPORT_FORMAT", "PreviousReport", "check_in_common", "read_report_json"]

#: The format a baseline must declare (report.json's ``format``).
REPORT_FORMAT = "inference-obs-report/1"
# Problems named in the one-line error; the rest are counted (a file of the wrong kind
# would otherwise fill the screen).
_SHOWN = 3


def _json_number(value: object) -> float | str | None:
    """A report.json number: a finite number, ``"+Inf"``/``"-Inf"``, or null."""
    if value is None or value in ("+Inf", "-Inf"):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError('expected a number, "+Inf", "-Inf" or null')
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return float(value)


def _aware_time(text: str) -> str:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("expected an ISO 8601 time such as 2026-01-01T00:00:00+00:00") from None
    if moment.tzinfo is None:
        raise ValueError("expected a time with its offset (+00:00)")
    return text


Number = Annotated[float | str | None, PlainValidator(_json_number)]
Time = Annotated[str, AfterValidator(_aware_time)]


class _Read(BaseModel):
    # Strict: text is not a number, a number is not text. Fields not read are let be.
    model_config = ConfigDict(frozen=True, extra="allow", strict=True)


class _Window(_Read):
    start: Time
    end: Time

    @model_validator(mode="after")
    def _ordered(self) -> _Window:
        if datetime.fromisoformat(self.end) <= datetime.fromisoformat(self.start):
            raise ValueError("the window ends before it starts")
        return self


class _Deployment(_Read):
    name: str
    window: _Window
    declared: dict[str, Any]


class _Bounds(_Read):
    lower: Number = None
    upper: Number = None


class _Annotation(_Read):
    kind: str


class _Measurement(_Read):
    key: str
    deployment: str
    unit: str
    status: Literal["ok", "no_data", "partial", "invalid"]
    value: Number
    bounds: _Bounds | None = None
    annotations: list[_Annotation] = []


class _Scope(_Read):
    rules: str


class PreviousReport(_Read):
    """The fields of a report.json that a comparison with it reads (docs/report-json.md)."""

    format: Literal["inference-obs-report/1"]
    title: str = ""
    scope: _Scope
    deployments: list[_Deployment]
    measurements: list[_Measurement]

    @model_validator(mode="after")
    def _unique(self) -> PreviousReport:
        for what, names in (
            ("deployment names", [d.name for d in self.deployments]),
            ("measurement keys", [m.key for m in self.measurements]),
        ):
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ValueError(f"{what} repeat: {', '.join(map(ascii, repeated[:_SHOWN]))}")
        return self


def _problems(exc: pydantic.ValidationError) -> str:
    """The first few of pydantic's errors as ``field.path: problem``, one line."""
    errors = exc.errors()
    shown = []
    for error in errors[:_SHOWN]:
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in error["loc"])
        # pydantic names the model class ("or instance of _Window"): the path says which.
        msg = re.sub(r" or instance of \w+$", "", error["msg"].removeprefix("Value error, "))
        shown.append(f"{where.replace('.[', '[') or 'the whole file'}: {msg}")
    more = len(errors) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


def read_report_json(path: Path) -> dict[str, Any]:
    """A previous ``report.json``, with every field a comparison reads checked.

    Returns
    -------
    dict
        The document as parsed (the comparison reads it as JSON data).

    Raises
    ------
    DatasetError
        Naming the file: missing, not JSON, nested too deep, a repeated key,
        a non-finite number, another format, or a field the comparison reads
        missing or of the wrong type (naming its path).
    """
    try:
        data = json_document(Path(path).read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise DatasetError(f"{path}: no report.json there") from None
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise DatasetError(f"{path}: cannot be read ({problem})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    except DocumentError as exc:
        raise DatasetError(str(exc)) from None
    if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise DatasetError(f"{path}: not a report.json of format {REPORT_FORMAT} ({found!r})")
    try:
        PreviousReport.model_validate(data)
    except pydantic.ValidationError as exc:
        raise DatasetError(
            f"{path}: not a report.json a report can compare with: {_problems(exc)}"
        ) from None
    return data


def check_in_common(previous: Mapping[str, Any], names: Collection[str], source: str) -> None:
    """Refuse a baseline that shares no deployment name with this report's ``names``.

    Raises
    ------
    DatasetError
        Naming ``source`` and both sets of names (escaped, so look-alikes show).
    """
    then = [str(d["name"]) for d in previous["deployments"]]
    if not set(then) & set(names):
        was, now = (", ".join(map(ascii, n)) or "none" for n in (then, names))
        raise DatasetError(
            f"{source}: no deployment in common with this report (the baseline has {was}; "
            f"this report {now}): give a report.json of the same deployments"
        )
