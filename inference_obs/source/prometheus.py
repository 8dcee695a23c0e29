"""A read-only :class:`~inference_obs.source.base.Source` over the Prometheus HTTP API.

Works with Prometheus 2.x/3.x, VictoriaMetrics, Thanos and Mimir. Requests go
through :class:`~inference_obs.source.http.Client`, which knows only the
read-only endpoints and maps every failure in one place (retries included).
Range queries with more points per series than the server allows are split
into step-aligned pieces fetched in parallel (:mod:`.ranges`).

Examples
--------
>>> PrometheusSource("https://user:secret@prom.example:9090/")
PrometheusSource('https://prom.example:9090')
>>> PrometheusSource("https://prom.example", auth=BearerToken(file="/var/run/token"))
PrometheusSource('https://prom.example')
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import replace
from enum import Enum
from threading import Lock
from typing import Any

from inference_obs.engine.rules import Rules
from inference_obs.errors import (
    Annotation,
    ConfigurationError,
    MalformedAnswer,
    SourceUnavailable,
)
from inference_obs.query import Expr, Range, Selector, to_promql
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Window
from inference_obs.source import frames
from inference_obs.source.auth import Auth, BasicAuth, BearerToken
from inference_obs.source.base import LEFT_OPEN_MARGIN_S, EngineInfo, Metadata
from inference_obs.source.endpoint import Endpoint, parse_base_url
from inference_obs.source.http import MAX_ANSWER_BYTES, Client, Limits, Reply
from inference_obs.source.ranges import fetch_pieces, max_points_for, plan
from inference_obs.source.tls import TLS
from inference_obs.source.transport import PooledTransport, Transport

__all__ = ["PartialAnswers", "PrometheusSource"]


class PartialAnswers(Enum):
    """What a source does with a partial answer (Thanos, Mimir: a store did not answer)."""

    #: Keep the answer, with a ``partial_response`` annotation on the result.
    ANNOTATE = "annotate"
    #: Refuse it: :class:`~inference_obs.errors.SourceUnavailable`, never a number from it.
    REFUSE = "refuse"


def _seconds(value: float) -> str:
    # Both engines read float seconds and keep milliseconds.
    return f"{value:.3f}"


class PrometheusSource:
    """Read-only source over a Prometheus-compatible HTTP API.

    Parameters
    ----------
    url
        Base URL (``https://prom.example``, or with a path prefix), parsed and
        checked once (:func:`~inference_obs.source.endpoint.parse_base_url`):
        http or https, no query, no fragment, no ``..``. A ``user:password@``
        in it becomes basic auth and leaves the URL.
    auth
        :class:`~inference_obs.source.auth.BearerToken` (a value, an
        environment variable or a file, re-read on every request so rotated
        tokens work) or :class:`~inference_obs.source.auth.BasicAuth`.
    headers
        Extra headers, e.g. ``{"X-Scope-OrgID": "tenant"}`` for Mimir.
    tls
        :class:`~inference_obs.source.tls.TLS` settings (CA bundle, client
        certificate), or a ready :class:`ssl.SSLContext`.
    proxy
        An ``http://host:port`` forward proxy. Environment variables are not
        read: credentials go only where the caller said.
    timeout
        Seconds for one attempt: connect, headers and body together.
    request_timeout
        Seconds for a whole request, every retry and wait included.
    retries, backoff
        Retries after a transient failure (connection, timeout, 408, 429,
        5xx, invalid JSON) and the first backoff in seconds (doubling, with
        jitter); then :class:`~inference_obs.errors.SourceUnavailable`.
    max_answer_bytes
        Largest answer accepted, on the wire and decompressed; a larger one
        raises :class:`~inference_obs.errors.AnswerTooLarge`.
    parallel
        Requests in flight at once, at most (connections are kept alive and
        reused between requests).
    deadline
        A :func:`time.monotonic` time (a caller's time budget): a request
        still running then stops with
        :class:`~inference_obs.errors.TimeBudgetExceeded`.
    partial_answers
        :attr:`PartialAnswers.ANNOTATE` keeps a partial answer and annotates
        the result; :attr:`PartialAnswers.REFUSE` raises
        :class:`~inference_obs.errors.SourceUnavailable` instead.
    rules
        Override the local rule set detected by :meth:`info`.
    max_points
        Points per series per request before a range query is split
        (default: 11,000 for Prometheus, 30,000 for VictoriaMetrics).
    transport
        What moves requests (default: a kept-alive
        :class:`~inference_obs.source.transport.PooledTransport`); tests
        inject their own.
    """

    def __init__(
        self,
        url: str,
        *,
        auth: Auth | None = None,
        headers: Mapping[str, str] | None = None,
        tls: TLS | ssl.SSLContext | None = None,
        proxy: str | None = None,
        timeout: float = 30.0,
        request_timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        parallel: int = 8,
        deadline: float | None = None,
        partial_answers: PartialAnswers = PartialAnswers.ANNOTATE,
        rules: Rules | None = None,
        max_points: int | None = None,
        transport: Transport | None = None,
    ) -> None:
        endpoint, userinfo = parse_base_url(url)
        if max_points is not None and not max_points >= 1:
            raise ConfigurationError(
                f"max_points {max_points!r} must be at least 1 (points per series per request), "
                "or None for the engine's default"
            )
        if auth is not None and userinfo is not None:
            raise ConfigurationError("give credentials either in the URL or as auth=, not both")
        if auth is not None and not isinstance(auth, BearerToken | BasicAuth):
            raise ConfigurationError(
                f"auth must be a BearerToken or BasicAuth, not {type(auth).__name__}"
            )
        limits = Limits(
            timeout=timeout,
            request_timeout=request_timeout,
            retries=retries,
            backoff=backoff,
            max_answer_bytes=max_answer_bytes,
            parallel=parallel,
        )
        if transport is None:
            context = tls.context() if isinstance(tls, TLS) else tls
            hop = _proxy_endpoint(proxy) if proxy is not None else None
            transport = PooledTransport(endpoint, tls=context, proxy=hop, size=parallel)
        self.url = endpoint.url
        self._client = Client(
            endpoint,
            auth=auth or userinfo,
            headers=headers or {},
            transport=transport,
            limits=limits,
            deadline=deadline,
        )
        self._partial_answers = partial_answers
        self._rules = rules
        self._max_points = max_points
        self._info: EngineInfo | None = None
        self._info_lock = Lock()

    @classmethod
    def from_connect(cls, prom: Any, **kwargs: Any) -> PrometheusSource:
        """A source with a ``prometheus_api_client.PrometheusConnect``'s settings.

        Carried over: the URL, headers and ``(user, password)`` auth (public
        attributes), and from its ``requests`` session (which the class keeps
        only as ``_session``) the TLS verification, client certificate and
        proxy for the URL's scheme, and its timeout. ``kwargs`` override any
        of them. Requests then go through this library's client, not the
        session: its deadlines and size limits hold either way.
        """
        session = getattr(prom, "_session", None)
        verify = getattr(session, "verify", True)
        cert = getattr(session, "cert", None)
        if verify is not True or cert is not None:
            key = None
            if isinstance(cert, tuple | list):
                cert, key = cert
            kwargs.setdefault(
                "tls",
                TLS(
                    ca_file=verify if isinstance(verify, str) else None,
                    client_cert=cert,
                    client_key=key,
                    verify=verify is not False,
                ),
            )
        auth = getattr(prom, "auth", None)
        if auth is not None:
            if not (isinstance(auth, tuple) and len(auth) == 2):
                raise ConfigurationError(
                    "from_connect reuses only a (user, password) auth tuple; "
                    "give auth= for other credentials"
                )
            kwargs.setdefault("auth", BasicAuth(str(auth[0]), str(auth[1])))
        kwargs.setdefault("headers", dict(prom.headers or {}))
        proxies = dict(getattr(session, "proxies", None) or {})
        scheme = str(prom.url).partition(":")[0].lower()
        if proxies.get(scheme):
            kwargs.setdefault("proxy", proxies[scheme])
        timeout = getattr(prom, "_timeout", None)
        if timeout is not None:
            kwargs.setdefault("timeout", float(timeout))
        return cls(prom.url, **kwargs)

    def __repr__(self) -> str:
        return f"PrometheusSource({self.url!r})"

    def close(self) -> None:
        """Close the kept-alive connections (a later request opens new ones)."""
        self._client.close()

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- Source protocol -----------------------------------------------------

    def info(self) -> EngineInfo:
        """The engine from ``/api/v1/status/buildinfo`` (cached), and its rule set.

        VictoriaMetrics 1.79 answers buildinfo with empty data; it is known by
        that and by its ``X-Server-Hostname`` header.
        """
        with self._info_lock:
            if self._info is None:
                reply = self._client.discover("/api/v1/status/buildinfo", {}, "buildinfo")
                self._info = detect_engine(reply.data, reply.headers, self._rules)
            return self._info

    def instant(self, expr: Expr, at: float) -> Instant:
        """Evaluate ``expr`` at ``at`` (unix seconds): a Vector, or a float for scalars."""
        promql = to_promql(expr)
        reply = self._client.query("/api/v1/query", {"query": promql, "time": _seconds(at)}, promql)
        notes = self._annotations(reply, promql)
        value: Any
        with _parsing(promql):
            kind, result = reply.data["resultType"], reply.data["result"]
            if kind == "vector":
                value = frames.parse_vector(result, notes)
            elif kind == "scalar":
                value = frames.parse_scalar(result)
            else:
                raise MalformedAnswer(f"result type {kind!r} is not an instant vector or scalar")
        return Instant(value, at, promql, notes)

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        """Evaluate ``expr`` every ``step`` seconds from ``window.start`` to its end.

        Split into step-aligned, non-overlapping pieces when a series would
        have more points than the server allows; pieces are fetched with up to
        4 in parallel and joined per series (a progress bar shows on a TTY).
        """
        promql = to_promql(expr)
        limit = self._max_points or max_points_for(self.info().kind)
        pieces = plan(window.start_s, window.end_s, step, limit)

        def fetch(start: float, end: float) -> Matrix:
            fields = {
                "query": promql,
                "start": _seconds(start),
                "end": _seconds(end),
                "step": _seconds(step),
            }
            reply = self._client.query("/api/v1/query_range", fields, promql)
            notes = self._annotations(reply, promql)
            if reply.matrix is not None:
                return replace(reply.matrix, annotations=notes)
            with _parsing(promql):
                if reply.data["resultType"] != "matrix":
                    raise MalformedAnswer(f"result type {reply.data['resultType']!r} is not matrix")
                return frames.parse_matrix(reply.data["result"], promql, notes)

        return fetch_pieces(fetch, pieces, promql)

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        """Every raw sample of ``selector`` with ``start <= t <= end`` (both ends included).

        Sent as the instant query ``selector[length + 1ms]`` at the window end,
        then trimmed to ``t >= start`` here: Prometheus 2.x closes range
        selectors at both ends, 3.x and VictoriaMetrics leave the start open,
        so the extra millisecond makes every engine return the start sample and
        the trim makes the answer the same on all of them.
        """
        promql = to_promql(Range(selector, round(window.seconds, 3) + LEFT_OPEN_MARGIN_S))
        fields = {"query": promql, "time": _seconds(window.end_s)}
        reply = self._client.query("/api/v1/query", fields, promql)
        self._annotations(reply, promql)
        start_ms = round(window.start_s * 1000)
        if reply.matrix is not None:
            return frames.raw_samples(reply.matrix, start_ms)
        with _parsing(promql):
            if reply.data["resultType"] != "matrix":
                raise MalformedAnswer(f"result type {reply.data['resultType']!r} is not matrix")
            return frames.parse_raw(reply.data["result"], start_ms)

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        """Label sets (``__name__`` included) of series with samples in ``window``."""
        promql = to_promql(selector)
        fields = [("match[]", promql), *self._span(window).items()]
        reply = self._client.query("/api/v1/series", fields, promql)
        with _parsing(promql):
            return tuple(Labels(one) for one in reply.data)

    def label_names(self, window: Window) -> tuple[str, ...]:
        """Label names present in ``window``, sorted."""
        reply = self._client.discover("/api/v1/labels", self._span(window), "label names")
        with _parsing("label names"):
            return tuple(sorted(str(name) for name in reply.data))

    def label_values(self, label: str, window: Window) -> tuple[str, ...]:
        """Values of ``label`` in ``window``, sorted (``__name__`` lists metric names)."""
        what = f"values of label {label}"
        reply = self._client.discover("/api/v1/label/{}/values", self._span(window), what, label)
        with _parsing(what):
            return tuple(sorted(str(value) for value in reply.data))

    def metadata(self, metric: str | None = None) -> tuple[Metadata, ...]:
        """Declared type, help and unit of ``metric`` (or of every metric), by metric name."""
        fields = {} if metric is None else {"metric": metric}
        reply = self._client.discover("/api/v1/metadata", fields, f"metadata {metric or ''}")
        with _parsing("metadata"):
            return tuple(
                Metadata(name, str(one["type"]), str(one["help"]), str(one.get("unit", "")))
                for name, entries in sorted(reply.data.items())
                for one in entries
            )

    # --- helpers ---------------------------------------------------------------

    @staticmethod
    def _span(window: Window) -> dict[str, str]:
        return {"start": _seconds(window.start_s), "end": _seconds(window.end_s)}

    def _annotations(self, reply: Reply, promql: str) -> tuple[Annotation, ...]:
        notes = [Annotation("server_warning", text) for text in reply.warnings]
        notes += [Annotation("server_info", text) for text in reply.infos]
        if reply.partial:
            if self._partial_answers is PartialAnswers.REFUSE:
                raise SourceUnavailable(
                    "the server answered with a partial response", promql=promql
                )
            notes.append(Annotation("partial_response", "the server answered with partial data"))
        return tuple(notes)


class _parsing:  # noqa: N801 - used as a lowercase context manager, like contextlib's
    """Turns a malformed success answer into SourceUnavailable: never a number from it."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is not None and isinstance(
            exc, KeyError | TypeError | ValueError | IndexError | AttributeError
        ):
            why = str(exc) if isinstance(exc, MalformedAnswer) else f"{type(exc).__name__}: {exc}"
            raise SourceUnavailable(f"malformed answer ({why})", promql=self._what) from exc


def _proxy_endpoint(proxy: str) -> Endpoint:
    hop, userinfo = parse_base_url(proxy)
    if hop.scheme != "http" or hop.prefix or userinfo is not None:
        raise ConfigurationError("proxy must be a plain http://host:port address")
    return hop


def detect_engine(data: Any, headers: Mapping[str, str], override: Rules | None) -> EngineInfo:
    """Which engine sent this buildinfo ``data`` (with response ``headers``)."""
    data = data if isinstance(data, dict) else {}
    version = data.get("version")
    application = str(data.get("application", "")).lower()
    major = _major(version)
    if "mimir" in application:
        rules = Rules.PROMETHEUS_2 if major is not None and major < 3 else Rules.PROMETHEUS_3
        return EngineInfo("mimir", version, override or rules)
    if not version:
        if "x-server-hostname" in headers or not data:
            return EngineInfo("victoriametrics", None, override or Rules.VICTORIAMETRICS)
        return EngineInfo("prometheus", None, override or Rules.PROMETHEUS_2)
    if major == 0:
        # Thanos reports its own 0.x version; 0.37 moved to the Prometheus 3 engine.
        minor = _major(str(version).split(".", 1)[1]) if "." in str(version) else None
        rules = Rules.PROMETHEUS_3 if minor is not None and minor >= 37 else Rules.PROMETHEUS_2
        return EngineInfo("thanos", version, override or rules)
    rules = Rules.PROMETHEUS_3 if major is not None and major >= 3 else Rules.PROMETHEUS_2
    return EngineInfo("prometheus", version, override or rules)


def _major(version: object) -> int | None:
    head = str(version or "").lstrip("v").split(".", 1)[0]
    return int(head) if head.isdigit() else None
