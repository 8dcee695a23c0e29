"""A slow link on 127.0.0.1: a TCP relay that delays every chunk by a fixed time each way.

:class:`LatencyRelay` listens on a free port and relays each connection to an
upstream server, holding every chunk it reads for ``delay_s`` before writing
it on, in both directions, in order. A chunk is delayed from when it arrived,
not from when the one before it left, so the relay adds latency, not a
bandwidth limit: a request and its answer take ``2 * delay_s`` longer than on
the loopback, whatever their size. Connections stay open as long as the
client keeps them (keep-alive works as on a real link). With ``handshake``
(the default) a new connection's first bytes wait one more round trip, what
TCP's handshake costs on a real link before a client can send anything.

It counts connections and HTTP requests (from the request lines and
``Content-Length`` of what clients send; the client sends no chunked
bodies), so a runner can tell how many requests went over how many
connections. It is bounded: at most ``max_connections`` at once (more wait
to be accepted), at most ``QUEUE_CHUNKS`` chunks in flight per direction,
and it stops by itself after ``lifetime_s`` if nobody closed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

__all__ = ["LatencyRelay"]

# Chunks read ahead per direction and connection: 256 x 64 KiB = 16 MiB at most.
QUEUE_CHUNKS = 256
CHUNK_BYTES = 1 << 16
# A relay nobody closes (a crashed runner) stops after an hour.
LIFETIME_S = 3600.0
# Enough for a client's parallel requests plus a margin.
MAX_CONNECTIONS = 64
# Closing waits this long for the relay's thread.
CLOSE_TIMEOUT_S = 5.0


@dataclass
class _Requests:
    """Finds request boundaries in what a client sends: request line, headers, body."""

    buffer: bytearray = field(default_factory=bytearray)
    body_left: int = 0
    count: int = 0

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if self.body_left:
                taken = min(self.body_left, len(self.buffer))
                del self.buffer[:taken]
                self.body_left -= taken
                if self.body_left:
                    return
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            del self.buffer[: end + 4]
            self.count += 1
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    self.body_left = int(value.strip())


class LatencyRelay:
    """Relays ``upstream`` (an ``http://host:port`` URL) with ``delay_s`` added each way.

    ``url`` is where clients go (the upstream's path kept). Use it with
    :func:`contextlib.closing`, or as a context manager.

    Parameters
    ----------
    upstream
        The server to relay to, ``http://127.0.0.1:PORT`` (a path is kept in ``url``).
    delay_s
        Seconds each chunk is held, in each direction (one way's latency).
    handshake
        Whether a new connection's first bytes wait one more round trip
        (``2 * delay_s``), as TCP's handshake makes them on a real link.
    max_connections, lifetime_s
        Connections relayed at once, and when the relay stops by itself.
    """

    def __init__(
        self,
        upstream: str,
        delay_s: float,
        *,
        handshake: bool = True,
        max_connections: int = MAX_CONNECTIONS,
        lifetime_s: float = LIFETIME_S,
    ) -> None:
        parts = urllib.parse.urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self._host, self._port, self._path = parts.hostname, parts.port, parts.path.rstrip("/")
        self.delay_s = delay_s
        self.handshake = handshake
        self.connections = 0
        """Connections accepted so far."""
        self._requests: list[_Requests] = []
        self._lifetime_s = lifetime_s
        self._limit = max_connections
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._port_bound = 0
        self._thread = threading.Thread(target=self._run, name="latency-relay", daemon=True)
        self._thread.start()
        if not self._ready.wait(CLOSE_TIMEOUT_S):
            raise RuntimeError("the latency relay did not start")
        self.url = f"http://127.0.0.1:{self._port_bound}{self._path}"

    @property
    def requests(self) -> int:
        """HTTP requests clients have sent so far."""
        return sum(one.count for one in self._requests)

    def reset(self) -> None:
        """Forget the counts (connections open now keep being counted from zero)."""
        self.connections = 0
        for one in self._requests:
            one.count = 0

    def close(self) -> None:
        """Stop relaying (open connections are cut) and wait for the relay's thread."""
        if self._thread.is_alive() and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(CLOSE_TIMEOUT_S)

    def __enter__(self) -> LatencyRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        slots = asyncio.Semaphore(self._limit)
        relaying: set[asyncio.Future[None]] = set()  # one per open connection

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            this = asyncio.current_task()
            assert this is not None
            relaying.add(this)
            try:
                async with slots:
                    await self._relay(reader, writer)
            except asyncio.CancelledError:
                pass  # closing: Python 3.11's stream callback would log it as cancelled
            finally:
                relaying.discard(this)

        server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        self._port_bound = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self._lifetime_s)
            server.close()
            for connection in list(relaying):
                connection.cancel()
            await asyncio.gather(*relaying, return_exceptions=True)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        opened = time.monotonic()
        self.connections += 1
        requests = _Requests()
        self._requests.append(requests)
        try:
            server_r, server_w = await asyncio.open_connection(self._host, self._port)
        except OSError:
            client_w.close()
            return
        # A new connection's first bytes reach the server after the handshake's round trip.
        earliest = opened + 2 * self.delay_s if self.handshake else opened
        pumps = [
            asyncio.create_task(self._pump(client_r, server_w, earliest, requests)),
            asyncio.create_task(self._pump(server_r, client_w, opened, None)),
        ]
        try:
            await asyncio.gather(*pumps)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_w, server_w):
                writer.close()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        earliest: float,
        requests: _Requests | None,
    ) -> None:
        """Copy ``reader`` to ``writer``, each chunk written ``delay_s`` after it arrived."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE_CHUNKS)

        async def read() -> None:
            while True:
                try:
                    chunk = await reader.read(CHUNK_BYTES)
                except OSError:
                    chunk = b""
                if chunk and requests is not None:
                    requests.feed(chunk)
                await queue.put((max(time.monotonic(), earliest) + self.delay_s, chunk))
                if not chunk:
                    return

        reading = asyncio.create_task(read())
        try:
            while True:
                due, chunk = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not chunk:  # the other side closed its half: close ours
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(chunk)
                await writer.drain()
        except OSError:
            return
        finally:
            reading.cancel()
