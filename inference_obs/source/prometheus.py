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
"""

from __future__ import annotations

import random
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from threading import Lock
from typing import Any

from inference_obs.engine.rules import Rules
from inference_obs.errors import Annotation, SourceUnavailable
from inference_obs.query import Expr, Range, Selector, to_promql
from inference_obs.samples import Labels, SampleSet, Window
from inference_obs.source import frames
from inference_obs.source.base import EngineInfo, Instant, Matrix, Metadata
from inference_obs.source.http import Client, Credentials, Reply, strip_userinfo
from inference_obs.source.ranges import fetch_pieces, max_points_for, plan

__all__ = ["PrometheusSource"]


def _seconds(value: float) -> str:
    # Both engines read float seconds and keep milliseconds.
    return f"{value:.3f}"


class PrometheusSource:
    """Read-only source over a Prometheus-compatible HTTP API.

    Parameters
    ----------
    url
        Base URL (``https://prom.example``, or with a path prefix). A
        ``user:password@`` in it is used as basic auth and stripped.
    token, token_env, token_file
        A bearer token, or the environment variable / file holding it (the
        file is re-read on every request, so rotated tokens work).
    basic_auth
        ``(user, password)``.
    headers
        Extra headers, e.g. ``{"X-Scope-OrgID": "tenant"}`` for Mimir.
    ca_file, client_cert
        CA bundle to verify the server; client certificate (path, or
        ``(cert, key)`` paths) for mutual TLS.
    tls
        A ready :class:`ssl.SSLContext` (overrides ``ca_file``/``client_cert``).
    timeout
        Seconds per request, whole body included.
    retries, backoff
        Retries after a transient failure (connection, timeout, 408, 429,
        5xx, invalid JSON) and the first backoff in seconds (doubling, with
        jitter); then :class:`~inference_obs.errors.SourceUnavailable`.
    fail_on_partial
        Raise on a partial response instead of annotating the result.
    rules
        Override the local rule set detected by :meth:`info`.
    max_points
        Points per series per request before a range query is split
        (default: 11,000 for Prometheus, 30,000 for VictoriaMetrics).
    rng, sleep
        Jitter source and sleep function (for deterministic tests).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_env: str | None = None,
        token_file: str | Path | None = None,
        basic_auth: tuple[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        ca_file: str | Path | None = None,
        client_cert: str | Path | tuple[str | Path, str | Path] | None = None,
        tls: ssl.SSLContext | None = None,
        proxies: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        fail_on_partial: bool = False,
        rules: Rules | None = None,
        max_points: int | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        clean, userinfo = strip_userinfo(url)
        if sum(x is not None for x in (token, token_env, token_file, basic_auth or userinfo)) > 1:
            raise ValueError("give one of token, token_env, token_file, basic_auth")
        credentials = Credentials(
            token=token,
            token_env=token_env,
            token_file=Path(token_file) if token_file is not None else None,
            basic_auth=basic_auth or userinfo,
        )
        if tls is None and (ca_file is not None or client_cert is not None):
            tls = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
            if isinstance(client_cert, tuple):
                tls.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
            elif client_cert is not None:
                tls.load_cert_chain(str(client_cert))
        self.url = clean
        self._client = Client(
            clean,
            credentials=credentials,
            headers=headers or {},
            tls=tls,
            proxies=proxies,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            rng=rng or random.Random(),
            sleep=sleep,
        )
        self._fail_on_partial = fail_on_partial
        self._rules = rules
        self._max_points = max_points
        self._info: EngineInfo | None = None
        self._info_lock = Lock()

    @classmethod
    def from_connect(cls, prom: Any, **kwargs: Any) -> PrometheusSource:
        """A source using a ``prometheus_api_client.PrometheusConnect``'s URL, headers,
        auth (a ``(user, password)`` tuple), TLS settings and proxies."""
        session = prom._session
        verify, cert = session.verify, session.cert
        tls: ssl.SSLContext | None = None
        if verify is False:
            tls = ssl.create_default_context()
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif isinstance(verify, str):
            tls = ssl.create_default_context(cafile=verify)
        if cert is not None:
            tls = tls or ssl.create_default_context()
            pair = (cert,) if isinstance(cert, str) else tuple(cert)
            tls.load_cert_chain(*pair)
        auth = prom.auth
        if auth is not None and not isinstance(auth, tuple):
            raise TypeError("only a (user, password) auth tuple can be reused")
        kwargs.setdefault("headers", dict(prom.headers or {}))
        kwargs.setdefault("basic_auth", auth)
        kwargs.setdefault("tls", tls)
        kwargs.setdefault("proxies", dict(session.proxies) or None)
        if prom._timeout is not None:
            kwargs.setdefault("timeout", float(prom._timeout))
        return cls(prom.url, **kwargs)

    def __repr__(self) -> str:
        return f"PrometheusSource({self.url!r})"

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
                raise TypeError(f"result type {kind!r} is not an instant vector or scalar")
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
                    raise TypeError(f"result type {reply.data['resultType']!r} is not matrix")
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
        promql = to_promql(Range(selector, round(window.seconds, 3) + 0.001))
        fields = {"query": promql, "time": _seconds(window.end_s)}
        reply = self._client.query("/api/v1/query", fields, promql)
        self._annotations(reply, promql)
        start_ms = round(window.start_s * 1000)
        if reply.matrix is not None:
            return frames.raw_samples(reply.matrix, start_ms)
        with _parsing(promql):
            if reply.data["resultType"] != "matrix":
                raise TypeError(f"result type {reply.data['resultType']!r} is not matrix")
            return frames.parse_raw(reply.data["result"], start_ms)

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        """Label sets (``__name__`` included) of series with samples in ``window``."""
        promql = to_promql(selector)
        fields = [("match[]", promql), *self._span(window).items()]
        reply = self._client.discover("/api/v1/series", fields, promql)
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
            if self._fail_on_partial:
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
            raise SourceUnavailable(
                f"malformed answer ({type(exc).__name__}: {exc})", promql=self._what
            ) from exc


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
