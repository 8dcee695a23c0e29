"""How much ``lint`` reads: every limit on its input, each with its reason.

A dashboard, rule file or ``.promql`` file past one of these is refused with
:class:`~inference_obs.errors.LintInputError`, naming the file and the limit
(or, for one expression, with finding OBS001 naming the limit), so that no
input makes ``lint`` run out of time or memory. The limits are far above what
real files hold: the largest public dashboards we read have about 200 panels,
100 KB of JSON and expressions under 2 KB; kube-prometheus's rule files about
1,000 rules. Expression depth is limited where it is parsed:
:data:`inference_obs.query.parse.MAX_DEPTH`.

docs/lint.md ("Limits") lists them for users.
"""

from __future__ import annotations

import re
from typing import Any, Final, NoReturn

import yaml

from inference_obs.documents import MAX_DEPTH
from inference_obs.errors import LintInputError
from inference_obs.lint.inputs import Document, line_of

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_EXPRESSION_CHARS",
    "MAX_FILE_BYTES",
    "MAX_NESTING",
    "MAX_QUERIES",
    "MAX_VARIABLES",
    "check_counts",
    "check_json_nesting",
    "check_size",
    "check_yaml",
    "expression_too_long",
]

#: Bytes of one file. Every reader holds the whole text and its parsed tree;
#: 16 MiB is over a hundred times the largest dashboard we have seen.
MAX_FILE_BYTES: Final = 16 * 1024 * 1024

#: Levels of nested JSON objects and arrays, or YAML mappings and sequences, in
#: one file: the limit every file the project reads has
#: (:data:`inference_obs.documents.MAX_DEPTH`). Grafana dashboards nest about 12
#: deep (rows, panels, overrides, their properties), rule files 6; the JSON and
#: YAML readers recurse once per level, so a deeper file would exhaust the stack.
MAX_NESTING: Final = MAX_DEPTH

#: YAML nodes that aliases (``*name``) may add to a rule file, counted as the
#: nodes each alias stands for, expanded. Anchors and aliases let a few KB
#: stand for millions of rules (the "billion laughs"); rule files use them for
#: shared labels, a few nodes per rule.
MAX_ALIAS_NODES: Final = 100_000

#: Queries (panel targets, rule expressions) in one file. Each is parsed and
#: checked on its own, so time grows with their number; 50,000 is 250 times
#: the largest dashboard we have seen.
MAX_QUERIES: Final = 50_000

#: Template variables of one dashboard. Each is compared with the queries of
#: every exporter (OBS504), so time grows with variables times queries.
MAX_VARIABLES: Final = 1_000

#: Characters of one expression. Longer expressions are finding OBS001 (not
#: read), as any expression that cannot be parsed: the rest of the file is
#: still checked. Prometheus itself sets no such limit, but a query of this
#: size is generated, not written, and not worth checking by hand.
MAX_EXPRESSION_CHARS: Final = 256 * 1024


def check_size(path: str, size: int) -> None:
    """Refuse a file of more than :data:`MAX_FILE_BYTES` (``size`` in bytes)."""
    if size > MAX_FILE_BYTES:
        raise LintInputError(
            f"{path}:1:1: {size / 2**20:.1f} MiB, more than lint reads "
            f"({MAX_FILE_BYTES // 2**20} MiB per file)"
        )


def check_json_nesting(path: str, text: str) -> None:
    """Refuse JSON nested more than :data:`MAX_NESTING` levels, naming where.

    One pass over the text, strings skipped, before it is parsed (Python's
    JSON parser recurses once per level and would fail with a RecursionError).
    """
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_NESTING:
                line = line_of(text, match.start())
                column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
                raise LintInputError(
                    f"{path}:{line}:{column}: JSON nested more than {MAX_NESTING} levels deep, "
                    "more than lint reads"
                )
        elif token in "]}":
            depth -= 1


def check_yaml(path: str, text: str) -> None:
    """Refuse YAML nested past :data:`MAX_NESTING` or aliased past :data:`MAX_ALIAS_NODES`.

    One pass over the parser's events, before any node is composed: each
    anchor's expanded size and height are recorded when it ends, and each
    alias adds them where it stands. The composer recurses once per level
    and an alias stands for its whole anchor, so neither limit could be
    checked on the composed nodes without first paying for them.

    Raises
    ------
    LintInputError
        Naming the line and column of the collection or alias past a limit.
    yaml.YAMLError
        When the text is not YAML (the caller names where).
    """
    anchors: dict[str, tuple[int, int]] = {}  # name -> (expanded nodes, height)
    # Each open collection: [anchor, nodes so far, height of its tallest child].
    open_: list[list[Any]] = []
    added = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        size, height = 0, 0
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_NESTING:
                _refuse(path, event, f"YAML nested more than {MAX_NESTING} levels deep")
            open_.append([event.anchor, 1, 0])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size, tallest = open_.pop()
            height = tallest + 1
            if anchor is not None:
                anchors[anchor] = (size, height)
        elif isinstance(event, yaml.ScalarEvent):
            size, height = 1, 1
            if event.anchor is not None:
                anchors[event.anchor] = (size, height)
        elif isinstance(event, yaml.AliasEvent):
            size, height = anchors.get(event.anchor or "", (1, 1))
            added += size
            if added > MAX_ALIAS_NODES:
                _refuse(
                    path,
                    event,
                    f"YAML aliases expand to more than {MAX_ALIAS_NODES:,} nodes "
                    "(a rule file's aliases should stand for a few labels, not whole groups)",
                )
            if len(open_) + height > MAX_NESTING:
                _refuse(path, event, f"YAML nested more than {MAX_NESTING} levels deep")
        else:
            continue
        if open_:
            open_[-1][1] += size
            open_[-1][2] = max(open_[-1][2], height)


def _refuse(path: str, event: yaml.Event, problem: str) -> NoReturn:
    mark = event.start_mark
    where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
    raise LintInputError(f"{path}:{where}: {problem}, more than lint reads")


def check_counts(document: Document) -> None:
    """Refuse a file of more than :data:`MAX_QUERIES` queries or :data:`MAX_VARIABLES` variables."""
    if len(document.queries) > MAX_QUERIES:
        raise LintInputError(
            f"{document.path}:1:1: {len(document.queries):,} queries, more than lint reads "
            f"({MAX_QUERIES:,} per file)"
        )
    if len(document.variables) > MAX_VARIABLES:
        raise LintInputError(
            f"{document.path}:1:1: {len(document.variables):,} template variables, more than "
            f"lint reads ({MAX_VARIABLES:,} per dashboard)"
        )


def expression_too_long(text: str) -> str | None:
    """Why an expression is not read for its length (OBS001's message), or None."""
    if len(text) <= MAX_EXPRESSION_CHARS:
        return None
    return (
        f"not read: {len(text):,} characters, more than lint reads "
        f"({MAX_EXPRESSION_CHARS:,} per expression)"
    )


# A JSON string (skipped whole, so brackets inside it do not count) or a bracket.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
