"""A lean HTTP/1.1 client for the chat streams of the HTTP backends.

Every LLM call of the agent loop is one streamed POST. Through httpx it crosses the
request and response models, the auth, redirect and cookie hooks and httpcore's pool:
CPU on every iteration for features a chat stream never uses (0.7 ms per call against
0.2 ms here, measured against the fake LLM server). This client does what such a
request needs: fixed headers and the body in one write, the answer parsed by h11, a
small pool of keep-alive connections, on asyncio (the event loop of anyio's asyncio
backend, and uvloop under uvicorn).

It serves plain ``http://`` servers reached without a proxy (:func:`lean_applies`);
anything else (``https://``, a proxy from the environment, credentials in the URL)
stays with httpx, which also does all the small requests (model lists, probes).

* A reused idle connection that the server had already closed (the write fails, or
  the connection ends before the first byte of an answer) is replaced by a fresh one
  and the request sent once more. Once a byte of the answer arrived there is no retry.
* A connection goes back to the pool only when its answer was read to the end. Any
  other exit (stop, timeout, error, cancellation) closes it: that is how the server
  learns to stop generating.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import cast

import anyio
import anyio.lowlevel
import h11
import httpx

from navi.llm.errors import IncompleteStream, LLMError, ServerUnreachable

__all__ = ["LeanClient", "LeanResponse", "lean_applies"]

# As httpx: a write that makes no progress for a minute is a dead server.
WRITE_TIMEOUT = 60.0
# As httpx: an idle connection older than this is not reused (servers close them).
KEEPALIVE_EXPIRY = 5.0
MAX_IDLE = 8
# Received bytes held for a reader that lags before the socket stops reading.
MAX_BUFFERED = 256 * 1024


try:
    USER_AGENT = f"navi/{importlib.metadata.version('navi')}".encode("ascii")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
    USER_AGENT = b"navi/dev"


def lean_applies(base_url: httpx.URL) -> bool:
    """Whether chat streams to ``base_url`` may take the lean path.

    Only plain HTTP without credentials in the URL, and only when httpx would not route
    the request through a proxy: httpx takes its proxies from ``urllib``'s reading of
    the environment, where only ``http_proxy`` and ``all_proxy`` apply to ``http://``
    (``no_proxy`` only ever exempts from those). Read once, when the backend is made,
    as httpx does.
    """
    if base_url.scheme != "http" or base_url.userinfo:
        return False
    proxies = urllib.request.getproxies()
    return not (proxies.get("http") or proxies.get("all"))


class _Connection(asyncio.Protocol):
    """One connection and its h11 state, as an asyncio protocol: what arrives waits for
    the one reader; a close is immediate (no await: nothing to shield when a cancelled
    stream closes it). Cheaper than anyio's socket stream, which pauses and resumes
    reading around every read and adds checkpoints to every write (0.05 ms a call)."""

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._received: list[bytes] = []
        self._buffered = 0
        self._reading_paused = False
        self._ended = False  # the server closed its side, or the connection is lost
        self._error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None  # while writing is paused

    @property
    def usable(self) -> bool:
        """Idle and still open, with nothing unexpected received meanwhile."""
        return not self._ended and not self._received

    # ------------------------------------------------------------ protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports do not derive from asyncio's classes.)
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._received.append(data)
        self._buffered += len(data)
        if self._buffered > MAX_BUFFERED and not self._reading_paused:
            # The reader is behind: let TCP push back on the server.
            assert self._transport is not None
            self._transport.pause_reading()
            self._reading_paused = True
        self._wake()

    def eof_received(self) -> None:
        self._ended = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._error = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ------------------------------------------------------------ used by the client

    async def send(self, data: bytes) -> None:
        """Write ``data``; wait only while the socket buffer is full (``WRITE_TIMEOUT``)."""
        if self._ended or self._transport is None:
            raise ConnectionResetError("the connection is closed")
        self._transport.write(data)
        if self._writable is not None:
            with anyio.fail_after(WRITE_TIMEOUT):
                while self._writable is not None:
                    await self._writable
            if self._ended:
                raise self._lost()

    async def receive(self) -> bytes:
        """All the bytes that arrived since the last call, waiting for some; ``b""``
        once the server closed its side. Raises ``OSError`` if the connection broke."""
        while not self._received:
            if self._ended:
                if self._error is not None:
                    raise self._lost()
                return b""
            waiter = self._waiter = self._loop.create_future()
            await waiter
        received, self._received = self._received, []
        self._buffered = 0
        if self._reading_paused:
            assert self._transport is not None
            self._reading_paused = False
            self._transport.resume_reading()
        return received[0] if len(received) == 1 else b"".join(received)

    def _lost(self) -> OSError:
        error = self._error
        if isinstance(error, OSError):
            return error
        return ConnectionResetError(f"the connection is closed{f' ({error})' if error else ''}")

    def close(self) -> None:
        """Close at once; unsent and unread bytes are dropped (the server sees it go)."""
        self._ended = True
        if self._transport is not None:
            self._transport.abort()


class LeanResponse:
    """The streamed answer: ``status_code``, ``headers`` (lowercase names), the body."""

    __slots__ = ("_conn", "_eof", "_url", "complete", "headers", "status_code")

    def __init__(self, conn: _Connection, event: h11.Response, url: str) -> None:
        self._conn = conn
        self._url = url
        self._eof = False
        self.complete = False
        self.status_code = event.status_code
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("latin-1")
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.headers = headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, one piece per network read that carried body bytes."""
        while not self.complete:
            data = await self._read()
            if data:
                yield data

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def _read(self) -> bytes:
        """The body bytes that the next network read completes; ``b""`` at the end."""
        conn = self._conn.h11
        parts: list[bytes | bytearray] = []
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise self._broken(exc) from exc
            if event is h11.NEED_DATA:
                if parts:
                    break
                await self._receive()
            elif type(event) is h11.Data:
                parts.append(event.data)
            elif type(event) is h11.EndOfMessage:
                self.complete = True
                break
            else:
                raise _bad_answer(self._url, f"unexpected {type(event).__name__}")
        return b"".join(parts)

    async def _receive(self) -> None:
        try:
            data = await self._conn.receive()
        except OSError as exc:
            detail = f"the connection dropped ({_describe(exc)})"
            raise IncompleteStream(detail, url=self._url) from exc
        self._eof = not data
        self._conn.h11.receive_data(data)

    def _broken(self, exc: h11.RemoteProtocolError) -> LLMError:
        if self._eof:
            return IncompleteStream(f"the connection dropped ({exc})", url=self._url)
        return _bad_answer(self._url, str(exc))


class LeanClient:
    """POSTs JSON bodies to one ``http://`` server and streams the answers back."""

    def __init__(self, base_url: httpx.URL, *, connect_timeout: float, api_key: str = "") -> None:
        self._host = base_url.host
        self._port = base_url.port or 80
        self._connect_timeout = connect_timeout
        headers = [
            (b"Host", base_url.netloc),
            (b"Accept", b"application/json"),
            (b"Content-Type", b"application/json"),
            (b"User-Agent", USER_AGENT),
        ]
        if api_key:
            headers.append((b"Authorization", f"Bearer {api_key}".encode()))
        self._headers = headers
        self._idle: list[_Connection] = []
        self._closed = False

    @asynccontextmanager
    async def stream(
        self,
        target: bytes,
        body: bytes,
        *,
        url: str,
        on_error_status: Callable[[int, bytes], LLMError],
    ) -> AsyncIterator[LeanResponse]:
        """POST ``body`` to ``target`` (a path) and hand over the streaming answer.

        A non-2xx answer is read in full and turned into an error by ``on_error_status``.
        """
        response: LeanResponse | None = None
        conn = self._take_idle()
        if conn is not None:
            response = await self._exchange(conn, target, body, url)
        if response is None:
            # No idle connection, or the server had closed it before answering (then
            # sending again is safe: a chat request has no side effect to repeat).
            conn = await self._connect(url)
            response = await self._exchange(conn, target, body, url)
            if response is None:
                raise IncompleteStream(
                    "the server closed the connection without answering", url=url
                )
        try:
            if response.status_code >= 400:
                raise on_error_status(response.status_code, await response.aread())
            yield response
        finally:
            self._release(response)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if idle:
            # Let the transports finish closing their sockets (a callback each).
            await anyio.lowlevel.checkpoint()

    async def _exchange(
        self, conn: _Connection, target: bytes, body: bytes, url: str
    ) -> LeanResponse | None:
        """Send the request, read the answer's head. ``None`` (the connection closed)
        when the connection ended before the first byte of an answer."""
        try:
            response = await self._request(conn, target, body, url)
        except BaseException:
            conn.close()
            raise
        if response is None:
            conn.close()
        return response

    async def _request(
        self, conn: _Connection, target: bytes, body: bytes, url: str
    ) -> LeanResponse | None:
        protocol = conn.h11
        headers = [*self._headers, (b"Content-Length", b"%d" % len(body))]
        head = protocol.send(h11.Request(method=b"POST", target=target, headers=headers))
        protocol.send_with_data_passthrough(h11.Data(data=body))
        protocol.send(h11.EndOfMessage())
        try:
            # One write: the server gets the request whole (h11 has passed the body
            # through untouched: with a Content-Length there is no framing to add).
            await conn.send((head or b"") + body)
        except TimeoutError as exc:
            raise ServerUnreachable(url, detail="WriteTimeout") from exc
        except OSError:
            return None
        received = False
        while True:
            try:
                event = protocol.next_event()
            except h11.RemoteProtocolError as exc:
                raise _bad_answer(url, str(exc)) from exc
            if event is h11.NEED_DATA:
                try:
                    data = await conn.receive()
                except OSError as exc:
                    if not received:
                        return None
                    detail = f"the connection dropped ({_describe(exc)})"
                    raise IncompleteStream(detail, url=url) from exc
                if not data and not received:
                    return None
                received = True
                protocol.receive_data(data)
            elif type(event) is h11.Response:
                return LeanResponse(conn, event, url)
            elif type(event) is not h11.InformationalResponse:
                raise _bad_answer(url, f"unexpected {type(event).__name__}")

    async def _connect(self, url: str) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(self._connect_timeout):
                _, conn = await loop.create_connection(_Connection, self._host, self._port)
        except TimeoutError as exc:
            raise ServerUnreachable(url, detail="ConnectTimeout") from exc
        except OSError as exc:
            raise ServerUnreachable(url, detail=_describe(exc, "ConnectError")) from exc
        return conn

    def _take_idle(self) -> _Connection | None:
        """The most recently used idle connection that is still usable, if any."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable and now - conn.idle_since < KEEPALIVE_EXPIRY:
                return conn
            conn.close()
        return None

    def _release(self, response: LeanResponse) -> None:
        """Its connection back to the pool if the answer was read to the end; else
        closed, which is what tells the server to stop generating."""
        conn = response._conn
        protocol = conn.h11
        if (
            protocol.their_state is h11.DONE
            and protocol.our_state is h11.DONE
            and not self._closed
            and len(self._idle) < MAX_IDLE
        ):
            protocol.start_next_cycle()
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()


def _bad_answer(url: str, detail: str) -> LLMError:
    return LLMError(f"The LLM server at {url} sent a malformed HTTP answer: {detail}")


def _describe(exc: BaseException, name: str = "") -> str:
    text = str(exc).strip()
    kind = name or type(exc).__name__
    return f"{kind}: {text}" if text else kind
