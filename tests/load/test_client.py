"""The write client: which URLs it takes, what it sends, what it retries, what it never shows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from inference_obs.errors import ConfigurationError, SourceUnavailable
from inference_obs.load.client import WRITE_PATHS, WireProtocol, WriteClient, parse_write_url
from inference_obs.source.auth import BearerToken
from inference_obs.source.http import ALLOWED_PATHS


@pytest.mark.parametrize(
    ("url", "base", "path", "protocol"),
    [
        ("http://vm:8428", "http://vm:8428", None, None),
        ("http://vm:8428/api/v1/import", "http://vm:8428", "/api/v1/import", "vm-import"),
        (
            "http://vminsert:8480/insert/0/prometheus/api/v1/import",
            "http://vminsert:8480/insert/0/prometheus",
            "/api/v1/import",
            "vm-import",
        ),
        ("https://prom/api/v1/write", "https://prom", "/api/v1/write", "remote-write"),
        ("http://mimir/api/v1/push", "http://mimir", "/api/v1/push", "remote-write"),
        (
            "http://recv:19291/api/v1/receive",
            "http://recv:19291",
            "/api/v1/receive",
            "remote-write",
        ),
    ],
)
def test_the_write_url_names_the_base_and_the_protocol(
    url: str, base: str, path: str | None, protocol: str | None
) -> None:
    target = parse_write_url(url)
    assert (target.endpoint.url, target.path) == (base, path)
    assert (target.protocol.value if target.protocol else None) == protocol


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://prom/api/v1/query", "not a write URL"),
        ("http://prom/api/v1/admin/tsdb/delete_series", "not a write URL"),
        ("http://prom/api/v1/write?x=1", "query string"),
        ("http://ann:s3cret@prom/api/v1/import/csv", "not a write URL"),
    ],
)
def test_anything_but_a_write_url_is_refused_without_its_credentials(
    url: str, problem: str
) -> None:
    with pytest.raises(ConfigurationError, match=problem) as caught:
        parse_write_url(url)
    assert "s3cret" not in str(caught.value)


def test_the_allowlist_is_the_four_write_paths() -> None:
    assert dict(WRITE_PATHS) == {
        "/api/v1/import": WireProtocol.VM_IMPORT,
        "/api/v1/write": WireProtocol.REMOTE_WRITE,
        "/api/v1/push": WireProtocol.REMOTE_WRITE,
        "/api/v1/receive": WireProtocol.REMOTE_WRITE,
    }
    endpoint = parse_write_url("http://prom").endpoint
    with pytest.raises(ConfigurationError, match="not a remote-write write path"):
        WriteClient(endpoint, WireProtocol.REMOTE_WRITE, path="/api/v1/import")
    with pytest.raises(ConfigurationError, match="not a vm-import write path"):
        WriteClient(endpoint, WireProtocol.VM_IMPORT, path="/api/v1/query")
    with pytest.raises(ConfigurationError):
        WriteClient(endpoint, WireProtocol.VM_IMPORT, headers={"X-Bad": "a\r\nHost: evil"})


class _Store:
    """A recording HTTP server answering each POST with the next of ``answers``."""

    def __init__(self, answers: list[tuple[int, str]]) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        store = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                store.seen.append((self.command, self.path, dict(self.headers), body))
                status, text = answers.pop(0) if len(answers) > 1 else answers[0]
                # The answer echoes the request's credentials, as some proxies do.
                data = text.replace("$AUTH", self.headers.get("Authorization", "")).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Iterator[_Store]:
    running = _Store(list(request.param))
    yield running
    running.server.shutdown()
    running.server.server_close()


@pytest.mark.parametrize("store", [[(503, "busy"), (503, "busy"), (204, "")]], indirect=True)
def test_a_remote_write_post_carries_the_protocol_headers_and_is_retried(store: _Store) -> None:
    target = parse_write_url(store.url + "/prefix/api/v1/write")
    client = WriteClient(
        target.endpoint, WireProtocol.REMOTE_WRITE, path=target.path, backoff=0.001
    )
    assert client.post(b"\x00") == (204, "")
    client.close()
    assert len(store.seen) == 3
    method, path, headers, body = store.seen[-1]
    assert (method, path, body) == ("POST", "/prefix/api/v1/write", b"\x00")
    assert headers["Content-Encoding"] == "snappy"
    assert headers["Content-Type"] == "application/x-protobuf"
    assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"


@pytest.mark.parametrize("store", [[(400, "refused for $AUTH")]], indirect=True)
def test_a_refusal_is_returned_with_echoed_credentials_hidden(store: _Store) -> None:
    client = WriteClient(
        parse_write_url(store.url).endpoint,
        WireProtocol.VM_IMPORT,
        auth=BearerToken("tok3n-value"),
    )
    status, text = client.post(b"{}")
    client.close()
    assert status == 400
    assert "tok3n-value" not in text
    assert "<hidden>" in text
    assert store.seen[0][2]["Authorization"] == "Bearer tok3n-value"
    assert store.seen[0][1] == "/api/v1/import"


@pytest.mark.parametrize("store", [[(503, "down for $AUTH")]], indirect=True)
def test_a_store_that_stays_down_is_unavailable_after_bounded_retries(store: _Store) -> None:
    client = WriteClient(
        parse_write_url(store.url).endpoint,
        WireProtocol.VM_IMPORT,
        auth=BearerToken("tok3n-value"),
        retries=2,
        backoff=0.001,
    )
    with pytest.raises(SourceUnavailable, match="gave up after 3 attempts") as caught:
        client.post(b"{}")
    client.close()
    assert len(store.seen) == 3
    assert store.url + "/api/v1/import" in str(caught.value)
    assert "tok3n-value" not in str(caught.value)


def test_the_read_only_client_knows_no_write_path_and_the_writer_no_read_path() -> None:
    assert not set(ALLOWED_PATHS) & set(WRITE_PATHS)
    assert not any(
        path.endswith(("/import", "/write", "/push", "/receive")) for path in ALLOWED_PATHS
    )
