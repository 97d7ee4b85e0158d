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
import httptools
import httpx

from navi.llm.errors import IncompleteStream, LLMError, ServerUnreachable

__all__ = ["LeanClient", "LeanResponse", "lean_applies"]

# As httpx: a write that makes no progress for a minute is a dead server.
WRITE_TIMEOUT = 60.0
# As httpx: an idle connection older than this is not reused (servers close them).
KEEPALIVE_EXPIRY = 5.0
MAX_IDLE = 8
# Body bytes held for a reader that lags before the socket stops reading.
MAX_BUFFERED = 256 * 1024
# An answer's head past this size is refused (llhttp sets no limit; h11 had one).
MAX_HEAD = 64 * 1024


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
    """One connection as an asyncio protocol. While an answer is awaited, what arrives
    goes through its parser at once (llhttp's callbacks below fill the head and the
    body pieces) and wakes the one reader; a close is immediate (no await: nothing to
    shield when a cancelled stream closes it). Cheaper than anyio's socket stream,
    which pauses and resumes reading around every read and adds checkpoints to every
    write (0.05 ms a call)."""

    def __init__(self) -> None:
        self.idle_since = 0.0
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser: httptools.HttpResponseParser | None = None  # while answering
        # The answer being read (see expect_answer).
        self.answered = False  # a byte of it arrived
        self.head = False  # its final head is parsed (informational answers skipped)
        self.complete = False  # its end is parsed
        self.status_code = 0
        self.headers: dict[str, str] = {}
        self.keep_alive = False  # the server lets the connection serve another request
        self.malformed: str | None = None  # why the parser rejected the answer
        self._head_size = 0  # bytes received while the head was incomplete
        self._informational = False
        self.body: list[bytes] = []  # pieces parsed, not yet read
        self._buffered = 0
        self._reading_paused = False
        self._stray = False  # bytes outside any awaited answer: never reuse
        self.ended = False  # the server closed its side, or the connection is lost
        self._error: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None  # while writing is paused

    @property
    def usable(self) -> bool:
        """Idle and still open, with nothing unexpected received meanwhile."""
        return not self.ended and not self._stray

    # ------------------------------------------------------------ protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports do not derive from asyncio's classes.)
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None or self.complete or self.malformed is not None:
            self._stray = True
            return
        self.answered = True
        try:
            parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            # After the end: bytes past a "Connection: close" answer.
            if self.complete:
                self._stray = True
            else:
                self.malformed = str(exc) or type(exc).__name__
        if not self.head:
            self._head_size += len(data)
            if self._head_size > MAX_HEAD and self.malformed is None:
                self.malformed = f"a head of more than {MAX_HEAD} bytes"
        if self._buffered > MAX_BUFFERED and not self._reading_paused:
            # The reader is behind: let TCP push back on the server.
            assert self._transport is not None
            self._transport.pause_reading()
            self._reading_paused = True
        self._wake()

    def eof_received(self) -> None:
        self._end_of_input()

    def connection_lost(self, exc: Exception | None) -> None:
        self._error = exc
        self._end_of_input()
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _end_of_input(self) -> None:
        if not self.ended and self._error is None and self.head and not self.complete:
            # llhttp learns of the end of a body delimited by the close only from
            # llhttp_finish, which httptools does not expose: a clean close is its end.
            self.complete = self.malformed is None and _delimited_by_close(self.headers)
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        if self.complete:  # a second answer to one request
            self._stray = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head:  # a trailer field after a chunked body: not used
            return
        key = name.decode("latin-1").lower()
        # (llhttp drops the whitespace before a value, not after it.)
        text = value.decode("latin-1").rstrip(" \t")
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        status = parser.get_status_code()
        if status < 200:
            self._informational = True
            self.headers = {}
            return
        self.status_code = status
        # Asked now: llhttp forgets the framing flags once the message is complete.
        self.keep_alive = parser.should_keep_alive()
        self.head = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            self.body.clear()
            self._buffered = 0
            return
        self.complete = True

    # ------------------------------------------------------------ used by the client

    def expect_answer(self) -> None:
        """Parse what arrives from now on as the answer to a request being sent."""
        self._parser = httptools.HttpResponseParser(self)
        self.answered = self.head = self.complete = False
        self.status_code = self._head_size = 0
        self.headers = {}

    def done(self) -> None:
        """The answer is read: anything more that arrives is unexpected."""
        self._parser = None  # (it refers back to this protocol)

    async def send(self, data: bytes) -> None:
        """Write ``data``; wait only while the socket buffer is full (``WRITE_TIMEOUT``)."""
        if self.ended or self._transport is None:
            raise ConnectionResetError("the connection is closed")
        self._transport.write(data)
        if self._writable is not None:
            with anyio.fail_after(WRITE_TIMEOUT):
                while self._writable is not None:
                    await self._writable
            if self.ended:
                raise ConnectionResetError("the connection is closed")

    async def wait(self, url: str) -> None:
        """Until the parser or the connection has news; raises if the answer is
        malformed or the connection ended."""
        if self.malformed is not None:
            raise _bad_answer(url, self.malformed)
        if self.ended:
            why = _describe(self._error) if self._error else "closed by the server"
            raise IncompleteStream(f"the connection dropped ({why})", url=url)
        waiter = self._waiter = self._loop.create_future()
        await waiter

    def take_body(self) -> bytes:
        """The body bytes parsed since the last call (``b""`` if none)."""
        body, self.body = self.body, []
        self._buffered = 0
        if self._reading_paused:
            assert self._transport is not None
            self._reading_paused = False
            self._transport.resume_reading()
        if len(body) == 1:
            return body[0]
        return b"".join(body)

    def close(self) -> None:
        """Close at once; unsent and unread bytes are dropped (the server sees it go)."""
        self.ended = True
        self._parser = None
        if self._transport is not None:
            self._transport.abort()


class LeanResponse:
    """The streamed answer: ``status_code``, ``headers`` (lowercase names), the body."""

    __slots__ = ("_conn", "_url", "complete", "headers", "status_code")

    def __init__(self, conn: _Connection, url: str) -> None:
        self._conn = conn
        self._url = url
        self.complete = False
        self.status_code = conn.status_code
        self.headers = conn.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body, one piece per network read that carried body bytes."""
        while not self.complete:
            data = await self._read()
            if data:
                yield data

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def _read(self) -> bytes:
        """The body bytes parsed since the last read, waiting for some; ``b""`` at the
        end (then ``complete`` is set, as it is with the last bytes when they came
        with the end)."""
        conn = self._conn
        while not conn.body and not conn.complete:
            await conn.wait(self._url)
        self.complete = conn.complete
        return conn.take_body()


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
        head = b"POST %b HTTP/1.1\r\n%bContent-Length: %d\r\n\r\n"
        request = head % (target, self._headers, len(body)) + body
        conn = self._take_idle()
        if conn is not None:
            response = await self._exchange(conn, request, url)
        if response is None:
            # No idle connection, or the server had closed it before answering (then
            # sending again is safe: a chat request has no side effect to repeat).
            conn = await self._connect(url)
            response = await self._exchange(conn, request, url)
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

    async def _exchange(self, conn: _Connection, request: bytes, url: str) -> LeanResponse | None:
        """Send the request, read the answer's head. ``None`` (the connection closed)
        when the connection ended before the first byte of an answer."""
        try:
            response = await self._request(conn, request, url)
        except BaseException:
            conn.close()
            raise
        if response is None:
            conn.close()
        return response

    @staticmethod
    async def _request(conn: _Connection, request: bytes, url: str) -> LeanResponse | None:
        conn.expect_answer()
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


def _delimited_by_close(headers: dict[str, str]) -> bool:
    """Whether a body with these headers ends where the connection does (RFC 9112
    6.3: neither chunked nor with a Content-Length)."""
    coding = headers.get("transfer-encoding")
    if coding is not None:
        return coding.rsplit(",", 1)[-1].strip().lower() != "chunked"
    return "content-length" not in headers


def _bad_answer(url: str, detail: str) -> LLMError:
    return LLMError(f"The LLM server at {url} sent a malformed HTTP answer: {detail}")


def _describe(exc: BaseException, name: str = "") -> str:
    text = str(exc).strip()
    kind = name or type(exc).__name__
    return f"{kind}: {text}" if text else kind
