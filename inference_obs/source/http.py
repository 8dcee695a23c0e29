"""The read-only HTTP client of :class:`~inference_obs.source.prometheus.PrometheusSource`.

Read-only by construction: :class:`Client` sends only to the paths of
:data:`ALLOWED_PATHS` (GET for discovery, POST form bodies for the two query
endpoints, whose PromQL may be long) and has no generic request method.
Redirects are refused, so credentials never follow one to another host.

Transport failures and the API's error envelope are translated in one
function, :func:`_classify`; :meth:`Client.call` alone retries, bounded, with
exponential backoff and jitter. Credentials live in :class:`Credentials` and
appear in no log line, repr or exception message.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import logging
import os
import random
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from inference_obs.errors import QueryFailed, SourceUnavailable
from inference_obs.source.base import Matrix
from inference_obs.source.frames import MATRIX_BODY_PREFIX, parse_matrix_body

__all__ = ["ALLOWED_PATHS", "Client", "Credentials", "Reply", "strip_userinfo"]

log = logging.getLogger("inference_obs.source.prometheus")

#: Every path the client may request, with its one method.
ALLOWED_PATHS: Mapping[str, Literal["GET", "POST"]] = {
    "/api/v1/query": "POST",
    "/api/v1/query_range": "POST",
    "/api/v1/series": "GET",
    "/api/v1/labels": "GET",
    "/api/v1/label/{}/values": "GET",
    "/api/v1/metadata": "GET",
    "/api/v1/status/buildinfo": "GET",
}
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Statuses worth retrying: timeout, rate limit, and server-side failures.
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# errorTypes that name a transient condition on the server (retried when HTTP says 5xx).
_TRANSIENT = frozenset({"timeout", "unavailable", "internal"})
# A server asking to wait longer than this is treated as down, not waited for.
MAX_RETRY_AFTER_S = 30.0
# Exponential backoff stops growing here, so a retry never waits minutes.
MAX_BACKOFF_S = 10.0
# Enough of an unexpected body to recognise it (an HTML error page), not to flood.
_BODY_SNIPPET = 200
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where the Authorization header comes from; the repr names no secret."""

    token: str | None = field(default=None, repr=False)
    token_env: str | None = None
    token_file: Path | None = None
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)

    def header(self) -> str | None:
        """The Authorization header value, read fresh (token files rotate)."""
        if self.basic_auth is not None:
            pair = f"{self.basic_auth[0]}:{self.basic_auth[1]}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        token = self.token
        if token is None and self.token_env is not None:
            token = os.environ.get(self.token_env)
            if token is None:
                raise SourceUnavailable(f"environment variable {self.token_env} is not set")
        if token is None and self.token_file is not None:
            try:
                token = self.token_file.expanduser().read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise SourceUnavailable(
                    f"cannot read token file {self.token_file}: {exc.strerror}"
                ) from None
        return None if token is None else f"Bearer {token}"


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful answer: the envelope's ``data`` and its non-fatal parts."""

    data: Any
    warnings: tuple[str, ...]
    infos: tuple[str, ...]
    partial: bool
    headers: Mapping[str, str]
    #: A matrix result already converted from the body's bytes (``data.result``
    #: is then empty): large range answers never become per-point objects.
    matrix: Matrix | None = None


class _Retry(Exception):
    """A failure worth another attempt; ``wait`` is the server's Retry-After, if any."""

    def __init__(
        self, message: str, wait: float | None = None, final: QueryFailed | None = None
    ) -> None:
        super().__init__(message)
        self.wait = wait
        self.final = final  # raised instead of SourceUnavailable when retries run out


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx surfaces as an HTTPError and is reported, not followed


def strip_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without ``user:password@``, and the pair if there was one."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url.rstrip("/"), None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    clean = urllib.parse.urlunsplit(parts._replace(netloc=netloc)).rstrip("/")
    user = urllib.parse.unquote(parts.username)
    return clean, (user, urllib.parse.unquote(parts.password or ""))


class Client:
    """Sends allowlisted requests to one Prometheus-compatible API.

    ``rng`` (jitter) and ``sleep`` are injectable so tests run fast and
    deterministic.
    """

    def __init__(
        self,
        url: str,
        *,
        credentials: Credentials,
        headers: Mapping[str, str],
        tls: ssl.SSLContext | None,
        proxies: Mapping[str, str] | None,
        timeout: float,
        retries: int,
        backoff: float,
        rng: random.Random,
        sleep: Callable[[float], None],
    ) -> None:
        self.url = url
        self._credentials = credentials
        self._headers = dict(headers)
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        handlers.append(urllib.request.HTTPSHandler(context=tls))
        if proxies is not None:
            handlers.append(urllib.request.ProxyHandler(dict(proxies)))
        self._opener = urllib.request.build_opener(*handlers)
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._rng = rng
        self._sleep = sleep

    def query(self, path: str, fields: Mapping[str, str], promql: str) -> Reply:
        """POST ``fields`` to a query endpoint (``/api/v1/query`` or ``query_range``)."""
        return self.call(path, "POST", fields, promql)

    def discover(
        self,
        path: str,
        fields: Mapping[str, str] | list[tuple[str, str]],
        what: str,
        label: str = "",
    ) -> Reply:
        """GET a discovery endpoint; ``label`` fills ``/api/v1/label/{}/values``."""
        if label and (label != "__name__" and not _LABEL_NAME.fullmatch(label)):
            raise QueryFailed(f"invalid label name {label!r}", error_type="bad_data", promql=what)
        return self.call(path, "GET", fields, what, label)

    def call(
        self,
        path: str,
        method: str,
        fields: Mapping[str, str] | list[tuple[str, str]],
        what: str,
        label: str = "",
    ) -> Reply:
        """Send one allowlisted request with bounded retries; ``what`` names it in errors."""
        if ALLOWED_PATHS.get(path) != method:
            raise ValueError(f"{method} {path} is not an allowed read-only request")
        target = self.url + path.format(urllib.parse.quote(label, safe=""))
        body = urllib.parse.urlencode(
            list(fields.items()) if isinstance(fields, Mapping) else fields
        )
        attempt = 0
        while True:
            try:
                return self._once(target, method, body, path, what)
            except _Retry as exc:
                if attempt >= self._retries:
                    if exc.final is not None:
                        raise exc.final from None
                    raise SourceUnavailable(
                        f"{self.url}{path}: {exc} (gave up after {attempt + 1} attempts)",
                        promql=what,
                    ) from None
                wait = self._backoff * 2**attempt * (0.5 + self._rng.random())
                wait = min(wait, MAX_BACKOFF_S) if exc.wait is None else exc.wait
                log.debug("retrying %s in %.2f s after: %s", path, wait, exc)
                self._sleep(wait)
                attempt += 1

    def _once(self, target: str, method: str, body: str, path: str, what: str) -> Reply:
        # Answers are JSON, which gzip makes several times smaller on the wire.
        headers = {"Accept-Encoding": "gzip", **self._headers}
        auth = self._credentials.header()
        if auth is not None:
            headers["Authorization"] = auth
        if method == "POST":
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            request = urllib.request.Request(target, body.encode(), headers, method="POST")
        else:
            url = f"{target}?{body}" if body else target
            request = urllib.request.Request(url, headers=headers, method="GET")
        started = time.monotonic()
        try:
            with self._opener.open(request, timeout=self._timeout) as resp:
                status, text = resp.status, self._read(resp, started)
                reply_headers = dict(resp.headers.items())
        except urllib.error.HTTPError as exc:
            with exc:
                status, reply_headers = exc.code, dict(exc.headers.items())
                try:
                    text = self._read(exc, started)
                except (OSError, http.client.HTTPException):
                    text = b""
        except (OSError, http.client.HTTPException) as exc:
            log.debug("%s %s failed: %s", method, path, type(exc).__name__)
            return _classify(None, b"", {}, exc, what)
        log.debug("%s %s -> %d in %.3f s", method, path, status, time.monotonic() - started)
        encoding = next(
            (v for k, v in reply_headers.items() if k.lower() == "content-encoding"), ""
        )
        if encoding.strip().lower() == "gzip":
            try:
                text = gzip.decompress(text)
            except (OSError, EOFError, zlib.error) as exc:  # cut off, or not gzip at all
                raise _Retry(f"invalid or truncated gzip body ({type(exc).__name__})") from None
        return _classify(status, text, reply_headers, None, what)

    def _read(self, resp: Any, started: float) -> bytes:
        # The socket timeout bounds each read; this bounds the whole body too.
        chunks = []
        while chunk := resp.read1(_CHUNK):
            chunks.append(chunk)
            if time.monotonic() - started > self._timeout:
                raise TimeoutError(f"body not complete within {self._timeout:g} s")
        return b"".join(chunks)


def _classify(
    status: int | None,
    body: bytes,
    headers: Mapping[str, str],
    exc: BaseException | None,
    promql: str,
) -> Reply:
    """THE translation of an HTTP outcome: a Reply, or the exception to raise.

    - connection errors, timeouts, 408/429/5xx, invalid JSON: :class:`_Retry`
      (the caller retries, then raises SourceUnavailable);
    - an error envelope: QueryFailed with its errorType (after retries when
      the status is 5xx and the type transient: timeout, unavailable, internal);
    - a redirect or another status without an envelope: SourceUnavailable.
    """
    if exc is not None:
        if isinstance(exc, TimeoutError | socket.timeout):
            raise _Retry("timed out")
        reason = getattr(exc, "reason", None) or exc
        raise _Retry(f"connection failed ({type(reason).__name__}: {reason})")
    assert status is not None
    matrix: Matrix | None = None
    try:
        if status == 200 and body.startswith(MATRIX_BODY_PREFIX):
            matrix, envelope = parse_matrix_body(body, promql)
        else:
            envelope = json.loads(body)
    except (ValueError, TypeError, UnicodeDecodeError):
        envelope = None
    if not isinstance(envelope, dict) or envelope.get("status") not in ("success", "error"):
        snippet = body[:_BODY_SNIPPET].decode("utf-8", "replace")
        if status in _RETRY_STATUS:
            raise _Retry(f"HTTP {status}: {snippet!r}", _retry_after(status, headers))
        if status == 200:
            raise _Retry("invalid or truncated JSON in a 200 answer")
        raise SourceUnavailable(f"HTTP {status} without an API answer: {snippet!r}", promql=promql)
    if envelope["status"] == "error" or status != 200:
        error_type = str(envelope.get("errorType") or f"http_{status}")
        message = str(envelope.get("error") or f"HTTP {status}")
        failed = QueryFailed(f"{error_type}: {message}", error_type=error_type, promql=promql)
        if status in _RETRY_STATUS and (status in (408, 429) or error_type in _TRANSIENT):
            raise _Retry(f"{error_type}: {message}", _retry_after(status, headers), failed)
        raise failed
    return Reply(
        data=envelope.get("data"),
        warnings=tuple(str(w) for w in envelope.get("warnings") or ()),
        infos=tuple(str(w) for w in envelope.get("infos") or ()),
        partial=bool(envelope.get("isPartial") or envelope.get("partial_response")),
        headers={k.lower(): v for k, v in headers.items()},
        matrix=matrix,
    )


def _retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    if status not in (429, 503):
        return None
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
    return None if seconds is None else min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
