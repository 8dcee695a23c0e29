"""Running the checks: files in, findings out.

:func:`lint_paths` reads every file first (so one unreadable file stops the
run before any output, with :class:`~inference_obs.errors.LintInputError`),
collects the names its rule files record, then checks each query: Grafana
variables replaced by placeholders, the text parsed into the expression
tree, each check run on it. An expression that does not parse is a finding
(OBS001), never skipped; one the tree refuses only because an aggregation
drops ``le`` under ``histogram_quantile`` is OBS102, and is then checked as
if ``le`` had been kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from inference_obs.errors import LintInputError, NotLintable, ParseError
from inference_obs.lint.check_aggregation import check_aggregation
from inference_obs.lint.check_counters import check_counters
from inference_obs.lint.check_meaning import check_meaning
from inference_obs.lint.check_names import check_names
from inference_obs.lint.check_presentation import (
    check_unit,
    unused_variables,
    variables_not_applied,
)
from inference_obs.lint.check_quantiles import check_quantiles, is_quantile, le_kept, quantile_name
from inference_obs.lint.codes import code
from inference_obs.lint.context import Context, Options, Problem
from inference_obs.lint.findings import Finding, sort_key
from inference_obs.lint.grafana import read_dashboard
from inference_obs.lint.inputs import Document, Query
from inference_obs.lint.limits import check_counts, check_size, expression_too_long
from inference_obs.lint.placeholders import Substitution, substitute
from inference_obs.lint.rulefiles import read_promql, read_rules
from inference_obs.query import HistogramQuantile, parse, to_promql

__all__ = ["Result", "lint_documents", "lint_paths", "lint_text", "read_file"]

Check = Callable[[Context], Iterable[Problem]]
CHECKS: tuple[Check, ...] = (
    check_quantiles,
    check_counters,
    check_aggregation,
    check_meaning,
    check_names,
    check_unit,
)

#: Window of a corrected expression that needs one and has none: Grafana's own
#: rate interval on dashboards, 5 minutes elsewhere.
RULE_WINDOW_S = 300.0
_READERS = {".json": read_dashboard, ".yml": read_rules, ".yaml": read_rules}
_READERS[".promql"] = read_promql
# Repeated refusals of one expression are fixed at most this many times.
_MAX_LE_FIXES = 8


class Result(list[Finding]):
    """Findings of a run, sorted by file and position, and what was read."""

    files: int = 0
    skipped: tuple[str, ...] = ()


def read_file(path: Path, shown: str) -> Document:
    """Read one dashboard, rule or ``.promql`` file; ``shown`` is its name in findings."""
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise LintInputError(
            f"{shown}:1:1: not a dashboard (.json), rule file (.yml, .yaml) or .promql file"
        )
    try:
        check_size(shown, path.stat().st_size)
        raw = path.read_bytes()
    except OSError as exc:
        raise LintInputError(f"{shown}:1:1: cannot be read: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise LintInputError(f"{shown}:{line}:{column}: not UTF-8 text") from exc
    document = reader(shown, text)
    check_counts(document)
    return document


def _files(paths: Sequence[str | Path]) -> Iterator[tuple[Path, str, bool]]:
    """``(path, shown name, given explicitly)`` for each file to read."""
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.is_file() and found.suffix.lower() in _READERS:
                    yield found, found.as_posix(), False
        elif path.exists():
            yield path, path.as_posix() if isinstance(given, Path) else str(given), True
        else:
            raise LintInputError(f"{given}:1:1: no such file or folder")


def lint_paths(paths: Sequence[str | Path], options: Options | None = None) -> Result:
    """Check every dashboard, rule and ``.promql`` file under ``paths``.

    Folders are searched for ``.json``, ``.yml``, ``.yaml`` and ``.promql``
    files; in a folder, JSON that is not a dashboard and YAML that is not a
    rule file are skipped (and listed in ``Result.skipped``).

    Raises
    ------
    LintInputError
        When a file cannot be read, naming the file, line and column, or is
        past one of :mod:`~inference_obs.lint.limits` (naming the limit).
    """
    documents: list[Document] = []
    skipped: list[str] = []
    for path, shown, explicit in _files(paths):
        try:
            documents.append(read_file(path, shown))
        except NotLintable:
            if explicit:
                raise
            skipped.append(shown)
    result = lint_documents(documents, options)
    result.skipped = tuple(skipped)
    return result


def lint_text(text: str, kind: str = "promql", options: Options | None = None) -> Result:
    """Check one file's text: ``kind`` is ``dashboard``, ``rules`` or ``promql``."""
    readers = {"dashboard": read_dashboard, "rules": read_rules, "promql": read_promql}
    shown = f"<{kind}>"
    check_size(shown, len(text.encode("utf-8", "surrogatepass")))
    document = readers[kind](shown, text)
    check_counts(document)
    return lint_documents([document], options)


def lint_documents(documents: Sequence[Document], options: Options | None = None) -> Result:
    """Check already read documents; recorded names are shared across them."""
    options = options or Options()
    recorded = frozenset(name for d in documents for name, _ in d.recorded)
    quantiles = _recorded_quantiles(documents, recorded)
    result = Result()
    for document in documents:
        result += _lint_document(document, options, recorded, quantiles)
    result.sort(key=sort_key)
    result.files = len(documents)
    return result


def _recorded_quantiles(documents: Sequence[Document], recorded: frozenset[str]) -> frozenset[str]:
    names = set()
    for document in documents:
        for name, text in document.recorded:
            try:
                expr = parse(text)
            except ParseError:
                continue
            probe = Context(Query(name, "record", text), expr, Options(), str, RULE_WINDOW_S)
            if is_quantile(expr, probe) or quantile_name(name):
                names.add(name)
    return frozenset(names)


def _lint_document(
    document: Document, options: Options, recorded: frozenset[str], quantiles: frozenset[str]
) -> list[Finding]:
    findings: list[Finding] = []
    contexts: list[Context | None] = []
    for query in document.queries:
        problems, ctx = _check_query(query, options, recorded, quantiles)
        contexts.append(ctx)
        findings += _findings(document.path, query, problems, ctx)
    if document.kind == "dashboard":
        findings += _variable_findings(document, contexts)
    kind = code("OBS002")
    for where, message, line in document.not_read:
        findings.append(
            Finding(
                code=kind.id,
                name=kind.name,
                severity=kind.severity,
                file=document.path,
                where=where,
                line=line,
                message=message,
                explanation=kind.explanation,
            )
        )
    return findings


def _check_query(
    query: Query, options: Options, recorded: frozenset[str], quantiles: frozenset[str]
) -> tuple[list[Problem], Context | None]:
    too_long = expression_too_long(query.text)
    if too_long is not None:
        return [Problem("OBS001", too_long)], None
    sub = substitute(query.text) if query.grafana else Substitution(query.text, frozenset())
    text = sub.text
    problems: list[Problem] = []
    for _ in range(_MAX_LE_FIXES):
        try:
            expr = parse(text)
            break
        except ParseError as error:
            kept = le_kept(error) if error.refused is HistogramQuantile else None
            end = _call_end(text, error.offset) if kept is not None else None
            if kept is None or end is None:
                problems.append(Problem("OBS001", f"not read: {error}"))
                return problems, None
            text = text[: error.offset] + to_promql(kept) + text[end:]
            problems.append(Problem("OBS102", _LE_MESSAGE, fix=kept))
    else:
        problems.append(Problem("OBS001", "not read: too many quantiles drop le"))
        return problems, None
    window = sub.duration("__rate_interval") if query.grafana else RULE_WINDOW_S
    ctx = Context(query, expr, options, sub.restore, window, recorded, quantiles)
    # OBS102's fix is the whole expression, read again with le kept.
    problems = [Problem(i.code, i.message, i.detail, expr) for i in problems]
    for check in CHECKS:
        problems += check(ctx)
    return problems, ctx


_LE_MESSAGE = "histogram_quantile over an aggregation that drops le: the result is empty"


def _call_end(text: str, start: int) -> int | None:
    """The index after the ``)`` closing the call that starts at ``start``."""
    depth = 0
    quote: str | None = None
    i = start
    while i < len(text):
        ch = text[i]
        if quote is not None:
            if ch == "\\" and quote != "`":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _findings(
    path: str, query: Query, problems: list[Problem], ctx: Context | None
) -> list[Finding]:
    out = []
    seen = set()
    for problem in problems:
        if (problem.code, problem.message) in seen:
            continue
        seen.add((problem.code, problem.message))
        kind = code(problem.code)
        fix = ctx.render(problem.fix) if problem.fix is not None and ctx is not None else None
        explanation = kind.explanation + (f" {problem.detail}" if problem.detail else "")
        out.append(
            Finding(
                code=kind.id,
                name=kind.name,
                severity=kind.severity,
                file=path,
                where=query.where,
                ref=query.ref,
                line=query.line,
                expression=query.text.strip(),
                message=problem.message,
                explanation=explanation.strip(),
                fix=fix,
            )
        )
    return out


def _variable_findings(document: Document, contexts: list[Context | None]) -> list[Finding]:
    out = []
    for variable in unused_variables(document):
        kind = code("OBS503")
        out.append(
            Finding(
                code=kind.id,
                name=kind.name,
                severity=kind.severity,
                file=document.path,
                where=f"${variable.name}",
                ref=variable.kind,
                message=f"variable ${variable.name} is offered but no query uses it: "
                "every panel shows all values merged",
                explanation=kind.explanation,
            )
        )
    exporters = [
        frozenset(
            source.exporter
            for k in (ctx.series.values() if ctx is not None else ())
            if (source := k.family or k.retired) is not None
        )
        for ctx in contexts
    ]
    unused = {v.name for v in unused_variables(document)}
    for index, variable in variables_not_applied(document, exporters):
        if variable.name in unused:
            continue
        query = document.queries[index]
        kind = code("OBS504")
        out.append(
            Finding(
                code=kind.id,
                name=kind.name,
                severity=kind.severity,
                file=document.path,
                where=query.where,
                ref=query.ref,
                line=query.line,
                expression=query.text.strip(),
                message=f"this query ignores ${variable.name}, which the other queries of its "
                "exporter apply",
                explanation=kind.explanation,
            )
        )
    return out
