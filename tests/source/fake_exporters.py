"""Fake /metrics endpoints on 127.0.0.1 that serve real exposition text with advancing counters.

Each exporter answers its n-th GET (n = 0, 1, ...) with the text of a real
fixture whose counters, histogram buckets, sums and counts have grown with n,
and keeps every answer it gave, so a test can compute what a capture must have
stored. ``fail`` names the requests answered with HTTP 500 instead; ``delay_s``
holds every answer back that long (a slow exporter).
"""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections.abc import Callable, Container
from pathlib import Path
from types import TracebackType
from typing import Self

REAL = Path(__file__).parents[1] / "fixtures" / "real"
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")
# Growth per request: counters by 7, and each histogram by 10 observations of 1 ms,
# which land in every bucket (the smallest bound of the fixtures is 1 ms).
_COUNTER_STEP, _OBSERVATIONS, _OBSERVED_S = 7.0, 10.0, 0.001


def advancing(text: str, n: int) -> str:
    """``text`` after ``n`` steps of growth (gauges and comments unchanged)."""
    out = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            out.append(line)
            continue
        name, labels, value = match.groups()
        number = float(value)
        if name.endswith(("_bucket", "_count")):
            number += n * _OBSERVATIONS
        elif name.endswith("_sum"):
            number += n * _OBSERVATIONS * _OBSERVED_S
        elif name.endswith("_total"):
            number += n * _COUNTER_STEP
        out.append(f"{name}{labels or ''} {number!r}")
    return "\n".join(out) + "\n"


class FakeExporter:
    """A threaded HTTP server on 127.0.0.1 answering GET /metrics; stop it with ``with``."""

    def __init__(
        self, body: Callable[[int], str], *, fail: Container[int] = (), delay_s: float = 0.0
    ) -> None:
        self.served: list[str | None] = []
        self.requests: list[str] = []
        lock = threading.Lock()
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    n = len(exporter.served)
                    exporter.requests.append(f"{self.command} {self.path}")
                    text = None if n in fail or self.path != "/metrics" else body(n)
                    exporter.served.append(text)
                time.sleep(delay_s)
                if text is None:
                    self.send_response(500 if self.path == "/metrics" else 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/metrics``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/metrics"

    @property
    def instance(self) -> str:
        """``127.0.0.1:PORT``, the instance label a scrape adds."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def real_text(name: str) -> str:
    """A fixture of ``tests/fixtures/real``."""
    return (REAL / name).read_text(encoding="utf-8")
