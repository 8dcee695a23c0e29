"""Read-only scrapes of one ``/metrics`` endpoint: a GET-only, bounded client.

A scrape target is a URL checked once by
:func:`~inference_obs.source.endpoint.parse_base_url` (http or https, no query
string, no ``..``): its path is the one request target this client ever sends,
with ``GET`` and no body. It is not the Prometheus API client
(:class:`~inference_obs.source.http.Client`, whose allowlist is for that API
only) but shares what bounds it: the
:class:`~inference_obs.source.transport.Transport` (kept-alive connections,
one deadline per attempt for connect, headers and body together, the answer's
size limited on the wire and decompressed), TLS settings, credentials that
never appear in a message, and :class:`~inference_obs.source.http.Limits`.

Retries are bounded by the scrape's own deadline (a scrape must end before the
next one is due): a refused or reset connection, a timeout, a cut gzip body,
408, 429 and 5xx are tried again after a short backoff; any other answer ends
the scrape at once. Nothing the server sent is quoted in a message, so no
credential it might echo can be shown.
"""

from __future__ import annotations

import http.client
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from inference_obs.errors import AnswerTooLarge, ConfigurationError, SourceUnavailable
from inference_obs.samples import Labels
from inference_obs.source.auth import Auth
from inference_obs.source.endpoint import Endpoint, parse_base_url, redact_url
from inference_obs.source.http import Limits, check_header
from inference_obs.source.limits import MAX_SCRAPE_ANSWER_BYTES
from inference_obs.source.transport import AnswerTooBig, BadEncoding, Request, Transport

__all__ = ["ACCEPT", "DEFAULT_PATH", "Answer", "ScrapeClient", "Target", "parse_target"]

#: What a scrape asks for: the Prometheus text format, which every exporter here writes.
ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
#: Prometheus's default ``metrics_path``, used when a target URL has no path.
DEFAULT_PATH = "/metrics"
# Statuses worth another attempt: timeout, rate limit, server-side failures.
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Target:
    """A ``/metrics`` endpoint and the ``job`` and ``instance`` labels its samples get.

    Attributes
    ----------
    endpoint
        Scheme, host, port and the metrics path (``prefix``).
    job
        The ``job`` label, as a Prometheus scrape job would name it.
    instance
        The ``instance`` label: ``host:port``, as Prometheus writes ``__address__``.
    labels
        Further target labels, as service discovery gives them (Kubernetes: the
        scraped pod's ``pod``, ``namespace``, ``container``); none by default.
    """

    endpoint: Endpoint
    job: str
    instance: str
    labels: Labels = field(default_factory=Labels)

    @property
    def url(self) -> str:
        """The URL without credentials: safe to print and to keep in a manifest."""
        return self.endpoint.url + ("" if self.endpoint.prefix else DEFAULT_PATH)

    @property
    def path(self) -> str:
        """The one request target this target is scraped at."""
        return self.endpoint.prefix or DEFAULT_PATH


def parse_target(text: str, *, job: str = "capture") -> tuple[Target, Auth | None]:
    """The target of ``[JOB=]URL`` and the basic auth a ``user:password@`` in it gave.

    Raises
    ------
    ConfigurationError
        For a URL :func:`~inference_obs.source.endpoint.parse_base_url` refuses
        or an invalid job name; the URL is shown redacted.

    Examples
    --------
    >>> target, _ = parse_target("vllm=http://10.0.0.1:8000/metrics")
    >>> target.job, target.instance, target.url
    ('vllm', '10.0.0.1:8000', 'http://10.0.0.1:8000/metrics')
    >>> parse_target("http://[::1]:9400")[0].instance
    '[::1]:9400'
    """
    name, sep, url = text.partition("=")
    if not sep or "://" in name:
        name, url = job, text
    if not name or not name.replace("-", "_").isidentifier():
        raise ConfigurationError(f"target {redact_url(text)}: job {name!r} is not a job name")
    endpoint, auth = parse_base_url(url)
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return Target(endpoint, name, f"{host}:{endpoint.port}"), auth


@dataclass(frozen=True, slots=True)
class Answer:
    """A scrape's answer: the decoded body and its ``Content-Type``."""

    body: bytes
    content_type: str | None


class ScrapeClient:
    """GETs one target's metrics path; nothing else can be sent through it.

    Parameters
    ----------
    target
        What to scrape.
    transport
        What moves the request (a :class:`~inference_obs.source.transport.PooledTransport`
        for ``target.endpoint``, or a test's own).
    auth
        Credentials, or None; never shown.
    headers
        Extra request headers, checked as the API client checks them.
    limits
        ``timeout`` (default 10 s) bounds each attempt, ``retries``
        (default 1) the further attempts, ``backoff``/``max_backoff`` the
        waits between them, and ``max_answer_bytes`` the answer (default
        :data:`~inference_obs.source.limits.MAX_SCRAPE_ANSWER_BYTES`).
    """

    def __init__(
        self,
        target: Target,
        transport: Transport,
        *,
        auth: Auth | None = None,
        headers: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> None:
        extra = dict(headers or {})
        for name, value in extra.items():
            check_header(name, value)
            if name.lower() in ("authorization", "accept"):
                raise ConfigurationError(f"header {name} is set by the scrape client")
        self.target = target
        self._transport = transport
        self._auth = auth
        self._headers = extra
        self.limits = (
            limits
            if limits is not None
            else Limits(timeout=10.0, retries=1, max_answer_bytes=MAX_SCRAPE_ANSWER_BYTES)
        )
        self._rng = random.Random()

    def __repr__(self) -> str:
        return f"ScrapeClient({self.target.url!r})"

    def scrape(self, deadline: float) -> Answer:
        """GET the metrics path, retrying transient failures until ``deadline`` (monotonic).

        Raises
        ------
        SourceUnavailable
            When no answer came (the message names the redacted URL and why).
        """
        attempt = 0
        while True:
            try:
                return self._once(deadline)
            except _Transient as exc:
                failure = str(exc)
            wait = min(self.limits.backoff * 2**attempt, self.limits.max_backoff)
            wait *= 0.5 + self._rng.random()
            if attempt >= self.limits.retries or time.monotonic() + wait >= deadline:
                tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                raise SourceUnavailable(f"{self.target.url}: {failure} ({tries})") from None
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        """Close the transport's connections."""
        self._transport.close()

    def _once(self, deadline: float) -> Answer:
        now = time.monotonic()
        if now >= deadline:
            raise _Transient("no time left before the next scrape")
        headers = {"Accept": ACCEPT, "Accept-Encoding": "gzip", **self._headers}
        if self._auth is not None:
            headers["Authorization"] = self._auth.header()
        request = Request(
            "GET",
            self.target.path,
            headers,
            b"",
            min(now + self.limits.timeout, deadline),
            self.limits.max_answer_bytes,
        )
        try:
            response = self._transport.send(request)
        except TimeoutError:
            raise _Transient(f"no answer within {time.monotonic() - now:.1f} s") from None
        except AnswerTooBig as exc:
            raise AnswerTooLarge(
                f"{self.target.url}: the answer is larger than "
                f"{self.limits.max_answer_bytes:,} bytes ({exc.where})"
            ) from None
        except BadEncoding:
            raise _Transient("invalid or truncated gzip body") from None
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise _Transient(f"connection failed ({type(reason).__name__})") from None
        if response.status in _RETRY_STATUS:
            raise _Transient(f"HTTP {response.status}")
        if response.status != 200:
            raise SourceUnavailable(f"{self.target.url}: HTTP {response.status}")
        return Answer(response.body, response.headers.get("content-type"))


class _Transient(Exception):
    """A failure worth another attempt while the scrape's deadline allows."""
