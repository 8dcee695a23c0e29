"""Slow links and stalling servers: every request ends by its deadline, whatever the server does.

Fakes (:mod:`tests.source.fault_servers`) because a real Prometheus cannot be
made to drip its headers or body, accept a connection and say nothing, or
stall a TLS handshake. A drip comes faster than the attempt's timeout, so a
client that bounded each read instead of each attempt would never stop.
"""

from __future__ import annotations

import math
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_BUDGET
from inference_obs.cli.budget import MARGIN_S
from inference_obs.errors import SourceUnavailable, TimeBudgetExceeded
from inference_obs.query import Selector
from inference_obs.source.prometheus import PrometheusSource
from inference_obs.source.tls import TLS
from tests.source.fault_servers import (
    REPORT_WINDOW,
    RawServer,
    raw_server,
    run_cli,
    small_deployments,
    startup_s,
)

UP = Selector("up")
# Faster than every timeout below: each read gets bytes in time, the attempt never ends.
DRIP_S = 0.25
# Scheduling slack on a loaded machine, on top of a deadline.
SLACK_S = 0.5


def drip_headers(server: RawServer, conn: socket.socket) -> None:
    """A status line, then one header every DRIP_S, never the blank line that ends them."""
    if server.read_request(conn) is None:
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    n = 0
    while server.pause(DRIP_S):
        conn.sendall(f"X-Drip-{n}: {n}\r\n".encode())
        n += 1


def drip_body(server: RawServer, conn: socket.socket) -> None:
    """Headers at once, then the 1000-byte body one byte every DRIP_S / 5."""
    if server.read_request(conn) is None:
        return
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    while server.pause(DRIP_S / 5):
        conn.sendall(b" ")


def silent(server: RawServer, conn: socket.socket) -> None:
    """Accepts the connection, then neither reads nor writes."""
    while server.pause(0.1):
        pass


@pytest.fixture
def dripping() -> Iterator[RawServer]:
    yield from raw_server(drip_headers, lifetime_s=20)


def test_dripping_headers_time_out_after_one_attempt(dripping: RawServer) -> None:
    started = time.monotonic()
    with pytest.raises(
        SourceUnavailable, match=r"timed out after 1\.\d s \(gave up after 1 attempt"
    ):
        PrometheusSource(dripping.url, timeout=1, retries=0).instant(UP, 0)
    elapsed = time.monotonic() - started
    assert 0.95 <= elapsed <= 1.0 + SLACK_S
    assert len(dripping.requests) == 1


def test_dripping_headers_with_retries_stay_within_request_timeout(dripping: RawServer) -> None:
    """Attempts of 1 s, then backoff: the whole request ends at request_timeout."""
    src = PrometheusSource(dripping.url, timeout=1, request_timeout=2.5, retries=5, backoff=0.05)
    started = time.monotonic()
    with pytest.raises(SourceUnavailable, match=r"timed out.*request_timeout=2\.5 s") as info:
        src.instant(UP, 0)
    elapsed = time.monotonic() - started
    assert 2.4 <= elapsed <= 2.5 + SLACK_S
    assert not isinstance(info.value, TimeBudgetExceeded)  # no caller's budget was given
    assert len(dripping.requests) >= 2  # whole attempts of 1 s, then one cut at 2.5 s


@pytest.mark.parametrize("retries", [0, 3])
def test_a_deadline_raises_time_budget_exceeded_at_that_time(
    dripping: RawServer, retries: int
) -> None:
    """The caller's deadline (a time budget) stops an attempt that its own timeout would not."""
    started = time.monotonic()
    src = PrometheusSource(dripping.url, timeout=30, retries=retries, deadline=started + 1.2)
    with pytest.raises(TimeBudgetExceeded, match="time budget ran out") as info:
        src.instant(UP, 0)
    elapsed = time.monotonic() - started
    assert 1.15 <= elapsed <= 1.2 + SLACK_S
    assert isinstance(info.value, TimeoutError)  # catchable as the builtin too
    assert info.value.promql == "up"
    assert len(dripping.requests) == 1


def test_a_dripping_body_times_out() -> None:
    with RawServer(drip_body) as server:
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match="timed out"):
            PrometheusSource(server.url, timeout=1, retries=0).instant(UP, 0)
        assert 0.95 <= time.monotonic() - started <= 1.0 + SLACK_S


def test_a_silent_server_times_out_on_each_attempt() -> None:
    """Connection accepted, nothing read or written: each attempt ends, then the retry."""
    with RawServer(silent) as server:
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match=r"timed out.*gave up after 2 attempts"):
            PrometheusSource(server.url, timeout=0.5, retries=1, backoff=0.01).instant(UP, 0)
        assert 0.95 <= time.monotonic() - started <= 1.0 + SLACK_S
        assert server.connections == 2  # the retry opened a fresh connection


def test_a_silent_tls_handshake_times_out() -> None:
    """An https server that accepts and never answers the ClientHello."""
    with RawServer(silent) as server:
        src = PrometheusSource(
            f"https://127.0.0.1:{server.port}", tls=TLS(verify=False), timeout=0.5, retries=0
        )
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match="timed out"):
            src.instant(UP, 0)
        assert 0.45 <= time.monotonic() - started <= 0.5 + SLACK_S


def test_cli_time_budget_ends_a_dripping_request_with_exit_6(
    dripping: RawServer, tmp_path: Path
) -> None:
    # The budget counts from the process's start: 2 s more than starting takes here, so
    # that it ends while the first request drips.
    budget = math.ceil(startup_s(tmp_path)) + 2
    run = run_cli(
        [
            "report",
            "--prometheus",
            dripping.url,
            "--deployments",
            str(small_deployments(tmp_path)),
            *REPORT_WINDOW,
            "--out",
            str(tmp_path / "out"),
            "--time-budget",
            str(budget),
        ],
        tmp_path,
    )
    assert run.code == EXIT_BUDGET, run.stderr
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("inference-obs: ")
    # The request's own deadline, or the run's alarm, whichever says so first.
    assert re.search(r"the time budget (of \d+ s )?ran out", line), line
    assert "Traceback" not in run.stderr
    assert dripping.requests  # the budget ended during a request
    assert run.elapsed_s <= budget + MARGIN_S
