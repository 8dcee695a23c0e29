"""Fixtures that start real Prometheus and VictoriaMetrics servers on 127.0.0.1.

A missing binary fails the test rather than skipping it: in CI an untested
server path must not pass silently. ``scripts/check`` installs the binaries.

A test module gets its own Prometheus on its own data with a module fixture::

    @pytest.fixture(scope="module")
    def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
        server = prometheus_factory(OPENMETRICS_TEXT)
        yield server
        server.stop()

VictoriaMetrics is shared by the session; tests keep apart by metric names or
labels of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
