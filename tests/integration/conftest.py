"""Fixtures that start real Prometheus and VictoriaMetrics servers on 127.0.0.1.

A missing binary fails the test rather than skipping it: in CI an untested
server path must not pass silently. ``scripts/check`` installs the binaries.

Three ways to a Prometheus:

- ``shipped_prometheus(path)``: a shipped dataset (``datasets/NAME``), backfilled
  once for the whole session and shared; only read from it.
- ``empty_prometheus``: a module's own, empty (its remote-write receiver on),
  for a module that writes series of its own.
- a module's own data, with a module fixture::

    @pytest.fixture(scope="module")
    def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
        server = prometheus_factory(OPENMETRICS_TEXT)
        yield server
        server.stop()

VictoriaMetrics is shared by the session; tests keep apart by metric names or
labels of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inference_obs.source.dataset.reader import SAMPLES
from tests.integration.servers import (
    PrometheusFactory,
    PrometheusServer,
    VictoriaMetricsServer,
    require_binary,
)


@pytest.fixture(scope="session")
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusFactory]:
    """Start Prometheus servers on demand; any still running are stopped at session end.

    Call it with OpenMetrics text (ending ``# EOF``) to backfill with promtool
    first, or with nothing for an empty TSDB (remote write only). Each server
    has its own directory under pytest's temporary path.
    """
    prometheus = require_binary("prometheus")
    promtool = require_binary("promtool")
    started: list[PrometheusServer] = []

    def start(openmetrics: str | None = None) -> PrometheusServer:
        server = PrometheusServer(
            tmp_path_factory.mktemp("prometheus"),
            openmetrics,
            prometheus=prometheus,
            promtool=promtool,
        )
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def victoria_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetricsServer]:
    """One running VictoriaMetrics for the session (import, then query)."""
    binary = require_binary("victoria-metrics")
    with VictoriaMetricsServer(tmp_path_factory.mktemp("victoria-metrics"), binary=binary) as vm:
        yield vm


@pytest.fixture(scope="session")
def shipped_prometheus(
    prometheus_factory: PrometheusFactory,
) -> Callable[[Path], PrometheusServer]:
    """A Prometheus holding the shipped dataset at ``path``, started once per dataset.

    Shared by every test of the session, so only read from it: a test that
    writes, or stops its server, starts its own with ``prometheus_factory``.
    """
    servers: dict[Path, PrometheusServer] = {}

    def serve(path: Path) -> PrometheusServer:
        key = path.resolve()
        if key not in servers:
            # Bytes, decoded as is: read_text() would turn a carriage return into a newline.
            servers[key] = prometheus_factory((key / SAMPLES).read_bytes().decode("utf-8"))
        return servers[key]

    return serve


@pytest.fixture(scope="module")
def empty_prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    """An empty Prometheus of the module's own (remote-write receiver on, scraping nothing)."""
    server = prometheus_factory()
    yield server
    server.stop()
