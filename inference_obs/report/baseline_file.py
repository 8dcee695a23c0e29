"""A previous ``report.json`` read as a baseline: the whole document, checked against its format.

:func:`read_report_json` parses the file under :mod:`inference_obs.documents`'
rules (no ``NaN`` or ``Infinity``, no repeated key, bounded nesting), then
reads it into :class:`~inference_obs.report.report_json_model.ReportDocument`,
the model the report writes it from, in strict mode: text is not a number
and a number is not text (a value ``"1.5"`` is refused, never read as 1.5).
A field missing, unknown to the format or of the wrong type is refused
naming its path (``measurements[3].value: ...``), never met later as a
Python error in the comparison.

:func:`check_in_common` refuses a baseline that shares no deployment with the
report: a baseline of another fleet or dataset would compare nothing, and a
``--fail-on regression`` run would pass without a word.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

import pydantic

from inference_obs.documents import json_document
from inference_obs.errors import DatasetError, DocumentError
from inference_obs.report.report_json_model import FORMAT, ReportDocument

__all__ = ["REPORT_FORMAT", "check_in_common", "read_report_json"]

#: The format a baseline must declare (report.json's ``format``).
REPORT_FORMAT = FORMAT
# Problems named in the one-line error; the rest are counted (a file of the wrong kind
# would otherwise fill the screen).
_SHOWN = 3


def _problems(exc: pydantic.ValidationError) -> str:
    """The first few of pydantic's errors as ``field.path: problem``, one line."""
    errors = exc.errors()
    shown = []
    for error in errors[:_SHOWN]:
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in error["loc"])
        # pydantic names the model class ("or instance of WindowEntry"): the path says which.
        msg = re.sub(r" or instance of \w+$", "", error["msg"].removeprefix("Value error, "))
        shown.append(f"{where.replace('.[', '[') or 'the whole file'}: {msg}")
    more = len(errors) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more else "")


def read_report_json(path: Path) -> ReportDocument:
    """A previous ``report.json``, read into its model and checked whole.

    Returns
    -------
    ReportDocument
        The document, its measurements indexed by key.

    Raises
    ------
    DatasetError
        Naming the file: missing, not JSON, nested too deep, a repeated key,
        a non-finite number, another format, or a field missing, unknown or
        of the wrong type (naming its path).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        # The documents' rules first: pydantic's parser keeps the last of a repeated key,
        # reads NaN, and nests until its own limit.
        data = json_document(text, str(path))
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
        return ReportDocument.model_validate_json(text, strict=True)
    except pydantic.ValidationError as exc:
        raise DatasetError(
            f"{path}: not a report.json a report can compare with: {_problems(exc)}"
        ) from None


def check_in_common(previous: ReportDocument, names: Collection[str], source: str) -> None:
    """Refuse a baseline that shares no deployment name with this report's ``names``.

    Raises
    ------
    DatasetError
        Naming ``source`` and both sets of names (escaped, so look-alikes show).
    """
    then = [d.name for d in previous.deployments]
    if not set(then) & set(names):
        was, now = (", ".join(map(ascii, n)) or "none" for n in (then, names))
        raise DatasetError(
            f"{source}: no deployment in common with this report (the baseline has {was}; "
            f"this report {now}): give a report.json of the same deployments"
        )
