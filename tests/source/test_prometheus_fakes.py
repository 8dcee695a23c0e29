"""Support for the unit tests: a scripted fake HTTP server on 127.0.0.1.

Each request takes the next scripted :class:`Answer` (the last one repeats)
and is recorded (method, path, lower-cased headers, body).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Answer", "FakeServer", "Recorded", "envelope", "fake_server"]


@dataclass
class Answer:
    """One scripted reply: status, body, headers, a delay before it, and a drip rate."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drip_s: float = 0.0  # pause between body bytes (slow body)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def envelope(data: Any = None, **extra: Any) -> bytes:
    """A success envelope around ``data`` (plus extra top-level keys)."""
    return json.dumps({"status": "success", "data": data, **extra}).encode()


class FakeServer:
    def __init__(self) -> None:
        self.script: list[Answer] = [Answer(body=envelope({"resultType": "vector", "result": []}))]
        self.requests: list[Recorded] = []
        #: When set, answers each request by its content instead of the script.
        self.responder: Callable[[Recorded], Answer] | None = None
        self.log_lines: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorded = Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                fake.requests.append(recorded)
                if fake.responder is not None:
                    answer = fake.responder(recorded)
                else:
                    answer = fake.script.pop(0) if len(fake.script) > 1 else fake.script[0]
                time.sleep(answer.delay_s)
                try:
                    self.send_response(answer.status)
                    for key, value in answer.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    if answer.drip_s:
                        for byte in answer.body:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(answer.drip_s)
                    else:
                        self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): expected in those tests

            do_GET = do_POST = _serve  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:
                fake.log_lines.append(format % args)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def fake_server() -> Iterator[FakeServer]:
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


def test_fake_server_replays_its_script_and_records_requests() -> None:
    """The fake itself: scripted answers in order, the last repeating, requests recorded."""
    import urllib.request

    server = FakeServer()
    try:
        server.script = [Answer(body=b"one"), Answer(body=b"two")]
        bodies = [urllib.request.urlopen(server.url + "/x", timeout=5).read() for _ in range(3)]
        assert bodies == [b"one", b"two", b"two"]
        assert [r.path for r in server.requests] == ["/x"] * 3
    finally:
        server.stop()
