"""Kept-alive connections and bounded parallelism against real Prometheus and VictoriaMetrics.

A counting TCP relay sits between the client and the server: it forwards
bytes unchanged and counts the connections the client opens, and how many
are open at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from inference_obs.query import Selector
from inference_obs.samples import Labels, Vector, Window
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusFactory, PrometheusServer

pytestmark = pytest.mark.integration

T0 = 1_700_000_000
UP = Selector("pool_up")
WINDOW = Window.parse("2023-11-14T22:13:20+00:00", 600.0)


class Relay:
    """Forwards 127.0.0.1 connections to ``upstream``, counting them (bounded: stops on close)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.accepted = 0
        self.open_now = 0
        self.most_open = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            with self._lock:
                self.accepted += 1
                self.open_now += 1
                self.most_open = max(self.most_open, self.open_now)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client, socket.create_connection(self._upstream, timeout=30) as server:
            client.settimeout(30)
            pump = threading.Thread(target=_pump, args=(server, client), daemon=True)
            pump.start()
            _pump(client, server)
            pump.join(timeout=30)
        with self._lock:
            self.open_now -= 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(1 << 16):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    lines = [f'pool_up{{job="a"}} {i} {T0 + 15 * i}' for i in range(40)]
    server = prometheus_factory("\n".join([*lines, "# EOF", ""]))
    yield server
    server.stop()


@pytest.fixture
def relay(request: pytest.FixtureRequest) -> Iterator[Relay]:
    server = request.getfixturevalue(request.param)
    relay = Relay(server.base_url)
    yield relay
    relay.close()


@pytest.mark.parametrize("relay", ["prometheus", "victoria_metrics"], indirect=True)
def test_sequential_requests_share_one_connection(relay: Relay) -> None:
    """Twenty queries in a row open one connection: each later one skips a round trip."""
    with PrometheusSource(relay.url) as src:
        src.info()
        for _ in range(20):
            src.label_names(WINDOW)
    assert relay.accepted == 1


@pytest.mark.parametrize("relay", ["prometheus"], indirect=True)
def test_parallel_requests_stay_within_the_bound(relay: Relay) -> None:
    """Sixteen concurrent queries with parallel=3: at most three connections, right answers."""
    with PrometheusSource(relay.url, parallel=3) as src:
        times = [T0 + 15 * i for i in range(16)]
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda t: src.instant(UP, t), times))
    values = [a.value.as_dict() for a in answers if isinstance(a.value, Vector)]
    assert values == [{Labels({"__name__": "pool_up", "job": "a"}): float(i)} for i in range(16)]
    assert 1 <= relay.most_open <= 3
    assert relay.accepted <= 3


def test_from_connect_reads_what_prometheus_api_client_reads(
    prometheus: PrometheusServer,
) -> None:
    """A PrometheusConnect (the installed package) and the source made from it agree."""
    from prometheus_api_client import PrometheusConnect

    prom = PrometheusConnect(prometheus.base_url, headers={"X-Scope-OrgID": "t"})
    try:
        theirs = prom.custom_query("pool_up", params={"time": T0 + 150})
        with PrometheusSource.from_connect(prom) as src:
            ours = src.instant(UP, T0 + 150).value
    finally:
        prom.close()
    assert isinstance(ours, Vector)
    assert ours.as_dict() == {Labels(one["metric"]): float(one["value"][1]) for one in theirs}
    assert ours.as_dict() == {Labels({"__name__": "pool_up", "job": "a"}): 10.0}
