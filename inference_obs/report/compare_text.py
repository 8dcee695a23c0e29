"""The comparison verdicts as terminal text: what ``inference-obs compare`` prints.

Each pair of deployments gets two tables fitted to the terminal's width
(:func:`~inference_obs.report.text.fitted`), in the cells the report's
Comparison verdicts section uses (:mod:`~.sections.verdicts`): times in ms
or s with the bucket that holds the true quantile, ``≤ upper`` for a
quantile in the lowest bucket, and the same_bucket note. Where the report
lists every finding of every comparison, the terminal gets a summary: per
comparison the number of findings that weigh on it and the weightiest few
(those the report's Summary names), and per finding its first piece of
evidence; the report has them whole.
"""

from __future__ import annotations

import textwrap

from inference_obs.analyses.conclusions import weighing
from inference_obs.analyses.validity.findings import Finding, Severity
from inference_obs.analyses.validity.verdicts import PairValidity, ValidityResult
from inference_obs.reading.wording import number
from inference_obs.report.document import Table
from inference_obs.report.sections.verdicts import (
    LEGEND,
    compared_unit,
    compared_value,
    empty_comparisons,
    standing,
)
from inference_obs.report.text import fitted

__all__ = ["NAMED", "summarised", "verdicts_text"]

#: Findings named per comparison before "and N more": the few a reader can hold in mind,
#: as many as the report's Summary names in its verdict clauses.
NAMED = 3


def summarised(codes: list[str], named: int = NAMED) -> str:
    """How many ``codes`` there are, and the first ``named`` of them.

    Examples
    --------
    >>> summarised(["a", "b", "c", "d", "e"]), summarised(["a"]), summarised([])
    ('5: a, b, c and 2 more', '1: a', '—')
    """
    if not codes:
        return "—"
    shown = ", ".join(codes[:named])
    more = f" and {len(codes) - named} more" if len(codes) > named else ""
    return f"{len(codes)}: {shown}{more}"


def _evidence(f: Finding) -> str:
    """A finding's first piece of evidence, and how many more the report shows."""
    if not f.evidence:
        return "—"
    first = f.evidence[0]
    values = ", ".join(
        f"{k} {number(x) if isinstance(x, float) else x}" for k, x in first.values.items()
    )
    more = len(f.evidence) - 1
    return f"{first.statistic}: {values}" + (f"; and {more} more" if more else "")


def _verdicts(pair: PairValidity, empty: set[str]) -> Table:
    """One row per comparison with a number on some side: both values as the report shows
    them, how many findings weigh on it, and its notes (standing notes are said once)."""
    standing_notes = {f.code for f in pair.findings if standing(f)}
    return Table(
        ("comparison", "verdict", pair.a, pair.b, "unit", "findings", "notes"),
        tuple(
            (
                v.comparison,
                v.verdict.value,
                compared_value(v, pair.a),
                compared_value(v, pair.b),
                "ms or s" if v.unit == "seconds" else compared_unit(v),
                str(len(weighing(pair, v.comparison))),
                ", ".join(n for n in v.notes if n not in standing_notes),
            )
            for v in pair.verdicts.values()
            if v.comparison not in empty
        ),
    )


def _weightiest(pair: PairValidity, empty: set[str]) -> Table:
    """The comparisons that the same findings weigh on, in one row: how many findings, and
    the weightiest few (:func:`~inference_obs.analyses.conclusions.weighing`)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for v in pair.verdicts.values():
        codes = tuple(f.code for f in weighing(pair, v.comparison))
        if codes and v.comparison not in empty:
            groups.setdefault(codes, []).append(v.comparison)
    return Table(
        ("comparisons", "findings that weigh on them, weightiest first"),
        tuple((_together(names), summarised(list(codes))) for codes, names in groups.items()),
    )


def _together(names: list[str]) -> str:
    """Comparison keys in few characters: one metric's statistics braced together.

    Examples
    --------
    >>> _together(["ttft_mean", "ttft_p50", "ttft_p95"]), _together(["power", "kv_capacity"])
    ('ttft_{mean,p50,p95}', 'power, kv_capacity')
    """
    heads = {n.rsplit("_", 1)[0] for n in names}
    if len(names) > 1 and len(heads) == 1 and all("_" in n for n in names):
        head = heads.pop()
        return f"{head}_{{{','.join(n[len(head) + 1 :] for n in names)}}}"
    return ", ".join(names)


def _findings(pair: PairValidity, empty: set[str]) -> Table:
    """Findings with evidence or weight, worst first; standing notes and findings about
    ``empty`` comparisons only are left to the sentences after the tables."""
    shown = [
        f for f in pair.findings if not standing(f) and not (f.affects and set(f.affects) <= empty)
    ]
    shown.sort(key=lambda f: -f.severity.rank)
    return Table(
        ("finding", "severity", "weighs on", "evidence"),
        tuple(
            (
                f.code,
                f.severity.value,
                str(sum(s is not Severity.INFO for s in f.affects.values())),
                _evidence(f),
            )
            for f in shown
        ),
    )


def _pair(pair: PairValidity, width: int) -> list[str]:
    empty = empty_comparisons(pair)
    parts = [f"{pair.a} vs {pair.b}", fitted(_verdicts(pair, empty), width, keep=(0,)), ""]
    if empty:
        names = ", ".join(c for c in pair.verdicts if c in empty)
        parts += [textwrap.fill(f"Not compared, no data on either side: {names}.", width), ""]
    parts += [fitted(_weightiest(pair, empty), width), ""]
    parts += [fitted(_findings(pair, empty), width, keep=(0,)), ""]
    if notes := [f.code for f in pair.findings if standing(f)]:
        parts += [textwrap.fill(f"Standing notes: {', '.join(notes)}.", width), ""]
    return parts


def verdicts_text(result: ValidityResult, width: int) -> str:
    """Every pair's verdicts and findings, summarised, as text ``width`` characters wide.

    Parameters
    ----------
    result
        The verdicts of :func:`~inference_obs.analyses.validity.verdicts.validity`.
    width
        Characters per line, e.g. ``shutil.get_terminal_size().columns``; a
        table whose longest words do not fit is cut at
        :data:`~inference_obs.report.text.NARROWEST` characters per column.

    Returns
    -------
    str
        How to read the cells, then per pair its verdicts, the comparisons
        with no data on either side, its findings and its standing notes,
        ending with where each finding is in full.
    """
    lines = [textwrap.fill(LEGEND, width), ""]
    for pair in result.pairs:
        lines += _pair(pair, width)
    closing = (
        "Every finding with all its evidence, what it weighs on and how to compare fairly: "
        "inference-obs report, section Comparison verdicts."
    )
    lines.append(textwrap.fill(closing, width))
    return "\n".join(lines)
