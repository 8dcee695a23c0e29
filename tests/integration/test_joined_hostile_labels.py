"""Joined queries over label values with quotes, backslashes and newlines, on both real servers.

A joined query (:mod:`inference_obs.reading.joined`) asks several instant
questions in one request, each part's series tagged with its position in a
part label. VictoriaMetrics 1.79 writes a ``pod`` value holding a newline
into that label when ``histogram_quantile`` is joined with ``or``; a live
report then crashed reading the part's position from it. Here each server
holds histogram buckets of pods with hostile names (written by remote write
into Prometheus and by JSON import into VictoriaMetrics, both exact for any
label value), and every part of a joined question must be what the server
answers the part alone, the quantiles also as derived by hand; and a live
report of the bundled dataset, one pod renamed, runs to the end on
VictoriaMetrics. Questions longer together than VictoriaMetrics takes in one
query (16 KiB) are asked in batches, each part still its own answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_OK, main
from inference_obs.errors import MalformedAnswer, SourceError
from inference_obs.query import (
    Binary,
    Expr,
    Matcher,
    Number,
    Selector,
    histogram_quantile,
    to_promql,
)
from inference_obs.reading.joined import batches, instants, joined, joined_expr, split, vectors
from inference_obs.samples import Labels, Vector
from inference_obs.source.openmetrics.reader import read_openmetrics
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import (
    PrometheusServer,
    SeriesSamples,
    VictoriaMetricsServer,
    require_binary,
    write_series,
)

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
METRIC = "joined_hostile_seconds_bucket"
# Quotes, backslashes (one before an "n", one last), newlines (one first, one last).
PODS = ['h20-model-01\nx"q\\', 'say "hi"', "C:\\path\\", "a\\nb", "\nlead", "trail\n", "plain"]


def buckets(at_ms: int) -> list[SeriesSamples]:
    """Pod i: 2 observations up to 1 s, 2 (i + 1) more up to 2 s, none above; one sample."""
    series: list[SeriesSamples] = []
    for i, pod in enumerate(PODS):
        for le, count in (("1", 2), ("2", 2 + 2 * (i + 1)), ("+Inf", 2 + 2 * (i + 1))):
            series.append(({"__name__": METRIC, "pod": pod, "le": le}, [(at_ms, float(count))]))
    return series


def questions() -> list[Expr]:
    by_pod = Selector(METRIC).max(by=("pod", "le"))
    return [by_pod, histogram_quantile(0.5, by_pod), histogram_quantile(0.95, by_pod)]


def median(i: int) -> float:
    """Pod i's median: rank (2i + 4) / 2 = i + 2 of 2i + 4 observations.

    Pod 0's rank 2 is the first bucket's last: 1 s. Past it, the rank lies in
    (1, 2], i ranks into that bucket's 2 (i + 1): 1 + i / (2 (i + 1)) s.
    """
    return 1.0 + i / (2 * (i + 1))


@pytest.mark.parametrize("server", ["empty_prometheus", "victoria_metrics"])
def test_each_joined_part_is_the_part_asked_alone(
    request: pytest.FixtureRequest, server: str
) -> None:
    store: PrometheusServer | VictoriaMetricsServer = request.getfixturevalue(server)
    at_ms = (int(time.time()) - 300) * 1000  # recent: VictoriaMetrics's retention counts from now
    write_series(store, buckets(at_ms))
    source = PrometheusSource(store.base_url)
    at = at_ms / 1000
    alone = [source.instant(e, at).value for e in questions()]
    for got in (
        [one.value for one in instants(source, questions(), at)],
        vectors(source, questions(), at),
    ):
        for mine, theirs in zip(got, alone, strict=True):
            assert isinstance(mine, Vector)
            assert isinstance(theirs, Vector)
            assert mine.as_dict() == theirs.as_dict()
    medians = got[1]
    assert isinstance(medians, Vector)
    assert medians.as_dict() == pytest.approx(
        {Labels({"pod": p}): median(i) for i, p in enumerate(PODS)}
    )
    if server == "victoria_metrics":
        # The defect these parts survive: VictoriaMetrics 1.79's joined answer moves the
        # newline pod's value into the part label (this fails once a version stops it).
        with pytest.raises(MalformedAnswer, match="labels are not the 3 parts asked"):
            split(joined(source, questions(), at), len(questions()))


@pytest.fixture(scope="module")
def renamed_vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetricsServer]:
    """Its own VictoriaMetrics (the session's is shared) with the bundled dataset, one pod
    renamed to a value with a newline, a quote and a backslash."""
    binary = require_binary("victoria-metrics")
    text = (DATASET / "samples.om").read_text(encoding="utf-8")
    text = text.replace('pod="h20-model-01"', 'pod="h20-model-01\\nx\\"q\\\\"')  # escaped
    samples = read_openmetrics(text.encode(), source="samples.om")
    series: list[SeriesSamples] = []
    for i, (name, labels) in enumerate(zip(samples.names, samples.labels, strict=True)):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        points = zip(samples.t_ms[lo:hi].tolist(), samples.values[lo:hi].tolist(), strict=True)
        series.append(({"__name__": name, **dict(labels)}, list(points)))
    with VictoriaMetricsServer(tmp_path_factory.mktemp("vm-hostile"), binary=binary) as server:
        server.import_series(series)
        yield server


def test_a_live_report_with_a_newline_in_a_pod_name_runs_to_the_end(
    renamed_vm: VictoriaMetricsServer, tmp_path: Path
) -> None:
    window = json.loads((DATASET / "manifest.json").read_text())["window"]
    status = main([
        "report", "--prometheus", renamed_vm.base_url,
        "--deployments", str(DATASET / "manifest.json"),
        "--start", window["start"], "--end", window["end"],
        "--format", "json", "--out", str(tmp_path / "out"), "--quiet",
    ])  # fmt: skip
    assert status == EXIT_OK
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    measured = {m["key"]: m for m in report["measurements"]}
    # The per-replica quantiles (the joined histogram_quantile that crashed) of the renamed pod.
    for key in ("ttft", "e2e", "tpot"):
        for tag in ("p50", "p95"):
            one = measured[f'H20/replicas/{key}_{tag}[h20-model-01\nx"q\\]']
            assert one["status"] == "ok", one


@pytest.mark.parametrize("server", ["empty_prometheus", "victoria_metrics"])
def test_questions_longer_than_a_query_may_be_are_asked_in_batches(
    request: pytest.FixtureRequest, server: str
) -> None:
    store: PrometheusServer | VictoriaMetricsServer = request.getfixturevalue(server)
    at_ms = (int(time.time()) - 300) * 1000
    write_series(store, buckets(at_ms))
    source = PrometheusSource(store.base_url)
    at = at_ms / 1000
    # 200 questions of about 130 bytes each: 26 KB of PromQL joined, over 16 KiB.
    by_pod = Selector(METRIC, (Matcher.equal("le", "+Inf"),)).max(by=("pod",))
    many: list[Expr] = [Binary("*", by_pod, Number(k)) for k in range(200)]
    assert len(to_promql(joined_expr(many))) > 16 * 1024
    if server == "victoria_metrics":  # the store's own limit, which one joined query passes
        with pytest.raises(SourceError, match="too long query"):
            joined(source, many, at)
    got = vectors(source, many, at)
    assert len(batches(many)) == 2
    totals = {Labels({"pod": p}): 2.0 + 2 * (i + 1) for i, p in enumerate(PODS)}
    for k, vector in enumerate(got):
        assert vector.as_dict() == {labels: k * v for labels, v in totals.items()}, k
    assert [one.value.as_dict() for one in instants(source, many, at)] == [  # type: ignore[union-attr]
        v.as_dict() for v in got
    ]
