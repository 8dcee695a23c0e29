"""A counting HTTP proxy: every request a client sends to Prometheus, with the bytes it received.

Like the recording proxy of ``tests/integration/test_read_only.py``, it
forwards each request as it is (method, path, body) and answers with the
server's status and body; it also keeps, per request, the PromQL (or the
discovery path), the bytes sent and received, and the :attr:`CountingProxy.tag`
the driver set before the call (the analysis being run). A client that
accepts gzip gets the server's gzipped body as it is; the exchange keeps
both its size on the wire and the size of the JSON it holds.
"""

from __future__ import annotations

import gzip
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CountingProxy", "Exchange", "on_the_wire", "totals"]

# A fleet's raw answers take seconds to evaluate and send.
UPSTREAM_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request through the proxy."""

    tag: str
    method: str
    path: str
    query: str  # the PromQL of a query, else the query string
    request: str  # the whole request: body of a POST, query string of a GET
    sent: int  # request body bytes
    received: int  # response body bytes, uncompressed (the JSON)
    wire: int  # response body bytes as sent (gzipped where the client accepted it)


def totals(exchanges: Iterable[Exchange]) -> tuple[int, int]:
    """Number of requests and bytes received (uncompressed JSON)."""
    count = received = 0
    for one in exchanges:
        count += 1
        received += one.received
    return count, received


def on_the_wire(exchanges: Iterable[Exchange]) -> int:
    """Bytes of the response bodies as sent: gzipped where the client accepted it."""
    return sum(one.wire for one in exchanges)


class CountingProxy:
    """Forwards to ``upstream`` on a free 127.0.0.1 port; ``url`` is where clients go.

    Use it with :func:`contextlib.closing`, which stops it.
    """

    def __init__(self, upstream: str) -> None:
        self.tag = ""
        self.exchanges: list[Exchange] = []
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {"Content-Type": self.headers.get("Content-Type", "text/plain")}
                if accept := self.headers.get("Accept-Encoding"):
                    headers["Accept-Encoding"] = accept
                request = urllib.request.Request(
                    upstream + self.path, body, headers, method=self.command
                )
                try:
                    with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT_S) as resp:
                        status, data = resp.status, resp.read()
                        encoding = resp.headers.get("Content-Encoding", "")
                except urllib.error.HTTPError as exc:
                    with exc:
                        status, data = exc.code, exc.read()
                        encoding = exc.headers.get("Content-Encoding", "")
                plain = gzip.decompress(data) if encoding == "gzip" else data
                path, _, query = self.path.partition("?")
                request_text = body.decode("utf-8") if body else query
                if body:
                    fields = urllib.parse.parse_qs(body.decode("utf-8"))
                    query = fields.get("query", [query])[0]
                with lock:
                    proxy.exchanges.append(
                        Exchange(
                            proxy.tag,
                            self.command,
                            path,
                            query,
                            request_text,
                            length,
                            len(plain),
                            len(data),
                        )
                    )
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if encoding:
                    self.send_header("Content-Encoding", encoding)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,))
        self._thread.daemon = True
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def take(self) -> list[Exchange]:
        """The exchanges so far, forgetting them."""
        taken, self.exchanges = self.exchanges, []
        return taken

    def close(self) -> None:
        """Stop serving and wait for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
