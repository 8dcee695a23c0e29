"""Rule files and ``.promql`` files: every expression with the name it is recorded or alerted as.

Rule files are Prometheus's (``groups`` of ``rules`` with ``record`` or
``alert`` and ``expr``; VictoriaMetrics' vmalert reads the same), also
wrapped as a Kubernetes PrometheusRule or VMRule (``spec.groups``), and
Grafana's alerting provisioning files (``rules`` whose ``data`` hold query
``model``\\ s with an ``expr``). A file may hold several YAML documents.
A ``.promql`` file holds one expression (``#`` comments allowed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

import yaml

from inference_obs.documents import yaml_nodes
from inference_obs.errors import DocumentError, LintInputError, NotLintable
from inference_obs.lint.inputs import Document, Query
from inference_obs.lint.limits import check_yaml
from inference_obs.lint.placeholders import references

__all__ = ["read_promql", "read_rules"]


def read_rules(path: str, text: str) -> Document:
    """The expressions of the rule file ``text`` (read from ``path``).

    Raises
    ------
    LintInputError
        When ``text`` is not YAML (naming line and column), holds no rule groups, or
        is nested or aliased past :mod:`~inference_obs.lint.limits`.
    """
    try:
        check_yaml(path, text)
        documents = yaml_nodes(text, path)
    except DocumentError as exc:
        raise LintInputError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise LintInputError(f"{path}:{where}: not YAML, so not a rule file: {problem}") from exc
    queries: list[Query] = []
    recorded: list[tuple[str, str]] = []
    found_groups = False
    for node in documents:
        if node is None:
            continue
        for group in _groups(node):
            found_groups = True
            for rule in _sequence(_get(group, "rules")):
                for query in _rule_queries(rule):
                    queries.append(query)
                    if query.ref == "record":
                        recorded.append((query.where, query.text))
    if not found_groups:
        raise NotLintable(f"{path}:1:1: YAML but not a rule file (no groups, and no spec.groups)")
    return Document(path=path, kind="rules", queries=tuple(queries), recorded=tuple(recorded))


def read_promql(path: str, text: str) -> Document:
    """The one expression of a ``.promql`` file (none if it holds only comments)."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    if not body.strip():
        return Document(path=path, kind="promql", queries=())
    first = next(
        i
        for i, line in enumerate(text.splitlines())
        if line.strip() and not line.lstrip().startswith("#")
    )
    name = PurePath(path).stem
    return Document(
        path=path,
        kind="promql",
        queries=(
            Query(
                where=name,
                ref="",
                text=text,
                line=first + 1,
                words=name.lower(),
                # A query copied from a dashboard keeps its interval variables
                # (${__interval}, $__rate_interval): they are replaced as in dashboards.
                # ("$1" in label_replace is a capture group, not a variable).
                grafana=any(not name.isdigit() for name in references(body)),
            ),
        ),
    )


def _get(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.Node):
                return v
    return None


def _sequence(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _groups(node: yaml.Node) -> Iterator[yaml.Node]:
    groups = _get(node, "groups")
    if groups is None:
        spec = _get(node, "spec")
        groups = _get(spec, "groups") if spec is not None else None
    if isinstance(groups, yaml.SequenceNode):
        yield from groups.value


def _scalar(node: yaml.Node | None) -> str | None:
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return None


def _expr_line(node: yaml.Node) -> int:
    # A block scalar (expr: |) starts on the line after its indicator.
    line: int = node.start_mark.line + 1
    style: Any = getattr(node, "style", None)
    return line + 1 if style in ("|", ">") else line


def _rule_queries(rule: yaml.Node) -> Iterator[Query]:
    expr = _get(rule, "expr")
    text = _scalar(expr)
    if expr is not None and text is not None:
        record, alert = _scalar(_get(rule, "record")), _scalar(_get(rule, "alert"))
        name = record or alert or "rule"
        yield Query(
            where=name,
            ref="record" if record else "alert" if alert else "",
            text=text,
            line=_expr_line(expr),
            words=name.lower(),
        )
        return
    # Grafana alerting provisioning: the queries are in data[].model.expr.
    title = _scalar(_get(rule, "title")) or "rule"
    for item in _sequence(_get(rule, "data")):
        model = _get(item, "model")
        inner = _get(model, "expr") if model is not None else None
        inner_text = _scalar(inner)
        if inner is not None and inner_text:
            ref = _scalar(_get(item, "refId")) or ""
            yield Query(
                where=title,
                ref=ref,
                text=inner_text,
                line=_expr_line(inner),
                words=title.lower(),
                grafana=True,
            )
