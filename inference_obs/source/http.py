"""The read-only HTTP client of :class:`~inference_obs.source.prometheus.PrometheusSource`.

Read-only by construction: :class:`Client` builds every request from an
:class:`~inference_obs.source.endpoint.Endpoint` (parsed and checked once) and
one path of :data:`ALLOWED_PATHS`, then checks the final method and request
target once more, as they will be sent, before a
:class:`~inference_obs.source.transport.Transport` sees them. It has no
generic request method. Redirects are not followed, so credentials never
follow one to another host.

Every request is bounded: each attempt by ``timeout`` (connect, headers and
body together), all attempts and waits by ``request_timeout`` and by the
caller's ``deadline``, the answer by ``max_answer_bytes``, and at most
``parallel`` requests are in flight at once. Transport failures and the
API's error envelope are translated in one function, :func:`_classify`;
:meth:`Client.call` alone retries, bounded, with exponential backoff and
jitter. Credentials live in an :data:`~inference_obs.source.auth.Auth` object
and appear in no log line, repr or exception message: text from the server
that ends up in one (an error page, an error envelope, a warning) has every
credential the request carried replaced first, since a server or proxy may
echo the request's headers back.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inference_obs.errors import (
    AccessDenied,
    AnswerTooLarge,
    ConfigurationError,
    NotPrometheusAPI,
    QueryFailed,
    SourceUnavailable,
    TimeBudgetExceeded,
)
from inference_obs.samples import Matrix
from inference_obs.source.auth import Auth, BasicAuth
from inference_obs.source.endpoint import Endpoint
from inference_obs.source.frames import MATRIX_BODY_PREFIX, MalformedAnswer, parse_matrix_body
from inference_obs.source.limits import MAX_ANSWER_BYTES
from inference_obs.source.transport import (
    AnswerTooBig,
    BadEncoding,
    Request,
    Response,
    Transport,
)

__all__ = [
    "ALLOWED_PATHS",
    "MAX_ANSWER_BYTES",
    "Client",
    "Envelope",
    "Limits",
    "Reply",
    "check_header",
]

log = logging.getLogger("inference_obs.source.prometheus")

Method = Literal["GET", "POST"]
#: Every path the client may request, with its one method. Queries and series
#: go as POST form bodies: a long selector in a URL gets HTTP 431 or 414.
ALLOWED_PATHS: Mapping[str, Method] = {
    "/api/v1/query": "POST",
    "/api/v1/query_range": "POST",
    "/api/v1/series": "POST",
    "/api/v1/labels": "GET",
    "/api/v1/label/{}/values": "GET",
    "/api/v1/metadata": "GET",
    "/api/v1/status/buildinfo": "GET",
}
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# The allowlist as the final request paths may spell it (label names fill the one hole).
_FINAL = {
    path: re.compile(re.escape(path).replace(r"\{\}", _LABEL_NAME.pattern))
    for path in ALLOWED_PATHS
}
# Statuses worth retrying: timeout, rate limit, and server-side failures.
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# errorTypes that name a transient condition on the server (retried when HTTP says 5xx).
_TRANSIENT = frozenset({"timeout", "unavailable", "internal"})
# Enough of an unexpected body to recognise it (an HTML error page), not to flood.
_BODY_SNIPPET = 200
# What replaces a credential a server echoed back.
_HIDDEN = "<hidden>"
# Headers the client owns: a user-given one could smuggle a second request or
# change what the body means.
_RESERVED = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "te",
        "accept-encoding",
        "upgrade",
        "expect",
        "trailer",
        "proxy-authorization",
    }
)
# RFC 9110 5.1: a field name is a token.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# RFC 9110 5.5: tab, visible ASCII, space and obs-text (0x80-0xFF, sent as Latin-1).
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a request may take, how large its answer may be, how many run at once.

    Attributes
    ----------
    timeout
        Seconds for one attempt: connect, headers and body together.
    request_timeout
        Seconds for a whole request: every attempt and every wait between.
    retries
        Further attempts after a transient failure (connection, timeout, 408,
        429, 5xx, invalid JSON).
    backoff
        First wait between attempts, seconds; doubles each time, with jitter
        of 0.5-1.5x, never above ``max_backoff``.
    max_backoff
        Longest wait the client chooses itself, seconds.
    max_retry_after
        Longest ``Retry-After`` obeyed, seconds; a server asking for more is
        treated as down at once rather than waited for.
    max_answer_bytes
        Largest answer accepted, on the wire and decompressed.
    parallel
        Requests in flight at once, at most (also the idle connections kept).
    """

    timeout: float = 30.0
    request_timeout: float = 120.0
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 10.0
    max_retry_after: float = 30.0
    max_answer_bytes: int = MAX_ANSWER_BYTES
    parallel: int = 8

    def __post_init__(self) -> None:
        for name in ("timeout", "request_timeout", "backoff", "max_backoff", "max_retry_after"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"{name} must be a finite number >= 0, not {value!r}")
        if not self.timeout > 0 or not self.request_timeout > 0:
            raise ConfigurationError("timeout and request_timeout must be above 0 seconds")
        for name in ("retries", "max_answer_bytes", "parallel"):
            value = getattr(self, name)
            least = 0 if name == "retries" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(f"{name} must be a whole number >= {least}, not {value!r}")


class Envelope(BaseModel):
    """The Prometheus API's JSON envelope around every answer.

    ``isPartial`` is VictoriaMetrics's flag, ``partial_response`` Thanos's
    spelling; either marks an answer some stores did not contribute to.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    status: Literal["success", "error"]
    data: Any = None
    error_type: str | None = Field(None, alias="errorType")
    error: str | None = None
    warnings: tuple[str, ...] | None = None
    infos: tuple[str, ...] | None = None
    is_partial: bool | None = Field(None, alias="isPartial")
    partial_response: bool | None = None


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


class Client:
    """Sends allowlisted requests to one Prometheus-compatible API.

    Parameters
    ----------
    endpoint
        Where requests go (see :func:`~inference_obs.source.endpoint.parse_base_url`).
    auth
        Credentials, or None.
    headers
        Extra headers (e.g. ``X-Scope-OrgID``); checked here, never shown.
    transport
        What sends the requests.
    limits
        Time, size and concurrency bounds.
    deadline
        A :func:`time.monotonic` time after which no request continues
        (:class:`~inference_obs.errors.TimeBudgetExceeded`), or None.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        auth: Auth | None,
        headers: Mapping[str, str],
        transport: Transport,
        limits: Limits,
        deadline: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._auth = auth
        self._headers = _checked_headers(headers, has_auth=auth is not None)
        self._transport = transport
        self.limits = limits
        self._deadline = deadline
        self._slots = threading.BoundedSemaphore(limits.parallel)
        self._rng = random.Random()

    def query(
        self, path: str, fields: Mapping[str, str] | Sequence[tuple[str, str]], promql: str
    ) -> Reply:
        """POST ``fields`` to a query endpoint (``query``, ``query_range`` or ``series``)."""
        return self.call(path, "POST", fields, promql)

    def discover(
        self,
        path: str,
        fields: Mapping[str, str] | Sequence[tuple[str, str]],
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
        fields: Mapping[str, str] | Sequence[tuple[str, str]],
        what: str,
        label: str = "",
    ) -> Reply:
        """Send one allowlisted request with bounded retries; ``what`` names it in errors."""
        target, body = self._target(path, method, fields, label)
        started = time.monotonic()
        ends = started + self.limits.request_timeout
        budget = self._deadline is not None and self._deadline < ends
        ends = min(ends, self._deadline) if self._deadline is not None else ends
        attempt = 0
        while True:
            if time.monotonic() >= ends:
                raise self._out_of_time(path, what, budget, started)
            try:
                return self._once(method, target, body, path, what, ends)  # type: ignore[arg-type]
            except _Retry as exc:
                failure = exc
            now = time.monotonic()
            own = self.limits.backoff * 2**attempt * (0.5 + self._rng.random())
            wait = min(own, self.limits.max_backoff) if failure.wait is None else failure.wait
            if failure.wait is not None and failure.wait > self.limits.max_retry_after:
                raise SourceUnavailable(
                    f"{self.endpoint.url}{path}: {failure}; the server asks to wait "
                    f"{failure.wait:g} s, more than the {self.limits.max_retry_after:g} s "
                    "this client waits: treated as down",
                    promql=what,
                ) from None
            if attempt >= self.limits.retries or now + wait >= ends:
                # The budget, not the server, ended it: no time for a retry, or
                # the attempt itself was cut short at the budget's deadline.
                if budget and (attempt < self.limits.retries or now >= ends):
                    raise self._out_of_time(path, what, budget, started) from None
                if failure.final is not None:
                    raise failure.final from None
                attempts = f"{attempt + 1} attempt{'s' if attempt else ''}"
                why = self._why_stopped(attempt, now + wait, ends)
                raise SourceUnavailable(
                    f"{self.endpoint.url}{path}: {failure} (gave up after {attempts}{why})",
                    promql=what,
                ) from None
            log.debug("retrying %s in %.2f s after: %s", path, wait, failure)
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        """Close the transport's connections."""
        self._transport.close()

    # --- one request -----------------------------------------------------------

    def _target(
        self,
        path: str,
        method: str,
        fields: Mapping[str, str] | Sequence[tuple[str, str]],
        label: str,
    ) -> tuple[str, bytes]:
        """The request target and body, checked against the allowlist as they will be sent."""
        if ALLOWED_PATHS.get(path) != method:
            raise ConfigurationError(f"{method} {path} is not an allowed read-only request")
        final = self.endpoint.path(path.format(urllib.parse.quote(label, safe="")))
        query = urllib.parse.urlencode(
            list(fields.items()) if isinstance(fields, Mapping) else fields
        )
        api = final[len(self.endpoint.prefix) :]
        if (
            not final.startswith(self.endpoint.prefix)
            or not _FINAL[path].fullmatch(api)
            or ALLOWED_PATHS[path] != method
        ):
            raise ConfigurationError(f"{method} {final} is not an allowed read-only request")
        if method == "GET":
            return (f"{final}?{query}" if query else final), b""
        return final, query.encode()

    def _once(
        self, method: Method, target: str, body: bytes, path: str, what: str, ends: float
    ) -> Reply:
        headers = {"Accept-Encoding": "gzip", **self._headers}
        if self._auth is not None:
            headers["Authorization"] = self._auth.header()
        if method == "POST":
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        hide = self._sent_secrets(headers)
        deadline = min(time.monotonic() + self.limits.timeout, ends)
        request = Request(method, target, headers, body, deadline, self.limits.max_answer_bytes)
        started = time.monotonic()
        with self._slots:
            try:
                response = self._transport.send(request)
            except TimeoutError:
                raise _Retry(f"timed out after {time.monotonic() - started:.1f} s") from None
            except AnswerTooBig as exc:
                limit = self.limits.max_answer_bytes
                raise AnswerTooLarge(
                    f"{self.endpoint.url}{path}: the answer is larger than {limit:,} bytes "
                    f"({exc.where}); narrow the query or raise max_answer_bytes "
                    "(--max-answer-mb)",
                    promql=what,
                ) from None
            except BadEncoding as exc:
                raise _Retry(f"invalid or truncated gzip body ({exc})") from None
            except (OSError, http.client.HTTPException) as exc:
                reason = getattr(exc, "reason", None) or exc
                shown = _shown(str(reason), hide, _BODY_SNIPPET)
                if isinstance(exc, http.client.HTTPException):
                    # It quotes a malformed status line or header: server text, shown escaped.
                    shown = repr(shown)
                raise _Retry(f"connection failed ({type(reason).__name__}: {shown})") from None
        log.debug(
            "%s %s -> %d in %.3f s", method, path, response.status, time.monotonic() - started
        )
        return _classify(response, what, self.endpoint.url, path, hide)

    def _sent_secrets(self, headers: Mapping[str, str]) -> tuple[str, ...]:
        """The credentials in a request's ``headers``, longest first: never to be shown.

        The Authorization value and each extra header's value, each also
        without its first word (``Bearer``, ``Basic``), and a basic-auth password.
        """
        values = [*self._headers.values(), headers.get("Authorization", "")]
        parts = {part for v in values for part in (v, v.partition(" ")[2])}
        if isinstance(self._auth, BasicAuth):
            parts.add(self._auth.password)
        return tuple(sorted((p for p in parts if p.strip()), key=len, reverse=True))

    def _out_of_time(self, path: str, what: str, budget: bool, started: float) -> SourceUnavailable:
        spent = time.monotonic() - started
        if budget:
            return TimeBudgetExceeded(
                f"{self.endpoint.url}{path}: the time budget ran out during this request "
                f"(after {spent:.1f} s)",
                promql=what,
            )
        return SourceUnavailable(
            f"{self.endpoint.url}{path}: no answer within request_timeout="
            f"{self.limits.request_timeout:g} s",
            promql=what,
        )

    def _why_stopped(self, attempt: int, next_try: float, ends: float) -> str:
        if attempt < self.limits.retries and next_try >= ends:
            return f"; request_timeout={self.limits.request_timeout:g} s leaves no time for more"
        return ""


def _classify(
    response: Response, promql: str, url: str, path: str, hide: Sequence[str] = ()
) -> Reply:
    """THE translation of an HTTP answer to ``path`` of ``url``: a Reply, or the exception.

    Server text kept in a message, a warning or an info has each of ``hide``
    (the credentials the request carried) replaced.

    - 408/429/5xx without an envelope, invalid JSON in a 200: :class:`_Retry`
      (the caller retries, then raises SourceUnavailable);
    - a 200 that parses but cannot be data (a NaN timestamp): SourceUnavailable;
    - an error envelope: QueryFailed with its errorType (after retries when
      the status is 5xx and the type transient: timeout, unavailable, internal);
    - an HTML page, or a 200 that says it is not JSON, or a 404 without an
      envelope: NotPrometheusAPI (a wrong URL; not retried);
    - a redirect or another status without an envelope: SourceUnavailable.
    """
    status, body, headers = response.status, response.body, response.headers
    where = url + path
    matrix: Matrix | None = None
    envelope: Envelope | None
    try:
        if status == 200 and body.startswith(MATRIX_BODY_PREFIX):
            matrix, decoded = parse_matrix_body(body, promql)
        else:
            decoded = json.loads(body)
        envelope = Envelope.model_validate(decoded)
    except MalformedAnswer as exc:
        raise SourceUnavailable(f"{where}: malformed answer ({exc})", promql=promql) from None
    # RecursionError: JSON nested deeper than Python's stack (a hostile body).
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError, ValidationError):
        envelope = None
    if envelope is None:
        # Up to 4 bytes a character; enough to see a credential cut by the snippet's end whole.
        longest = max(map(len, hide), default=0)
        text = body[: 4 * (_BODY_SNIPPET + longest)].decode("utf-8", "replace")
        snippet = _shown(text, hide, _BODY_SNIPPET)
        if _not_the_api(status, body, headers):
            raise _not_an_api(response, promql, url, path, hide)
        if status in (401, 403):
            raise AccessDenied(
                f"{where}: HTTP {status}, the credentials were refused ({snippet!r}); check "
                "--token-file, --token-env, --header or the URL's user (none is shown here)",
                promql=promql,
            )
        if status in _RETRY_STATUS:
            raise _Retry(f"HTTP {status}: {snippet!r}", _retry_after(status, headers))
        if status == 200:
            raise _Retry("invalid or truncated JSON in a 200 answer")
        raise SourceUnavailable(
            f"{where}: HTTP {status} without an API answer: {snippet!r}", promql=promql
        )
    if envelope.status == "error" or status != 200:
        error_type = _shown(envelope.error_type or f"http_{status}", hide)
        message = _shown(envelope.error or f"HTTP {status}", hide)
        failed = QueryFailed(f"{error_type}: {message}", error_type=error_type, promql=promql)
        if status in _RETRY_STATUS and (status in (408, 429) or error_type in _TRANSIENT):
            raise _Retry(f"{error_type}: {message}", _retry_after(status, headers), failed)
        raise failed
    return Reply(
        data=envelope.data,
        warnings=tuple(_shown(text, hide) for text in envelope.warnings or ()),
        infos=tuple(_shown(text, hide) for text in envelope.infos or ()),
        partial=bool(envelope.is_partial or envelope.partial_response),
        headers=headers,
        matrix=matrix,
    )


def _not_the_api(status: int, body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether an answer without an envelope shows that the URL serves no Prometheus API.

    A 404 on an allowlisted path (every Prometheus-compatible server has them
    all; its own 404s carry an envelope); a 200 whose body is HTML, or whose
    content type is not JSON. A 200 that claims JSON, or names no type, may be
    a truncated answer and is retried instead.
    """
    if status == 404:
        return True
    if status != 200:
        return False
    kind = headers.get("content-type", "").partition(";")[0].strip().lower()
    return body.lstrip().startswith(b"<") or (bool(kind) and "json" not in kind)


def _not_an_api(
    response: Response, promql: str, url: str, path: str, hide: Sequence[str]
) -> NotPrometheusAPI:
    """The error naming the ``url`` (never credentials), the ``path`` and what it answered."""
    kind = response.headers.get("content-type", "").strip()
    # Server text, cut and with credentials replaced, quoted so that it reads as received.
    shown = repr(_shown(kind, hide, _BODY_SNIPPET)) if kind else "no content type"
    return NotPrometheusAPI(
        f"{url} does not serve the Prometheus HTTP API: {path} answered HTTP "
        f"{response.status} with {shown}, not the API's JSON (is the URL, or its path "
        "prefix, the Prometheus server's?)",
        promql=promql,
    )


def _shown(text: str, hide: Sequence[str], limit: int | None = None) -> str:
    """Server ``text`` for a message: each of ``hide`` replaced, cut at ``limit`` characters."""
    for secret in hide:
        text = text.replace(secret, _HIDDEN)
    return text if limit is None else text[:limit]


def _retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks to wait (429 and 503 only), or None to use our own backoff.

    An HTTP date, a negative number, NaN or infinity is not a usable wait
    and falls back to our backoff; a finite wait is returned as asked (the
    caller refuses one past ``max_retry_after``).
    """
    if status not in (429, 503):
        return None
    value = headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def check_header(name: str, value: str) -> None:
    """Refuse a header the client may not send; the message shows neither name nor value.

    A name must be an HTTP token (RFC 9110 5.1) and not one the client sets
    itself; a value may hold tab, visible ASCII, space and Latin-1 (what
    http.client sends), never CR, LF or another control character, which
    would split the request.
    """
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        # Not echoed: a name that is no token is often a value in the wrong place.
        raise ConfigurationError(
            "its name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~ only)"
        )
    if name.lower() in _RESERVED:
        raise ConfigurationError(f"{name} is set by the client and cannot be given")
    if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
        raise ConfigurationError("its value holds a control character or one past Latin-1")


def _checked_headers(headers: Mapping[str, str], *, has_auth: bool) -> dict[str, str]:
    """Extra headers after checking them; messages never show a value."""
    out = {}
    for i, (name, value) in enumerate(headers.items(), 1):
        try:
            check_header(name, value)
        except ConfigurationError as exc:
            named = isinstance(name, str) and _HEADER_NAME.fullmatch(name)
            raise ConfigurationError(f"header {name if named else f'number {i}'}: {exc}") from None
        if name.lower() == "authorization" and has_auth:
            raise ConfigurationError(
                "give credentials either as auth= or as an Authorization header"
            )
        out[name] = value
    return out
