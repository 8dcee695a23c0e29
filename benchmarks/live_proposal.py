"""The change that would bring a live report under 1 % of a raw fetch, measured, not implemented.

:func:`propose` takes the requests a report made (as the counting proxy saw
them) and asks the same server what the proposed requests would return:

1. identical requests (same endpoint and fields) are served once per report:
   several analyses read the same raw series (GPU utilisation, the waiting
   queue), every finish-reason share reads ``request_success_total`` anew and
   the comparison checks run the analyses again. Implemented since:
   :func:`~inference_obs.report.build_report` asks through a
   :class:`~inference_obs.source.remembering.RememberingSource`, so this step
   now finds nothing left to save;
2. raw samples of counters (``_sum``, ``_count``, buckets, ``_total``), which
   :mod:`~inference_obs.analyses.counter_ratios` reads to take each series'
   change from its first to its last sample, become two instant queries per
   selector: ``max_over_time(X) - min_over_time(X)`` (the exact change of a
   series without a reset) and ``resets(X) > 0``, plus the raw samples of the
   series that did reset (a restart), as now. Same definition; for float
   counters the sum of steps and ``max - min`` may differ in the last bits;
3. raw samples of DCGM gauges, which queueing, bottleneck and the boundary
   analyses reduce to per-replica means at each app scrape, become one range
   query per family of ``avg by (namespace, pod)`` at the scrape interval.
   Not the same alignment (Prometheus's 5-minute look-back instead of the
   nearest sample within the tolerance), so numbers would move slightly.

4. per-replica questions (the boundary analysis asks seven instant queries
   and a counter ratio for each replica, so requests grow with the fleet)
   become one question per statistic grouped ``by`` the replica labels:
   counted here from the requests that name a single pod, whose bytes are
   kept as they are (an estimate: a grouped answer carries the same series).

The app gauges (waiting, running), one series per engine, stay raw: the
queue classification needs every scrape.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.proxy import CountingProxy, Exchange, totals
from inference_obs.errors import QueryError
from inference_obs.metrics import MetricType, family
from inference_obs.samples import Window

__all__ = ["Proposal", "Step", "kind_of", "propose"]

# A raw fetch: an instant query of a bare range selector, as PrometheusSource.raw sends it.
_RAW = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{.*\})?\[[0-9a-z]+\]", re.S)
_COUNTER_SUFFIXES = ("_total", "_sum", "_count", "_bucket")
# A matcher naming one pod (form-encoded as the proxy keeps request bodies).
_ONE_POD = re.compile(r"pod%3D%22[^%]*%22")


@dataclass(frozen=True, slots=True)
class Step:
    """One change: the requests (and their bytes) it drops and the ones it adds."""

    what: str
    dropped: int
    saved: int
    added: int
    cost: int


@dataclass(frozen=True, slots=True)
class Proposal:
    """Each step, and the proposed report's totals."""

    steps: list[Step]
    requests: int
    received: int


def _counter(name: str) -> bool:
    try:
        kind = family(name).type
    except QueryError:
        return name.endswith(_COUNTER_SUFFIXES)
    return kind in (MetricType.COUNTER, MetricType.HISTOGRAM)


def kind_of(exchange: Exchange) -> str:
    """What kind of request an exchange was."""
    if exchange.path == "/api/v1/query_range":
        return "range queries"
    if exchange.path == "/api/v1/query":
        raw = _RAW.fullmatch(exchange.query)
        if raw is None:
            return "instant queries"
        return "raw samples, counters" if _counter(raw["name"]) else "raw samples, gauges"
    return "discovery (series, labels, metadata, buildinfo)"


def _post(url: str, path: str, fields: dict[str, str]) -> Any:
    body = urllib.parse.urlencode(fields).encode()
    with urllib.request.urlopen(urllib.request.Request(url + path, body), timeout=600) as resp:
        return json.loads(resp.read())["data"]


def _selector(labels: dict[str, str], window: str) -> str:
    name = labels.pop("__name__")
    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}[{window}]"


def _unique(report: Sequence[Exchange]) -> list[Exchange]:
    seen: set[tuple[str, str]] = set()
    unique: list[Exchange] = []
    for one in report:
        if (one.path, one.request) not in seen:
            seen.add((one.path, one.request))
            unique.append(one)
    return unique


def _counters(proxy: CountingProxy, raws: Sequence[Exchange], at: str) -> list[str]:
    """Step 2's per-series changes and resets; returns the raw fetches of series that reset."""
    restarted = []
    for one in raws:
        x = one.query
        change = f"max_over_time({x}) - min_over_time({x})"
        _post(proxy.url, "/api/v1/query", {"query": change, "time": at})
        resets = _post(proxy.url, "/api/v1/query", {"query": f"resets({x}) > 0", "time": at})
        for reset in resets["result"]:
            labels = {**reset["metric"], "__name__": _name(x)}
            restarted.append(_selector(labels, x[x.rindex("[") + 1 : -1]))
    return restarted


def _per_replica(proxy: CountingProxy, exprs: Sequence[str], window: Window, step: float) -> None:
    """One range query per expression, reduced per replica by the server."""
    for expr in exprs:
        fields = {
            "query": f"avg by (namespace, pod) ({expr})",
            "start": f"{window.start_s:.3f}",
            "end": f"{window.end_s:.3f}",
            "step": f"{step:.3f}",
        }
        _post(proxy.url, "/api/v1/query_range", fields)


def _bare(query: str) -> str:
    """The selector of a raw fetch, without its range."""
    return query[: query.rindex("[")] if query.endswith("]") else query


def propose(
    proxy: CountingProxy,
    report: Sequence[Exchange],
    window: Window,
    interval_s: float,
    coarse_s: float = 60.0,
) -> Proposal:
    """Measure the proposal against the server behind ``proxy`` (see the module docstring)."""
    proxy.take()
    proxy.tag = "proposal"
    unique = _unique(report)
    repeats = totals(report)[1] - totals(unique)[1]
    what = "1. identical requests served once (now done by RememberingSource)"
    steps = [Step(what, len(report) - len(unique), repeats, 0, 0)]
    counters = [one for one in unique if kind_of(one) == "raw samples, counters"]
    at = f"{window.end_s:.3f}"
    restarted = _counters(proxy, counters, at)
    what = "2. counter changes computed by the server (series without a reset)"
    steps.append(Step(what, len(counters), totals(counters)[1], *totals(proxy.take())))
    for selector in restarted:
        _post(proxy.url, "/api/v1/query", {"query": selector, "time": at})
    what = "   and the raw samples of each series that reset (a restart), as now"
    steps.append(Step(what, 0, 0, *totals(proxy.take())))
    gauges = [one for one in unique if kind_of(one) == "raw samples, gauges"]
    gpu = [one for one in gauges if _name(one.query).startswith("DCGM_")]
    _per_replica(proxy, [_bare(one.query) for one in gpu], window, interval_s)
    gpu_added, gpu_cost = totals(proxy.take())
    what = "3. GPU gauges averaged per replica by the server"
    steps.append(Step(what, len(gpu), totals(gpu)[1], gpu_added, gpu_cost))
    single = [one for one in unique if _ONE_POD.search(one.request)]
    templates = {(one.path, _ONE_POD.sub("pod=*", one.request)) for one in single}
    what = "4. per-replica questions grouped by replica (bytes as they are: estimated)"
    steps.append(Step(what, len(single), 0, len(templates), 0))
    app = [one for one in gauges if not _name(one.query).startswith("DCGM_")]
    _per_replica(proxy, [_bare(one.query) for one in app + gpu], window, coarse_s)
    what = f"5. queue and GPU series per replica every {coarse_s:g} s, not every scrape"
    dropped = len(app) + gpu_added
    steps.append(Step(what, dropped, totals(app)[1] + gpu_cost, *totals(proxy.take())))
    figures = [
        one
        for one in unique
        if kind_of(one) == "range queries" and _RAW.fullmatch(one.query + "[1s]") is not None
    ]
    for one in figures:
        fields = urllib.parse.parse_qs(one.request)
        step = float(fields["step"][0])
        _per_replica(proxy, [one.query], window, step)
    what = "6. per-GPU figures drawn per replica"
    steps.append(Step(what, len(figures), totals(figures)[1], *totals(proxy.take())))
    proxy.tag = ""
    count, received = totals(report)
    count += sum(step.added - step.dropped for step in steps)
    received += sum(step.cost - step.saved for step in steps)
    return Proposal(steps, count, received)


def _name(raw_query: str) -> str:
    match = _RAW.fullmatch(raw_query)
    assert match is not None
    return match["name"]
