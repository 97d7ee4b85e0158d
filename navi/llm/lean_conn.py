"""One keep-alive HTTP/1.1 connection of the lean client (:mod:`navi.llm.lean_http`):
an asyncio protocol whose answers are parsed by llhttp (httptools) as they arrive."""

from __future__ import annotations

import asyncio
from typing import cast

import anyio
import httptools

from navi.llm.errors import IncompleteStream, LLMError
from navi.llm.watchdog import StreamInterrupted

__all__ = ["Connection", "bad_answer", "delimited_by_close", "describe"]

# As httpx: a write that makes no progress for a minute is a dead server.
WRITE_TIMEOUT = 60.0
# Body bytes held for a reader that lags before the socket stops reading.
MAX_BUFFERED = 256 * 1024
# An answer's head past this size is refused (llhttp sets no limit; h11 had one).
MAX_HEAD = 64 * 1024


class Connection(asyncio.Protocol):
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
        self._reader: httptools.HttpResponseParser | None = None  # the one it uses
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
        self._interrupted = False  # see interrupt()
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
            self.complete = self.malformed is None and delimited_by_close(self.headers)
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
        # One parser per connection: a connection is reused only after an answer that
        # was parsed to its end, and llhttp then starts the next message afresh.
        parser = self._reader
        if parser is None:
            parser = self._reader = httptools.HttpResponseParser(self)
        self._parser = parser
        self.answered = self.head = self.complete = self._interrupted = False
        self.status_code = self._head_size = 0
        self.headers = {}

    def done(self) -> None:
        """The answer is read: anything more that arrives is unexpected."""
        self._parser = None  # (it refers back to this protocol)

    async def send(self, data: bytes) -> None:
        """Write ``data``; wait only while the socket buffer is full (``WRITE_TIMEOUT``)."""
        if self._interrupted:
            raise StreamInterrupted
        if self.ended or self._transport is None:
            raise ConnectionResetError("the connection is closed")
        self._transport.write(data)
        if self._writable is not None:
            with anyio.fail_after(WRITE_TIMEOUT):
                while self._writable is not None and not self._interrupted:
                    await self._writable
            if self._interrupted:
                raise StreamInterrupted
            if self.ended:
                raise ConnectionResetError("the connection is closed")

    async def wait(self, url: str) -> None:
        """Until the parser or the connection has news; raises if the answer is
        malformed or the connection ended, :class:`StreamInterrupted` if the wait was
        interrupted (then before anything else: a stop is no dropped connection)."""
        if self._interrupted:
            raise StreamInterrupted
        if self.malformed is not None:
            raise bad_answer(url, self.malformed)
        if self.ended:
            why = describe(self._error) if self._error else "closed by the server"
            raise IncompleteStream(f"the connection dropped ({why})", url=url)
        waiter = self._waiter = self._loop.create_future()
        await waiter
        if self._interrupted:
            raise StreamInterrupted

    def interrupt(self) -> None:
        """End the current wait (of :meth:`wait` or :meth:`send`) with
        :class:`StreamInterrupted`, and every later one of this answer: the stream
        watchdog's abort (a stop or a timeout). The waiter is woken, not failed: a
        future's exception that nobody retrieves is logged as an error."""
        self._interrupted = True
        self._wake()
        writable = self._writable
        if writable is not None and not writable.done():
            writable.set_result(None)

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
        self._parser = self._reader = None  # (they refer back to this protocol)
        if self._transport is not None:
            self._transport.abort()


def delimited_by_close(headers: dict[str, str]) -> bool:
    """Whether a body with these headers ends where the connection does (RFC 9112
    6.3: neither chunked nor with a Content-Length)."""
    coding = headers.get("transfer-encoding")
    if coding is not None:
        return coding.rsplit(",", 1)[-1].strip().lower() != "chunked"
    return "content-length" not in headers


def bad_answer(url: str, detail: str) -> LLMError:
    return LLMError(f"The LLM server at {url} sent a malformed HTTP answer: {detail}")


def describe(exc: BaseException, name: str = "") -> str:
    text = str(exc).strip()
    kind = name or type(exc).__name__
    return f"{kind}: {text}" if text else kind
