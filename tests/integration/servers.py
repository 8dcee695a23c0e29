"""Real Prometheus and VictoriaMetrics servers for integration tests.

Servers bind 127.0.0.1 only, every wait is bounded, and ``stop()`` always
reaps the process (SIGTERM, then SIGKILL). HTTP goes through urllib only, and
the remote-write body (protobuf + snappy) is encoded by hand so the tests need
no extra dependency.

Samples are passed to the write paths as ``(labels, [(t_ms, value), ...])``
with the metric name in ``labels["__name__"]`` and integer-millisecond
timestamps, which is what both servers store.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import pytest

__all__ = [
    "PrometheusFactory",
    "PrometheusServer",
    "SeriesSamples",
    "VictoriaMetricsServer",
    "encode_write_request",
    "free_port",
    "require_binary",
    "snappy_literal_block",
    "write_series",
]

SeriesSamples = tuple[Mapping[str, str], Sequence[tuple[int, float]]]
"""Labels (``__name__`` included) and ``(timestamp_ms, value)`` pairs in time order."""


class PrometheusFactory(Protocol):
    """Starts a :class:`PrometheusServer` backfilled from OpenMetrics text (or empty)."""

    def __call__(self, openmetrics: str | None = None) -> PrometheusServer: ...


# Both servers are ready within about 0.2 s; 30 s only guards against a hung start.
START_TIMEOUT_S = 30.0
# SIGTERM shutdown takes well under a second; after this we SIGKILL.
STOP_TIMEOUT_S = 10.0
# Every request here is tiny; a hung server should fail the test, not stall it.
HTTP_TIMEOUT_S = 10.0
# promtool converts a few samples in well under a second.
PROMTOOL_TIMEOUT_S = 60.0
# How long imported VictoriaMetrics rows may take to become searchable.
IMPORT_VISIBLE_TIMEOUT_S = 10.0
# Enough of a server log to see why it failed, short enough to read in a report.
_LOG_TAIL_CHARS = 4000
# free_port() closes its socket before the server binds; retry if someone took it.
_PORT_ATTEMPTS = 3


def require_binary(name: str) -> str:
    """Return the path of executable ``name``, or fail the test (never skip) naming the fix."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH; run scripts/check, which installs the Debian "
            "packages prometheus and victoria-metrics",
            pytrace=False,
        )
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _PortTaken(RuntimeError):
    """The server exited at start because its port was taken meanwhile."""


class _Server:
    """A server process plus the Prometheus-compatible query API both servers share."""

    name = "server"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path = workdir / f"{self.name}.log"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def _start(self, argv_for_port: Callable[[int], list[str]], ready_path: str) -> None:
        """Start ``argv_for_port(port)`` and wait until ``ready_path`` answers 200."""
        for _ in range(_PORT_ATTEMPTS):
            self.port = free_port()
            try:
                self._launch(argv_for_port(self.port), ready_path)
            except _PortTaken:
                continue
            return
        raise RuntimeError(f"{self.name}: no free port after {_PORT_ATTEMPTS} attempts")

    def _launch(self, argv: list[str], ready_path: str) -> None:
        with self._log_path.open("ab") as log:
            # The child keeps its own copy of the descriptor; ours can close now.
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while True:
                code = self._proc.poll()
                if code is not None:
                    tail = self.log_tail()
                    if "address already in use" in tail:
                        raise _PortTaken(tail)
                    raise RuntimeError(f"{self.name} exited with code {code} at start:\n{tail}")
                if self._answers(ready_path):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.name} not ready within {START_TIMEOUT_S:g} s:\n{self.log_tail()}"
                    )
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def _answers(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=1.0) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError as exc:
            exc.close()
            return False
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self) -> str:
        """The last few thousand characters of the server's combined stdout/stderr."""
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return text[-_LOG_TAIL_CHARS:]

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Terminate the process and wait for it; kill it if it lingers. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- HTTP API -----------------------------------------------------------

    def query(self, promql: str, time: float) -> dict[str, Any]:
        """Run an instant query at ``time`` (unix seconds) and return the API's ``data``.

        Raises
        ------
        AssertionError
            If the server does not answer ``status: success``; carries its error text.
        """
        return self._api("/api/v1/query", {"query": promql, "time": _seconds_param(time)}, promql)

    def query_stats(self, promql: str, time: float) -> float:
        """The server's own execution time (s) of an instant query, from ``stats=all``."""
        fields = {"query": promql, "time": _seconds_param(time), "stats": "all"}
        data = self._api("/api/v1/query", fields, promql)
        seconds: float = data["stats"]["timings"]["execTotalTime"]
        return seconds

    def query_range(self, promql: str, start: float, end: float, step: float) -> dict[str, Any]:
        """Run a range query (unix seconds; ``step`` in seconds) and return ``data``."""
        fields = {
            "query": promql,
            "start": _seconds_param(start),
            "end": _seconds_param(end),
            "step": _seconds_param(step),
        }
        return self._api("/api/v1/query_range", fields, promql)

    def label_names(self, start: float, end: float) -> list[str]:
        """Label names of series with samples in ``[start, end]`` (unix seconds)."""
        fields = {"start": _seconds_param(start), "end": _seconds_param(end)}
        names: list[str] = self._api("/api/v1/labels", fields, "labels", method="GET")  # type: ignore[assignment]
        return names

    def label_values(self, label: str, start: float, end: float) -> list[str]:
        """Values of ``label`` on series with samples in ``[start, end]`` (unix seconds)."""
        fields = {"start": _seconds_param(start), "end": _seconds_param(end)}
        path = f"/api/v1/label/{urllib.parse.quote(label)}/values"
        values: list[str] = self._api(path, fields, f"label {label}", method="GET")  # type: ignore[assignment]
        return values

    def _api(
        self, path: str, fields: Mapping[str, str], promql: str, method: str = "POST"
    ) -> dict[str, Any]:
        encoded = urllib.parse.urlencode(fields)
        if method == "GET":
            request = urllib.request.Request(f"{self.base_url}{path}?{encoded}")
        else:
            request = urllib.request.Request(
                self.base_url + path,
                data=encoded.encode("utf-8"),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
                method="POST",
            )
        status, text = _send(request)
        try:
            envelope = json.loads(text)
        except json.JSONDecodeError:
            envelope = None
        if not isinstance(envelope, dict) or envelope.get("status") != "success":
            raise AssertionError(f"{self.name} {path} HTTP {status} for {promql!r}: {text[:2000]}")
        data: dict[str, Any] = envelope["data"]
        return data


class PrometheusServer(_Server):
    """Prometheus on a TSDB backfilled from OpenMetrics text, remote write enabled.

    Parameters
    ----------
    workdir
        An empty directory for the input file, the TSDB, the config and the log.
    openmetrics
        OpenMetrics text (ending ``# EOF``) to backfill with promtool before
        start, or ``None`` for an empty TSDB.
    prometheus, promtool
        Paths of the binaries.

    Notes
    -----
    Remote write goes to the TSDB head, which refuses samples older than about
    an hour before its newest sample and, once backfilled blocks exist, older
    than their end ("out of bounds"): remote-write recent or later data.
    """

    name = "prometheus"

    def __init__(
        self,
        workdir: Path,
        openmetrics: str | None = None,
        *,
        prometheus: str = "prometheus",
        promtool: str = "promtool",
    ) -> None:
        super().__init__(workdir)
        data = workdir / "data"
        data.mkdir(parents=True)
        self.promtool_output = ""
        """What promtool printed while backfilling (the blocks it wrote)."""
        if openmetrics is not None:
            source = workdir / "input.om"
            source.write_text(openmetrics, encoding="utf-8")
            self.promtool_output = _run_promtool(promtool, source, data)
        config = workdir / "prometheus.yml"
        # No scrape configs: every sample comes from backfill or remote write.
        config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n", encoding="utf-8")

        def argv(port: int) -> list[str]:
            return [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                # Retention is relative to the newest block, so old test times survive.
                "--storage.tsdb.retention.time=100y",
                "--web.enable-remote-write-receiver",
            ]

        self._start(argv, "/-/ready")

    def remote_write(self, series: Sequence[SeriesSamples]) -> None:
        """Send samples with the remote-write 1.0 protocol (protobuf + snappy).

        Raises
        ------
        AssertionError
            If Prometheus does not answer 2xx; carries its error text.
        """
        body = snappy_literal_block(encode_write_request(series))
        request = urllib.request.Request(
            self.base_url + "/api/v1/write",
            data=body,
            headers={
                "Content-Encoding": "snappy",
                "Content-Type": "application/x-protobuf",
                "X-Prometheus-Remote-Write-Version": "0.1.0",
            },
            method="POST",
        )
        status, text = _send(request)
        if not 200 <= status < 300:
            raise AssertionError(f"prometheus remote write HTTP {status}: {text[:2000]}")


class VictoriaMetricsServer(_Server):
    """Single-node VictoriaMetrics with caching and the 30 s latency offset off.

    Parameters
    ----------
    workdir
        An empty directory for the storage and the log.
    binary
        Path of ``victoria-metrics``.

    Notes
    -----
    Retention (100y here) is counted back from the wall clock, and VM also
    refuses samples too far in the future: import timestamps near now.
    """

    name = "victoria-metrics"

    def __init__(self, workdir: Path, *, binary: str = "victoria-metrics") -> None:
        super().__init__(workdir)
        storage = workdir / "storage"

        def argv(port: int) -> list[str]:
            return [
                binary,
                f"-httpListenAddr=127.0.0.1:{port}",
                f"-storageDataPath={storage}",
                "-retentionPeriod=100y",
                # Backfilled data must be visible at once, not after cache expiry.
                "-search.disableCache",
                # The default 30 s hides the newest samples from queries.
                "-search.latencyOffset=0s",
            ]

        self._start(argv, "/health")

    def import_series(self, series: Sequence[SeriesSamples]) -> None:
        """Import samples via ``/api/v1/import`` (JSON lines), flush, and check they landed.

        JSON carries any Unicode label value exactly. After the flush the
        samples are queryable immediately.

        Raises
        ------
        AssertionError
            If VM refuses the request, or if any non-NaN sample is missing
            from ``/api/v1/export`` afterwards: VM answers 204 even when it
            skips a line or a sample outside retention, and only logs it.

        Notes
        -----
        VM 1.79 accepts NaN samples but never returns them (queries and
        export alike), so they are not checked. Values come back with about
        12 significant digits, not bit for bit.
        """
        lines = []
        for labels, samples in series:
            metric = json.dumps(dict(labels), ensure_ascii=False)
            values = ",".join(_vm_number(v) for _, v in samples)
            stamps = ",".join(str(int(t)) for t, _ in samples)
            lines.append(f'{{"metric":{metric},"values":[{values}],"timestamps":[{stamps}]}}')
        body = ("\n".join(lines) + "\n").encode("utf-8")
        request = urllib.request.Request(self.base_url + "/api/v1/import", data=body, method="POST")
        status, text = _send(request)
        if not 200 <= status < 300:
            raise AssertionError(f"victoria-metrics import HTTP {status}: {text[:2000]}")
        # Imported rows reach the searchable storage asynchronously (about 0.4 s
        # seen on an idle machine), even after a forced flush: poll, bounded.
        deadline = time.monotonic() + IMPORT_VISIBLE_TIMEOUT_S
        while True:
            self.flush()
            missing = self._missing(series)
            if missing is None:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{missing}\n{self.log_tail()}")
            time.sleep(0.1)

    def flush(self) -> None:
        """Make recently ingested samples searchable (``/internal/force_flush``)."""
        request = urllib.request.Request(self.base_url + "/internal/force_flush")
        status, text = _send(request)
        if status != 200:
            raise AssertionError(f"victoria-metrics force_flush HTTP {status}: {text[:2000]}")

    def export(self, metric_name: str) -> dict[frozenset[tuple[str, str]], set[int]]:
        """Raw sample timestamps (ms) of every series named ``metric_name``, by label set."""
        selector = "{__name__=" + json.dumps(metric_name, ensure_ascii=False) + "}"
        body = urllib.parse.urlencode({"match[]": selector}).encode("utf-8")
        request = urllib.request.Request(self.base_url + "/api/v1/export", data=body, method="POST")
        status, text = _send(request)
        if status != 200:
            raise AssertionError(f"victoria-metrics export HTTP {status}: {text[:2000]}")
        stored: dict[frozenset[tuple[str, str]], set[int]] = {}
        decoder = json.JSONDecoder()
        # Not splitlines(): that also splits at U+2028, U+0085 and others, which
        # JSON strings may hold raw; a raw newline cannot occur inside one.
        for line in filter(None, text.split("\n")):
            # Export writes +Inf/-Inf/NaN bare, which is not JSON; read the
            # metric and the timestamps and step over the values.
            metric, end = decoder.raw_decode(line, line.index("{", 1))
            stamps, _ = decoder.raw_decode(line, line.index('"timestamps":', end) + 13)
            stored.setdefault(frozenset(metric.items()), set()).update(stamps)
        return stored

    def _missing(self, series: Sequence[SeriesSamples]) -> str | None:
        """Describe the first series whose samples are not all stored yet, if any."""
        by_name: dict[str, dict[frozenset[tuple[str, str]], set[int]]] = {}
        for labels, samples in series:
            wanted = by_name.setdefault(labels["__name__"], {})
            # VM, like Prometheus, stores a label with an empty value as absent.
            key = frozenset((k, v) for k, v in labels.items() if v)
            wanted.setdefault(key, set()).update(int(t) for t, v in samples if not math.isnan(v))
        for name, wanted in by_name.items():
            stored = self.export(name)
            for key, stamps in wanted.items():
                missing = sorted(stamps - stored.get(key, set()))
                if missing:
                    return (
                        f"victoria-metrics did not store {len(missing)} samples of "
                        f"{dict(key)!r} (first at {missing[0]} ms)"
                    )
        return None


def _vm_number(value: float) -> str:
    # VM 1.79's JSON reader takes bare NaN, Inf and -Inf tokens (not JSON, not
    # Python's "Infinity"); a quoted string makes it skip the whole line.
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _seconds_param(seconds: float) -> str:
    # Both servers read float seconds and round to the millisecond (checked at
    # .001 steps); three decimals name it without float noise.
    return f"{seconds:.3f}"


def _send(request: urllib.request.Request) -> tuple[int, str]:
    """Send ``request``; return (HTTP status, body text) for success and HTTP errors alike."""
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as resp:
            return int(resp.status), resp.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode("utf-8", errors="replace")


def _run_promtool(promtool: str, source: Path, data: Path) -> str:
    argv = [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=PROMTOOL_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(
            f"promtool exited with code {done.returncode} on {source}:\n{output[-_LOG_TAIL_CHARS:]}"
        )
    return output


# --- remote write encoding ----------------------------------------------------
# prometheus/prompb/remote.proto and types.proto, restated:
#   WriteRequest { repeated TimeSeries timeseries = 1; }
#   TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
#   Label        { string name = 1; string value = 2; }
#   Sample       { double value = 1; int64 timestamp = 2; }
_VARINT, _FIXED64, _BYTES = 0, 1, 2


def _varint(n: int) -> bytes:
    # int64 fields encode negatives as their 64-bit two's complement (10 bytes).
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(payload)) + payload


def encode_write_request(series: Sequence[SeriesSamples]) -> bytes:
    """Encode a remote-write ``WriteRequest`` protobuf; labels sorted by name.

    Parameters
    ----------
    series
        Labels (``__name__`` included) and ``(timestamp_ms, value)`` pairs.
    """
    out = bytearray()
    for labels, samples in series:
        body = bytearray()
        for name, text in sorted(labels.items()):
            label = _length_delimited(1, name.encode("utf-8"))
            label += _length_delimited(2, text.encode("utf-8"))
            body += _length_delimited(1, label)
        for t_ms, value in samples:
            sample = _key(1, _FIXED64) + struct.pack("<d", value)
            sample += _key(2, _VARINT) + _varint(t_ms)
            body += _length_delimited(2, sample)
        out += _length_delimited(1, bytes(body))
    return bytes(out)


# A snappy literal's length-1 fits in the tag byte below 60; tag values 60 and
# 61 say it follows in 1 or 2 little-endian bytes. 64 KiB chunks need at most 2.
_SNAPPY_CHUNK = 1 << 16


def snappy_literal_block(data: bytes) -> bytes:
    """Wrap ``data`` in a valid snappy block made only of literals (no compression).

    The block format (not the framed one) is what remote write uses: the
    uncompressed length as a varint, then elements; a literal element is a tag
    byte with low bits ``00`` followed by its bytes.
    """
    out = bytearray(_varint(len(data)))
    for start in range(0, len(data), _SNAPPY_CHUNK):
        chunk = data[start : start + _SNAPPY_CHUNK]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 1 << 8:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + n.to_bytes(2, "little")
        out += chunk
    return bytes(out)


def write_series(
    store: PrometheusServer | VictoriaMetricsServer, series: Sequence[SeriesSamples]
) -> None:
    """Write ``series`` into either store, exact for any label value: remote write into a
    Prometheus (samples recent enough for its head), JSON import into VictoriaMetrics."""
    if isinstance(store, PrometheusServer):
        store.remote_write(series)
    else:
        store.import_series(series)
