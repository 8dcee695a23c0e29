"""The writer's own HTTP client: POST to exactly the write endpoints, nothing else.

The project's live client (:class:`~inference_obs.source.http.Client`) is
read-only by construction; loading a dataset must not loosen it. This client
is separate and as narrow: it knows :data:`WRITE_PATHS` alone, each with its
one protocol, and POSTs only bodies this package encoded. It shares the
checked pieces underneath (the base URL's checks and redaction, credentials,
TLS, the transport with one deadline per attempt and a bounded answer), not
the read-only allowlist.

A write target is given as a base URL (``http://vm:8428``, the protocol then
chosen by the caller) or as the full write URL, whose path names the
protocol::

    http://vm:8428/api/v1/import                             vm-import
    http://vminsert:8480/insert/0/prometheus/api/v1/import   vm-import (cluster)
    http://prometheus:9090/api/v1/write                      remote-write
    http://mimir:8080/api/v1/push                            remote-write (Mimir, Cortex)
    http://receive:19291/api/v1/receive                      remote-write (Thanos Receive)
"""

from __future__ import annotations

import http.client
import random
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from inference_obs.errors import ConfigurationError, SourceUnavailable
from inference_obs.source.auth import Auth, BasicAuth
from inference_obs.source.endpoint import Endpoint, parse_base_url, redact_url
from inference_obs.source.http import check_header
from inference_obs.source.transport import AnswerTooBig, BadEncoding, PooledTransport, Request

__all__ = ["WRITE_PATHS", "WireProtocol", "WriteClient", "WriteTarget", "parse_write_url"]


class WireProtocol(Enum):
    """How samples are written: the store's import API or remote write 1.0."""

    #: VictoriaMetrics ``/api/v1/import`` (JSON lines), single node or a vminsert path.
    VM_IMPORT = "vm-import"
    #: Remote write 1.0: protobuf ``WriteRequest``, snappy (Prometheus, Mimir, Thanos, Cortex).
    REMOTE_WRITE = "remote-write"


#: Every path the writer may POST to, with the protocol its body is in.
WRITE_PATHS: Mapping[str, WireProtocol] = {
    "/api/v1/import": WireProtocol.VM_IMPORT,
    "/api/v1/write": WireProtocol.REMOTE_WRITE,
    "/api/v1/push": WireProtocol.REMOTE_WRITE,
    "/api/v1/receive": WireProtocol.REMOTE_WRITE,
}
#: The write path of each protocol when the URL is a base URL.
DEFAULT_PATHS: Mapping[WireProtocol, str] = {
    WireProtocol.VM_IMPORT: "/api/v1/import",
    WireProtocol.REMOTE_WRITE: "/api/v1/write",
}
_HEADERS: Mapping[WireProtocol, Mapping[str, str]] = {
    WireProtocol.VM_IMPORT: {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    WireProtocol.REMOTE_WRITE: {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
    },
}
# Statuses worth sending again: timeout, rate limit, a server failing for now.
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# A write's answer is empty or a line of text; anything past this is not read.
_MAX_ANSWER = 1 << 20
# Enough of a refusal to read why, not a flood.
_SHOWN = 500


@dataclass(frozen=True, slots=True)
class WriteTarget:
    """Where a load writes: the base endpoint, the write path if the URL named one.

    Attributes
    ----------
    endpoint
        The store's base URL (no write path), without credentials.
    path
        The write path the URL ended in (one of :data:`WRITE_PATHS`), or ``None``.
    auth
        Basic auth from the URL's ``user:password@``, if any.
    """

    endpoint: Endpoint
    path: str | None
    auth: BasicAuth | None

    @property
    def protocol(self) -> WireProtocol | None:
        """The protocol the URL's path names, or ``None`` for a base URL."""
        return None if self.path is None else WRITE_PATHS[self.path]


def parse_write_url(url: str) -> WriteTarget:
    """The base endpoint and write path of ``url`` (checked as any base URL is).

    >>> t = parse_write_url("http://vminsert:8480/insert/0/prometheus/api/v1/import")
    >>> t.endpoint.url, t.path, t.protocol.value
    ('http://vminsert:8480/insert/0/prometheus', '/api/v1/import', 'vm-import')
    >>> parse_write_url("http://prom:9090").protocol is None
    True

    Raises
    ------
    ConfigurationError
        An unsafe or malformed URL (shown redacted), or an API path that is
        not a write path.
    """
    endpoint, auth = parse_base_url(url)
    for path in WRITE_PATHS:
        if endpoint.prefix.endswith(path):
            base = replace(endpoint, prefix=endpoint.prefix.removesuffix(path))
            return WriteTarget(base, path, auth)
    if "/api/" in endpoint.prefix + "/":
        raise ConfigurationError(
            f"{redact_url(url)}: not a write URL; give the store's base URL or one ending in "
            f"{', '.join(WRITE_PATHS)}"
        )
    return WriteTarget(endpoint, None, auth)


class WriteClient:
    """POSTs encoded bodies to one write path of one store, with bounded retries.

    Parameters
    ----------
    endpoint
        The store's base URL.
    protocol
        What the bodies are; sets the headers.
    path
        The write path, one of :data:`WRITE_PATHS` for ``protocol``.
    auth
        Credentials, or ``None``.
    headers
        Extra headers (``X-Scope-OrgID`` for Mimir); checked as the live
        client checks them, never shown.
    tls
        Context for ``https`` (the system's default when ``None``).
    timeout
        Seconds for one attempt: connect, send and answer together.
    retries
        Further attempts after a connection failure, a timeout, 408, 429 or
        5xx, with doubling backoff from ``backoff`` seconds. Resending a
        body is safe: the stores take the same samples twice as described in
        :mod:`inference_obs.load`.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        protocol: WireProtocol,
        *,
        path: str | None = None,
        auth: Auth | None = None,
        headers: Mapping[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 0.5,
    ) -> None:
        path = DEFAULT_PATHS[protocol] if path is None else path
        if WRITE_PATHS.get(path) is not protocol:
            raise ConfigurationError(f"POST {path} is not a {protocol.value} write path")
        for name, value in (headers or {}).items():
            check_header(name, value)
        self.endpoint, self.protocol, self.path = endpoint, protocol, path
        self._auth = auth
        self._headers = dict(headers or {})
        self._transport = PooledTransport(endpoint, tls=tls, size=1)
        self._timeout, self._retries, self._backoff = timeout, retries, backoff
        self._rng = random.Random()

    @property
    def url(self) -> str:
        """The write URL, without credentials."""
        return self.endpoint.url + self.path

    def post(self, body: bytes) -> tuple[int, str]:
        """Send one encoded body; the status and answer text of a 2xx or a final 4xx.

        Raises
        ------
        SourceUnavailable
            The store could not be reached, timed out or kept answering 408,
            429 or 5xx after the retries (the message names the URL and the
            last failure, never a credential).
        """
        target = self.endpoint.path(self.path)
        if WRITE_PATHS.get(target[len(self.endpoint.prefix) :]) is not self.protocol:
            raise ConfigurationError(f"POST {target} is not an allowed write")
        headers = {**self._headers, **_HEADERS[self.protocol]}
        if self._auth is not None:
            headers["Authorization"] = self._auth.header()
        hide = [v for v in headers.values() if len(v) > 3 and v not in _HEADERS[self.protocol]]
        attempt = 0
        while True:
            request = Request(
                "POST", target, headers, body, time.monotonic() + self._timeout, _MAX_ANSWER
            )
            try:
                response = self._transport.send(request)
                text = _shown(response.body.decode("utf-8", "replace"), hide)
                if response.status not in _RETRY_STATUS:
                    return response.status, text
                failure = f"HTTP {response.status}: {text}"
            except TimeoutError:
                failure = f"no answer within {self._timeout:g} s"
            except (AnswerTooBig, BadEncoding) as exc:
                failure = f"unreadable answer ({exc})"
            except (OSError, http.client.HTTPException) as exc:
                failure = f"connection failed ({type(exc).__name__}: {_shown(str(exc), hide)})"
            if attempt >= self._retries:
                raise SourceUnavailable(
                    f"{self.url}: {failure} (gave up after {attempt + 1} attempts)"
                )
            time.sleep(self._backoff * 2**attempt * (0.5 + self._rng.random()))
            attempt += 1

    def close(self) -> None:
        """Close the connection held."""
        self._transport.close()


def _shown(text: str, hide: list[str]) -> str:
    """Server text for a message: credentials it echoed replaced, cut short, one line."""
    for secret in sorted(hide, key=len, reverse=True):
        text = text.replace(secret, "<hidden>")
        text = text.replace(secret.partition(" ")[2] or secret, "<hidden>")
    return " ".join(text.split())[:_SHOWN]
