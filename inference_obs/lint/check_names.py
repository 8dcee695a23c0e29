"""Names: removed, hidden or renamed families, router families, names that misstate meaning.

The version in use decides whether an old name still shows data: the
catalogue records when each renamed vLLM name was hidden and removed
(:class:`~inference_obs.metrics.family.Alias`), and when each retired family
was last exported (:mod:`inference_obs.metrics.retired`). Without a version,
the newest the catalogue knows is assumed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from inference_obs.lint.context import Context, Problem, transform
from inference_obs.lint.names import likely_name
from inference_obs.lint.resolve import Series
from inference_obs.metrics import vllm
from inference_obs.metrics.family import MetricType
from inference_obs.metrics.retired import version_key
from inference_obs.query import Aggregate, Expr, Matcher, Selector

__all__ = ["check_names"]

_SINCE = re.compile(r"^(vLLM|SGLang) (\d+(?:\.\d+)+)$")
_SUCCESS_WORDS = ("success", "succeeded", "successful")
_TPOT_WORDS = ("per output token", "tpot", "time per token")
_FAILED_REASONS = ("abort", "error")


def check_names(ctx: Context) -> Iterator[Problem]:
    """OBS401 to OBS409, once per name in the expression."""
    seen: set[tuple[str, str]] = set()
    for selector in ctx.selectors():
        known = ctx.of(selector)
        for problem in _name_problems(ctx, selector, known):
            # One finding per family: x_sum and x_count of one old name are one rename.
            key = (problem.code, known.base or "")
            if key not in seen:
                seen.add(key)
                yield problem


def _version(ctx: Context, exporter: str) -> tuple[int, ...] | None:
    text = {"vllm": ctx.options.vllm_version, "sglang": ctx.options.sglang_version}.get(exporter)
    return version_key(text) if text else None


def _name_problems(ctx: Context, selector: Selector, known: Series) -> Iterator[Problem]:
    name = known.name or ""
    if known.router:
        assert known.family is not None
        yield Problem(
            "OBS406",
            f"{name} is the production-stack router's family (label {known.family.labels[0]}), "
            "not the engine's",
            detail=f"{known.family.help} " + " ".join(known.family.traps),
        )
        return
    if known.alias is not None and known.family is not None:
        yield from _renamed(ctx, selector, known)
        yield from _success(ctx, selector, known)
        yield from _itl(ctx, known)
    elif known.retired is not None:
        gone = known.retired
        version = _version(ctx, gone.exporter)
        if version is None or version >= version_key(gone.absent_from):
            replacement = f" Instead: {gone.replacement}." if gone.replacement else ""
            yield Problem(
                "OBS401",
                f"{name} is not exported from {gone.exporter} {gone.absent_from} on",
                detail=f"It was a {gone.type.value} in {gone.unit}.{replacement}",
            )
    elif known.family is not None:
        yield from _too_new(ctx, known)
        if known.family.type is MetricType.HISTOGRAM and known.part is None:
            yield Problem(
                "OBS405",
                f"{name} is a histogram: select {name}_bucket, _sum or _count",
            )
        yield from _success(ctx, selector, known)
        yield from _itl(ctx, known)
    elif known.engine_prefixed and not known.recorded:
        likely = likely_name(name)
        if likely is not None:
            yield Problem(
                "OBS410",
                f"{name} is exported by no vLLM or SGLang version the catalogue knows: no data; "
                f"the family is likely {likely}",
                fix=transform(
                    ctx.expr,
                    lambda n: (
                        Selector(likely, n.matchers, n.offset, n.at)
                        if isinstance(n, Selector) and n.metric == name
                        else None
                    ),
                ),
            )
            return
        yield Problem(
            "OBS407",
            f"{name} is not a family of the catalogue's vLLM 0.33 or SGLang 0.5.23",
        )


def _renamed(ctx: Context, selector: Selector, known: Series) -> Iterator[Problem]:
    alias, family = known.alias, known.family
    assert alias is not None
    assert family is not None
    if alias.removed_in is None:
        return  # another current spelling (a DCGM 4.6 field name, a compatibility CSV)
    current, old = family.name, alias.name
    fix = transform(ctx.expr, lambda node: _current_name(ctx, node))
    version = _version(ctx, family.exporter)
    removed, hidden = version_key(alias.removed_in), version_key(alias.hidden_in or "0")
    detail = f"{alias.note} ({alias.versions})." if alias.note else f"({alias.versions})."
    if version is None or version >= removed:
        yield Problem(
            "OBS401",
            f"{old} was renamed {current}; "
            f"{family.exporter} {alias.removed_in} removed the old name",
            detail=detail,
            fix=fix,
        )
    elif alias.hidden_in is not None and version >= hidden:
        yield Problem(
            "OBS402",
            f"{old} is hidden from {family.exporter} {alias.hidden_in} on; "
            f"the name is now {current}",
            detail=detail,
            fix=fix,
        )
    else:
        yield Problem(
            "OBS403",
            f"{old} is deprecated: {family.exporter} {alias.removed_in} removes it; "
            f"the name is now {current}",
            detail=detail,
            fix=fix,
        )


def _current_name(ctx: Context, node: Expr) -> Expr | None:
    """A selector of a removed or hidden name under its current name (every one is fixed)."""
    if not isinstance(node, Selector):
        return None
    known = ctx.of(node)
    if known.alias is None or known.alias.removed_in is None or known.family is None:
        return None
    current = known.family.name + (f"_{known.part}" if known.part else "")
    return Selector(current, node.matchers, node.offset, node.at)


def _too_new(ctx: Context, known: Series) -> Iterator[Problem]:
    family = known.family
    assert family is not None
    match = _SINCE.match(family.since or "")
    version = _version(ctx, family.exporter)
    if match is None or version is None:
        return
    if version < version_key(match.group(2)):
        yield Problem(
            "OBS404",
            f"{known.name} first appeared in {family.since}, after the version in use",
            detail=f"{family.help}",
        )


def _success(ctx: Context, selector: Selector, known: Series) -> Iterator[Problem]:
    if known.family is not vllm.REQUEST_SUCCESS:
        return
    if not any(word in ctx.query.words for word in _SUCCESS_WORDS):
        return
    reasons = [m for m in selector.matchers if m.label == "finished_reason"]
    if reasons and not any(all(m.matches(reason) for m in reasons) for reason in _FAILED_REASONS):
        return  # failures filtered out
    if any(
        isinstance(a, Aggregate) and "finished_reason" in (a.by or ())
        for a in ctx.ancestors(selector)
    ):
        return  # split by reason: every reason is named
    fix = transform(
        ctx.expr,
        lambda n: (
            n.where(Matcher.regex("finished_reason", "stop|length")) if n is selector else None
        ),
    )
    yield Problem(
        "OBS408",
        f"{known.name} counts every finished request, aborts and errors included, "
        "but is presented as success",
        fix=fix,
    )


def _itl(ctx: Context, known: Series) -> Iterator[Problem]:
    if known.family is not vllm.INTER_TOKEN_LATENCY:
        return
    if any(word in ctx.query.words for word in _TPOT_WORDS):
        yield Problem(
            "OBS409",
            f"{known.base} is inter-token latency per engine step, presented as time per output "
            "token",
        )
