"""PrometheusSource only reads: a recording proxy in front of real Prometheus sees every request.

Every standard query runs (instant and range) plus raw, series, labels,
label values, metadata and info; each request that reaches the proxy must be
an allowlisted path with its one method (GET for discovery, POST for queries).
"""

from __future__ import annotations

import contextlib
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inference_obs.errors import QueryFailed
from inference_obs.metrics import STANDARD_QUERIES
from inference_obs.query import Selector
from inference_obs.samples import Window
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusFactory, PrometheusServer

pytestmark = pytest.mark.integration

T0 = 1_700_000_000
ALLOWED = {
    ("POST", "/api/v1/query"),
    ("POST", "/api/v1/query_range"),
    ("POST", "/api/v1/series"),
    ("GET", "/api/v1/labels"),
    ("GET", "/api/v1/metadata"),
    ("GET", "/api/v1/status/buildinfo"),
}


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    text = "\n".join(f'up{{job="a"}} 1 {T0 + 15 * i}' for i in range(100))
    server = prometheus_factory(text + "\n# EOF\n")
    yield server
    server.stop()


@pytest.fixture
def proxy(prometheus: PrometheusServer) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    seen: list[tuple[str, str]] = []
    upstream = prometheus.base_url

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            seen.append((self.command, self.path))
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {"Content-Type": self.headers.get("Content-Type", "text/plain")}
            request = urllib.request.Request(
                upstream + self.path, body, headers, method=self.command
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as resp:
                    status, data = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                with exc:
                    status, data = exc.code, exc.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _forward  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_only_allowlisted_requests_reach_the_server(
    proxy: tuple[str, list[tuple[str, str]]],
) -> None:
    url, seen = proxy
    src = PrometheusSource(url, retries=0)
    window = Window.parse("2023-11-14T22:13:20+00:00", 1200.0)
    src.info()
    for query in STANDARD_QUERIES:
        expr = query.expr(window=300.0)
        # A rejected query is still a read; only the requests matter here.
        with contextlib.suppress(QueryFailed):
            src.instant(expr, window.end_s)
        with contextlib.suppress(QueryFailed):
            src.range(expr, window, 60)
    src.raw(Selector("up"), window)
    src.series(Selector("up"), window)
    src.label_names(window)
    src.label_values("job", window)
    src.metadata()
    methods_paths = {(method, path.split("?", 1)[0]) for method, path in seen}
    label_values = {(m, p) for m, p in methods_paths if p.startswith("/api/v1/label/")}
    assert label_values == {("GET", "/api/v1/label/job/values")}
    assert methods_paths - label_values <= ALLOWED
    assert len(seen) >= 2 * len(STANDARD_QUERIES) + 6
