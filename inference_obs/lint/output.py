"""Findings as text (one per line, grouped by file and panel), JSON, and SARIF 2.1.0.

SARIF is the Static Analysis Results Interchange Format that code-scanning
interfaces read (GitHub's among them): one run, the codes as the tool's rules,
each finding a result at its file and line, with the panel or rule name as a
logical location and the corrected expression in the result's properties.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import PureWindowsPath
from typing import Any
from urllib.parse import quote

from inference_obs.lint.codes import CODES, Severity
from inference_obs.lint.findings import Finding
from inference_obs.version import __version__

__all__ = ["artifact_uri", "to_json", "to_sarif", "to_text"]

_SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def to_text(findings: Sequence[Finding], files: int) -> str:
    """One line per finding, under a line per file and a line per panel or rule."""
    lines: list[str] = []
    file = where = None
    for finding in findings:
        if finding.file != file:
            file, where = finding.file, None
            lines.append(finding.file)
        if finding.where != where:
            where = finding.where
            lines.append(f"  {where}")
        place = f"line {finding.line}" if finding.line else ""
        ref = f"[{finding.ref}]" if finding.ref else ""
        tag = " ".join(part for part in (place, ref) if part)
        fix = f" -> {finding.fix}" if finding.fix else ""
        lines.append(
            f"    {finding.severity.value:<7} {finding.code} {finding.name}"
            f"{f' {tag}' if tag else ''}: {finding.message}{fix}"
        )
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    summary = ", ".join(f"{n} {s.value}{'s' if n != 1 else ''}" for s, n in counts.items())
    noun = "finding" if len(findings) == 1 else "findings"
    lines.append(f"{len(findings)} {noun} in {files} file{'' if files == 1 else 's'}: {summary}")
    return "\n".join(lines) + "\n"


def to_json(findings: Sequence[Finding]) -> str:
    """A JSON list of findings with every field (docs/lint.md describes them)."""
    return json.dumps([f.model_dump(mode="json") for f in findings], indent=2) + "\n"


def artifact_uri(file: str) -> str:
    r"""The file name as a SARIF ``artifactLocation.uri``, a valid URI reference (RFC 3986).

    A relative name is a relative reference, each byte outside the unreserved
    set percent-encoded as UTF-8 (a space is ``%20``, ``#`` ``%23``, ``%``
    ``%25``, ``é`` ``%C3%A9``), so that decoding gives the name back; an
    absolute one (POSIX, or a Windows drive) is a ``file://`` URI.

    Examples
    --------
    >>> artifact_uri("dash boards/p99#1.json")
    'dash%20boards/p99%231.json'
    >>> artifact_uri("C:\\dash\\a b.json")
    'file:///C:/dash/a%20b.json'
    """
    if PureWindowsPath(file).drive and PureWindowsPath(file).is_absolute():
        return PureWindowsPath(file).as_uri()
    posix = file.replace("\\", "/")
    if posix.startswith("/"):
        return "file://" + quote(posix, safe="/")
    return quote(posix, safe="/")


def to_sarif(findings: Sequence[Finding]) -> str:
    """A SARIF 2.1.0 log of one run."""
    index = {c.id: i for i, c in enumerate(CODES)}
    rules = [
        {
            "id": c.id,
            "name": "".join(word.capitalize() for word in c.name.split("-")),
            "shortDescription": {"text": c.title},
            "fullDescription": {"text": c.explanation},
            "help": {"text": c.fix, "markdown": f"{c.explanation}\n\n**Fix:** {c.fix}"},
            "defaultConfiguration": {"level": _SARIF_LEVEL[c.severity]},
            "properties": {"tags": ["promql", "observability"]},
        }
        for c in CODES
    ]
    results: list[dict[str, Any]] = []
    for f in findings:
        location: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {"uri": artifact_uri(f.file)},
                **({"region": {"startLine": f.line}} if f.line else {}),
            },
            "logicalLocations": [{"name": f.where, "kind": "member"}],
        }
        text = f"{f.message}. {f.explanation}" + (f" Fix: {f.fix}" if f.fix else "")
        results.append(
            {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": _SARIF_LEVEL[f.severity],
                "message": {"text": text},
                "locations": [location],
                "partialFingerprints": {"expression/v1": f"{f.code}:{f.where}:{f.expression}"},
                "properties": {"expression": f.expression, "fix": f.fix, "ref": f.ref},
            }
        )
    log = {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "inference-obs lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
