"""A lean HTTP/1.1 client for the chat streams of the HTTP backends.

Every LLM call of the agent loop is one streamed POST. Through httpx it crosses the
request and response models, the auth, redirect and cookie hooks and httpcore's pool:
CPU on every iteration for features a chat stream never uses (0.7 ms per call against
0.1 ms here, measured against the fake LLM server). This client does what such a
request needs: fixed headers and the body in one write, the answer parsed by llhttp
(``httptools``, the C parser uvicorn uses) as it arrives, a small pool of keep-alive
connections, on asyncio (the event loop of anyio's asyncio backend, and uvloop under
uvicorn).

It serves plain ``http://`` servers reached without a proxy (:func:`lean_applies`);
anything else (``https://``, a proxy from the environment, credentials in the URL)
stays with httpx, which also does all the small requests (model lists, probes).

* A reused idle connection that the server had already closed (the write fails, or
  the connection ends before the first byte of an answer) is replaced by a fresh one
  and the request sent once more. Once a byte of the answer arrived there is no retry.
* A connection goes back to the pool only when its answer was read to the end and the
  server did not ask to close it. Any other exit (stop, timeout, error, cancellation)
  closes it: that is how the server learns to stop generating.
* Stop and timeouts come from the stream's :class:`~navi.llm.watchdog.Watchdog` when
  one is given: the connect, the write and every wait for the answer are bound to it
  and end with :class:`~navi.llm.watchdog.StreamInterrupted` when it fires.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
import urllib.request
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.lowlevel
import httpx

from navi.llm.errors import IncompleteStream, LLMError, ServerUnreachable
from navi.llm.lean_conn import Connection, describe
from navi.llm.watchdog import StreamInterrupted, Watchdog

__all__ = ["LeanClient", "LeanResponse", "LeanStream", "cut_lines", "lean_applies"]

# As httpx: an idle connection older than this is not reused (servers close them).
KEEPALIVE_EXPIRY = 5.0
MAX_IDLE = 8


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


def cut_lines(tail: bytes, data: bytes) -> tuple[bytes, bytes]:
    """The whole lines of ``tail + data`` (``b""`` if none) and what follows them."""
    cut = data.rfind(b"\n")
    if cut < 0:
        return b"", tail + data
    # (A full-length slice of bytes is the object itself: no copy on the fast path.)
    return (tail + data[: cut + 1] if tail else data[: cut + 1]), data[cut + 1 :]


class LeanResponse:
    """The streamed answer: ``status_code``, ``headers`` (lowercase names), the body."""

    __slots__ = ("_conn", "_url", "complete", "headers", "status_code")

    def __init__(self, conn: Connection, url: str) -> None:
        self._conn = conn
        self._url = url
        self.complete = False
        self.status_code = conn.status_code
        self.headers = conn.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, one piece per network read that carried body bytes (all the
        pieces parsed since the last one); ``complete`` is set with the last piece."""
        conn = self._conn
        url = self._url
        while not self.complete:
            # (Inline rather than a coroutine per read: this runs once per read of
            # every LLM call.)
            while not conn.body and not conn.complete:
                await conn.wait(url)
            self.complete = conn.complete
            data = conn.take_body()
            if data:
                yield data

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def line_blocks(self) -> AsyncIterator[bytes]:
        """:func:`navi.llm.http.line_blocks` of this body, reading it itself: one
        async generator fewer on every read of every LLM call."""
        conn = self._conn
        url = self._url
        tail = b""
        while not self.complete:
            while not conn.body and not conn.complete:
                await conn.wait(url)
            self.complete = conn.complete
            data = conn.take_body()
            if data:
                block, tail = cut_lines(tail, data)
                yield block
        if tail.strip():
            yield tail + b"\n"


class LeanStream:
    """``async with client.stream(...) as response``: a class rather than a
    generator-based context manager, which would cost an async generator and its
    bookkeeping on every LLM call."""

    __slots__ = ("_client", "_open", "_response", "_watchdog")

    def __init__(
        self,
        client: LeanClient,
        target: bytes,
        body: bytes,
        url: str,
        on_error_status: Callable[[int, bytes], LLMError],
        watchdog: Watchdog | None,
    ) -> None:
        self._client = client
        self._watchdog = watchdog
        self._open = (target, body, url, on_error_status)
        self._response: LeanResponse | None = None

    async def __aenter__(self) -> LeanResponse:
        target, body, url, on_error_status = self._open
        self._response = await self._client._open(
            target, body, url, on_error_status, self._watchdog
        )
        return self._response

    async def __aexit__(self, *exc_info: object) -> None:
        response, self._response = self._response, None
        if response is not None:
            self._client._done(response, self._watchdog)


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
        for name, value in headers:
            if any(c in value for c in (b"\r", b"\n", b"\0")):
                # It would end the header and start another (the target is safe: httpx
                # has percent-encoded the URL's path).
                raise ValueError(f"invalid {name.decode()} header: a line break or NUL")
        # Everything of a request's head but the target and the body's length.
        self._headers = b"".join(b"%b: %b\r\n" % header for header in headers)
        self._idle: list[Connection] = []
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def watchdog(self) -> Watchdog:
        """A watchdog for one stream of this client: pass it to :meth:`stream` and to
        the guard. On the loop of the last one, looked up again only when that loop no
        longer runs (asking asyncio for the running loop costs a ``getpid`` system call
        on Python 3.11)."""
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        return Watchdog(loop)

    def stream(
        self,
        target: bytes,
        body: bytes,
        *,
        url: str,
        on_error_status: Callable[[int, bytes], LLMError],
        watchdog: Watchdog | None = None,
    ) -> LeanStream:
        """POST ``body`` to ``target`` (a path) and hand over the streaming answer, as
        ``async with client.stream(...) as response``.

        A non-2xx answer is read in full and turned into an error by ``on_error_status``.
        With a ``watchdog``, every wait until the block is left is bound to it.
        """
        return LeanStream(self, target, body, url, on_error_status, watchdog)

    async def _open(
        self,
        target: bytes,
        body: bytes,
        url: str,
        on_error_status: Callable[[int, bytes], LLMError],
        watchdog: Watchdog | None,
    ) -> LeanResponse:
        head = b"POST %b HTTP/1.1\r\n%bContent-Length: %d\r\n\r\n"
        request = head % (target, self._headers, len(body)) + body
        response: LeanResponse | None = None
        conn = self._take_idle()
        if conn is not None:
            response = await self._exchange(conn, request, url, watchdog)
        if response is None:
            # No idle connection, or the server had closed it before answering (then
            # sending again is safe: a chat request has no side effect to repeat).
            conn = await self._connect(url, watchdog)
            response = await self._exchange(conn, request, url, watchdog)
            if response is None:
                raise IncompleteStream(
                    "the server closed the connection without answering", url=url
                )
        if response.status_code >= 400:
            try:
                raise on_error_status(response.status_code, await response.aread())
            finally:
                self._done(response, watchdog)
        return response

    def _done(self, response: LeanResponse, watchdog: Watchdog | None) -> None:
        if watchdog is not None:
            # The connection may serve another stream from now on.
            watchdog.watch(None)
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
        self, conn: Connection, request: bytes, url: str, watchdog: Watchdog | None
    ) -> LeanResponse | None:
        """Send the request, read the answer's head. ``None`` (the connection closed)
        when the connection ended before the first byte of an answer."""
        try:
            response = await self._request(conn, request, url, watchdog)
        except BaseException:
            conn.close()
            raise
        if response is None:
            conn.close()
        return response

    @staticmethod
    async def _request(
        conn: Connection, request: bytes, url: str, watchdog: Watchdog | None
    ) -> LeanResponse | None:
        conn.expect_answer()
        if watchdog is not None:
            # (After expect_answer, which clears the last answer's interruption.)
            watchdog.watch(conn.interrupt)
        try:
            # One write: the server gets the request whole.
            await conn.send(request)
        except TimeoutError as exc:
            raise ServerUnreachable(url, detail="WriteTimeout") from exc
        except OSError:
            return None
        while not conn.head:
            if conn.ended and not conn.answered:
                return None
            await conn.wait(url)
        return LeanResponse(conn, url)

    async def _connect(self, url: str, watchdog: Watchdog | None) -> Connection:
        loop = asyncio.get_running_loop()
        conn: Connection | None = None
        try:
            with anyio.fail_after(self._connect_timeout) as scope:
                if watchdog is not None:
                    # (A new connection is rare enough for a cancel scope.)
                    watchdog.watch(scope.cancel)
                _, conn = await loop.create_connection(Connection, self._host, self._port)
        except TimeoutError as exc:
            raise ServerUnreachable(url, detail="ConnectTimeout") from exc
        except OSError as exc:
            raise ServerUnreachable(url, detail=describe(exc, "ConnectError")) from exc
        if watchdog is not None and watchdog.fired:
            # A stop or the first-chunk timeout cut the connect short (or came as it
            # succeeded).
            if conn is not None:
                conn.close()
            raise StreamInterrupted
        assert conn is not None
        return conn

    def _take_idle(self) -> Connection | None:
        """The most recently used idle connection that is still usable, if any."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable and now - conn.idle_since < KEEPALIVE_EXPIRY:
                return conn
            conn.close()
        return None

    def _release(self, response: LeanResponse) -> None:
        """Its connection back to the pool if the answer was read to the end and the
        server keeps the connection open; else closed, which is what tells the server
        to stop generating."""
        conn = response._conn
        if (
            response.complete
            and conn.keep_alive
            and conn.usable
            and not self._closed
            and len(self._idle) < MAX_IDLE
        ):
            conn.done()
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
