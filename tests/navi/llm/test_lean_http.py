"""The lean HTTP path of the chat streams, against real servers on 127.0.0.1.

``RawServer`` is an HTTP server written on an asyncio protocol so that a test sees
what a server sees: each connection, each arrival of bytes (``data_received``), each
hang-up, and answers given byte for byte (chunked or not, cut short, reset).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import httpx
import msgspec
import pytest

from navi.llm import lean_conn, lean_http
from navi.llm.errors import (
    IncompleteStream,
    LLMError,
    LLMServerError,
    ModelNotFound,
    ServerUnreachable,
)
from navi.llm.http import line_blocks, make_client, make_stream_client
from navi.llm.lean_http import LeanClient
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, TextPiece
from tests.navi.llm.conftest import TEST_SETTINGS
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.fake_llm_script import render_ollama

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    # The server runs under uvicorn, which takes uvloop when it is installed.
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
        return "asyncio", {"use_uvloop": True}
    return "asyncio", {}


HELLO = [ChatMessage(role="user", content="hello")]
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@dataclass
class Request:
    connection: int
    head: bytes
    body: bytes
    arrivals: int  # data_received calls until the request was whole


@dataclass
class Connection:
    number: int
    transport: asyncio.Transport
    closed: asyncio.Event = field(default_factory=asyncio.Event)


Answer = Callable[[Connection], None]


class RawServer:
    """Answers each request with the next ``Answer`` of its script."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.connections: list[Connection] = []
        self.requests: list[Request] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ServerSide(self), "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for conn in self.connections:
            conn.transport.abort()
        await self._server.wait_closed()

    def closed(self, number: int) -> bool:
        return self.connections[number].closed.is_set()


class _ServerSide(asyncio.Protocol):
    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.buffer = b""
        self.arrivals = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports do not derive from asyncio's classes.)
        self.conn = Connection(len(self.server.connections), cast(asyncio.Transport, transport))
        self.server.connections.append(self.conn)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.closed.set()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.arrivals += 1
        head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = int(_header(head, b"content-length") or 0)
        if len(rest) < length:
            return
        self.buffer = rest[length:]
        request = Request(self.conn.number, head, rest[:length], self.arrivals)
        self.arrivals = 0
        self.server.requests.append(request)
        self.server.answers.pop(0)(self.conn)


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


LINES = [b'{"n":1}\n', b'{"n":2}\n', b'{"n":3}\n']


def chunked(*lines: bytes, head: bytes = b"", end: bool = True) -> Answer:
    def answer(conn: Connection) -> None:
        conn.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            + head
            + b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for line in lines:
            conn.transport.write(b"%x\r\n%b\r\n" % (len(line), line))
        if end:
            conn.transport.write(b"0\r\n\r\n")

    return answer


def whole(body: bytes, *, status: str = "200 OK", close: bool = False) -> Answer:
    def answer(conn: Connection) -> None:
        conn.transport.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n".encode()
            + (b"Connection: close\r\n" if close else b"")
            + b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
        )
        if close:
            conn.transport.close()

    return answer


def hang_up(conn: Connection) -> None:
    conn.transport.close()


def reset(conn: Connection) -> None:
    sock = conn.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.transport.abort()


def part_then_hang_up(conn: Connection) -> None:
    chunked(LINES[0], end=False)(conn)
    conn.transport.close()


def _fail(status: int, body: bytes) -> LLMError:
    return LLMServerError(status, body.decode(), url="test")


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    async with RawServer() as server:
        yield server


@pytest.fixture
async def client(raw: RawServer) -> AsyncIterator[LeanClient]:
    lean = LeanClient(httpx.URL(raw.url), connect_timeout=5.0)
    yield lean
    await lean.aclose()


async def post(client: LeanClient, body: bytes = b'{"q":1}') -> list[bytes]:
    async with client.stream(b"/api/chat", body, url="test", on_error_status=_fail) as response:
        return [block async for block in line_blocks(response)]


# ---------------------------------------------------------------- bodies and framing


@pytest.mark.parametrize(
    "answer",
    [chunked(*LINES), whole(b"".join(LINES)), whole(b"".join(LINES), close=True)],
    ids=["chunked", "content-length", "connection-close"],
)
async def test_bodies_arrive_whole(raw: RawServer, client: LeanClient, answer: Answer) -> None:
    raw.answers = [answer]
    assert b"".join(await post(client)) == b"".join(LINES)


async def test_the_request_is_one_write_with_the_expected_headers(raw: RawServer) -> None:
    raw.answers = [chunked(*LINES)]
    body = msgspec.json.encode({"messages": ["x" * 2000]})
    lean = LeanClient(httpx.URL(raw.url), connect_timeout=5.0, api_key="sk-test")
    await post(lean, body)
    await lean.aclose()
    [request] = raw.requests
    assert request.arrivals == 1 and request.body == body
    assert request.head.startswith(b"POST /api/chat HTTP/1.1\r\n")
    port = raw.url.rsplit(":", 1)[1]
    assert _header(request.head, b"host") == f"127.0.0.1:{port}".encode()
    assert _header(request.head, b"content-type") == b"application/json"
    assert _header(request.head, b"accept") == b"application/json"
    assert _header(request.head, b"content-length") == str(len(body)).encode()
    assert _header(request.head, b"authorization") == b"Bearer sk-test"
    assert (_header(request.head, b"user-agent") or b"").startswith(b"navi/")


async def test_a_large_body_is_sent_whole(raw: RawServer, client: LeanClient) -> None:
    raw.answers = [chunked(*LINES)]
    body = b'"' + b"x" * (8 * 1024 * 1024) + b'"'
    await post(client, body)
    assert raw.requests[0].body == body


async def test_an_error_status_is_read_whole_and_the_connection_kept(
    raw: RawServer, client: LeanClient
) -> None:
    raw.answers = [whole(b'{"error":"model \\"x\\" not found"}', status="404 Not Found")]
    raw.answers.append(chunked(*LINES))
    with pytest.raises(LLMServerError) as caught:
        await post(client)
    assert caught.value.status == 404 and "not found" in caught.value.detail
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 0]


async def test_a_malformed_answer_is_an_llm_error(raw: RawServer, client: LeanClient) -> None:
    raw.answers = [lambda conn: conn.transport.write(b"NOT HTTP AT ALL\r\n\r\n")]
    with anyio.fail_after(5), pytest.raises(LLMError, match="malformed HTTP answer") as caught:
        await post(client)
    assert not isinstance(caught.value, IncompleteStream)


def raw_answer(*pieces: bytes, close: bool = False) -> Answer:
    """Writes ``pieces`` as they are (one write each), then hangs up if ``close``."""

    def answer(conn: Connection) -> None:
        for piece in pieces:
            conn.transport.write(piece)
        if close:
            conn.transport.close()

    return answer


CHUNKED_ANSWER = (
    b"HTTP/1.1 200 OK\r\nX-Seen: a  \r\nContent-Type: application/x-ndjson\r\nx-seen: b\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
    + b"".join(b"%x\r\n%b\r\n" % (len(line), line) for line in LINES)
    + b"0\r\nX-Trailer: t\r\n\r\n"
)


async def test_the_head_is_read_as_httpx_would_give_it(raw: RawServer, client: LeanClient) -> None:
    raw.answers = [raw_answer(CHUNKED_ANSWER)]
    async with client.stream(b"/api/chat", b"{}", url="test", on_error_status=_fail) as response:
        assert b"".join([piece async for piece in response.aiter_bytes()]) == b"".join(LINES)
    assert response.status_code == 200
    # Lowercase names, repeated fields joined, no trailing whitespace, no trailer fields.
    assert response.headers == {
        "x-seen": "a, b",
        "content-type": "application/x-ndjson",
        "transfer-encoding": "chunked",
    }


async def test_an_answer_written_one_byte_at_a_time_arrives_whole(
    raw: RawServer, client: LeanClient
) -> None:
    def answer(conn: Connection) -> None:
        async def trickle() -> None:
            for i in range(len(CHUNKED_ANSWER)):
                conn.transport.write(CHUNKED_ANSWER[i : i + 1])
                await asyncio.sleep(0.001)  # (each byte its own network read)

        asyncio.get_running_loop().create_task(trickle())

    raw.answers = [answer, chunked(*LINES)]
    assert b"".join(await post(client)) == b"".join(LINES)
    assert b"".join(await post(client)) == b"".join(LINES)
    assert [r.connection for r in raw.requests] == [0, 0]


class _Transport:
    """Enough of a transport for the protocol to be fed by hand."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def abort(self) -> None: ...


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_an_answer_split_at_any_byte_is_parsed_the_same(framing: str) -> None:
    body = b"".join(LINES)
    data = (
        CHUNKED_ANSWER
        if framing == "chunked"
        else b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nX-Seen: a\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    )
    for cut in range(1, len(data)):
        conn = lean_conn.Connection()
        conn.connection_made(cast(asyncio.Transport, _Transport()))
        conn.expect_answer()
        received = b""
        for piece in (data[:cut], data[cut:]):
            conn.data_received(piece)
            received += conn.take_body()
        assert conn.head and conn.complete and conn.keep_alive and conn.usable, cut
        assert received == body and conn.headers["x-seen"].startswith("a"), cut
        assert conn.status_code == (200 if framing == "chunked" else 201)


async def test_an_informational_answer_is_skipped(raw: RawServer, client: LeanClient) -> None:
    raw.answers = [
        raw_answer(
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n",
            b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"n":1}\n',
        ),
        chunked(*LINES),
    ]
    async with client.stream(b"/api/chat", b"{}", url="test", on_error_status=_fail) as response:
        assert await response.aread() == b'{"n":1}\n'
    assert response.status_code == 200 and "link" not in response.headers
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 0]


@pytest.mark.parametrize(
    ("head", "close"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\n\r\n", True),
    ],
    ids=["connection-close", "http-1.0", "http-1.0-until-close", "until-close"],
)
async def test_an_answer_that_closes_the_connection_is_read_and_not_reused(
    raw: RawServer, client: LeanClient, head: bytes, close: bool
) -> None:
    # (Without a hang-up, the server waits for the client to close.)
    raw.answers = [raw_answer(head, b'{"n":1}\n', close=close), chunked(*LINES)]
    assert await post(client) == [b'{"n":1}\n']
    with anyio.fail_after(5):
        await raw.connections[0].closed.wait()
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 1]


async def test_an_http_1_0_answer_that_keeps_alive_is_reused(
    raw: RawServer, client: LeanClient
) -> None:
    raw.answers = [
        raw_answer(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n{}\n"),
        chunked(*LINES),
    ]
    assert await post(client) == [b"{}\n"]
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 0]


async def test_bytes_past_the_end_of_an_answer_spoil_the_connection(
    raw: RawServer, client: LeanClient
) -> None:
    extra = b"HTTP/1.1 200 OK\r\n"
    raw.answers = [
        raw_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}" + extra),
        chunked(*LINES),
    ]
    await post(client)
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 1]


@pytest.mark.parametrize(
    "answer",
    [
        raw_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n"),
        raw_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"),
        raw_answer(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"
        ),
        raw_answer(b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n"),
    ],
    ids=["chunk-size", "both-framings", "switching-protocols", "header-name"],
)
async def test_malformed_answers_are_llm_errors(
    raw: RawServer, client: LeanClient, answer: Answer
) -> None:
    raw.answers = [answer]
    with anyio.fail_after(5), pytest.raises(LLMError, match="malformed HTTP answer") as caught:
        await post(client)
    assert not isinstance(caught.value, IncompleteStream)


async def test_a_head_that_never_ends_is_refused(
    raw: RawServer, client: LeanClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lean_conn, "MAX_HEAD", 4096)
    fields = b"".join(b"X-%d: %b\r\n" % (i, b"v" * 100) for i in range(100))
    raw.answers = [
        raw_answer(
            b"HTTP/1.1 200 OK\r\n", *[fields[i : i + 1000] for i in range(0, len(fields), 1000)]
        )
    ]
    with anyio.fail_after(5), pytest.raises(LLMError, match="malformed HTTP answer: a head"):
        await post(client)


async def test_an_answer_left_unread_is_not_reused_even_if_it_all_arrived(
    raw: RawServer, client: LeanClient
) -> None:
    def answer(conn: Connection) -> None:
        chunked(LINES[0], end=False)(conn)
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, conn.transport.write, b"8\r\n%b\r\n0\r\n\r\n" % LINES[1])

    raw.answers = [answer, chunked(*LINES)]
    async with client.stream(b"/api/chat", b"{}", url="test", on_error_status=_fail) as response:
        async for _ in response.aiter_bytes():
            await anyio.sleep(0.1)  # the rest and the end arrive meanwhile
            break
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 1]


async def test_a_reader_that_lags_stops_the_socket_reading(
    raw: RawServer, client: LeanClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lean_conn, "MAX_BUFFERED", 64 * 1024)
    lines = [b'{"n":"%b"}\n' % (b"x" * 1000) for _ in range(2000)]
    raw.answers = [chunked(*lines)]
    async with client.stream(b"/api/chat", b"{}", url="test", on_error_status=_fail) as response:
        await anyio.sleep(0.1)  # the server writes 2 MB meanwhile; nobody reads
        conn = response._conn
        assert conn._reading_paused and conn._buffered < 1024 * 1024
        assert await response.aread() == b"".join(lines)
    assert not conn._reading_paused


def test_a_header_value_cannot_end_the_header() -> None:
    with pytest.raises(ValueError, match="Authorization"):
        LeanClient(httpx.URL("http://127.0.0.1:1"), connect_timeout=1.0, api_key="k\r\nX: y")


# ---------------------------------------------------------------- the pool


async def test_connections_are_reused(raw: RawServer, client: LeanClient) -> None:
    raw.answers = [chunked(*LINES), whole(b"".join(LINES)), chunked(*LINES)]
    raw.answers.insert(1, whole(b'{"error":"busy"}', status="503 Service Unavailable"))
    # Each answer parsed whole by the connection's one parser, an error status included.
    assert b"".join(await post(client)) == b"".join(LINES)
    with pytest.raises(LLMServerError):
        await post(client)
    for _ in range(2):
        assert b"".join(await post(client)) == b"".join(LINES)
    assert len(raw.connections) == 1 and not raw.closed(0)
    await client.aclose()
    with anyio.fail_after(5):
        await raw.connections[0].closed.wait()


async def test_an_idle_connection_the_server_closed_is_not_used(
    raw: RawServer, client: LeanClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw.answers = [chunked(*LINES), chunked(*LINES)]
    await post(client)
    raw.connections[0].transport.close()
    await anyio.sleep(0.05)  # the client's side sees the hang-up
    written_on: list[object] = []
    send = lean_conn.Connection.send

    async def spy(conn: lean_conn.Connection, data: bytes) -> None:
        written_on.append(conn)
        await send(conn, data)

    monkeypatch.setattr(lean_conn.Connection, "send", spy)
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 1]
    # Known to be closed: the request was not even tried on it (no retry needed).
    assert len(written_on) == 1


async def test_an_idle_connection_past_its_expiry_is_not_used(
    raw: RawServer, client: LeanClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw.answers = [chunked(*LINES), chunked(*LINES)]
    await post(client)
    monkeypatch.setattr(lean_http, "KEEPALIVE_EXPIRY", 0.0)
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 1]
    with anyio.fail_after(5):
        await raw.connections[0].closed.wait()


@pytest.mark.parametrize("close", [hang_up, reset], ids=["closed", "reset"])
async def test_a_reused_connection_closed_before_answering_is_retried_once(
    raw: RawServer, client: LeanClient, close: Answer
) -> None:
    # The server closes the idle connection just as the request goes out on it.
    raw.answers = [chunked(*LINES), close, chunked(*LINES)]
    await post(client)
    assert b"".join(await post(client)) == b"".join(LINES)
    assert [r.connection for r in raw.requests] == [0, 0, 1]


async def test_a_fresh_connection_closed_before_answering_is_not_retried(
    raw: RawServer, client: LeanClient
) -> None:
    raw.answers = [hang_up]
    with pytest.raises(IncompleteStream, match="without answering"):
        await post(client)
    assert len(raw.requests) == 1


@pytest.mark.parametrize(
    "answer",
    [part_then_hang_up, lambda conn: conn.transport.write(b"HTTP/1.1 200 OK\r\n") or reset(conn)],
    ids=["mid-body", "mid-head"],
)
async def test_a_connection_dropped_after_answer_bytes_is_not_retried(
    raw: RawServer, client: LeanClient, answer: Answer
) -> None:
    raw.answers = [chunked(*LINES), answer]
    await post(client)
    with pytest.raises(IncompleteStream, match="connection dropped"):
        await post(client)
    assert len(raw.requests) == 2


@pytest.mark.parametrize(
    "answer",
    [
        raw_answer(b"HTTP/1.1 200 OK\r\nContent-Le", close=True),
        raw_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}\n", close=True),
        raw_answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}", close=True),
    ],
    ids=["mid-head", "content-length", "chunked"],
)
async def test_a_clean_close_before_the_end_is_an_incomplete_stream(
    raw: RawServer, client: LeanClient, answer: Answer
) -> None:
    raw.answers = [answer]
    with anyio.fail_after(5), pytest.raises(IncompleteStream, match="closed by the server"):
        await post(client)


async def test_a_connection_left_before_the_end_is_closed(
    raw: RawServer, client: LeanClient
) -> None:
    raw.answers = [chunked(*LINES, end=False), chunked(*LINES)]
    async with client.stream(b"/api/chat", b"{}", url="test", on_error_status=_fail) as response:
        async for _ in response.aiter_bytes():
            break
    with anyio.fail_after(5):
        await raw.connections[0].closed.wait()
    await post(client)
    assert [r.connection for r in raw.requests] == [0, 1]


async def test_connection_refused_is_server_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    lean = LeanClient(httpx.URL(url), connect_timeout=5.0)
    with pytest.raises(ServerUnreachable, match="ConnectError"):
        await post(lean)
    await lean.aclose()


async def test_a_write_that_makes_no_progress_times_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lean_conn, "WRITE_TIMEOUT", 0.2)
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts, never reads
        lean = LeanClient(
            httpx.URL(f"http://127.0.0.1:{listener.getsockname()[1]}"), connect_timeout=5.0
        )
        with anyio.fail_after(10), pytest.raises(ServerUnreachable, match="WriteTimeout"):
            await post(lean, b"x" * (64 * 1024 * 1024))
        await lean.aclose()


# ---------------------------------------------------------------- through the backends


async def test_ollama_streams_over_one_connection(raw: RawServer) -> None:
    rendered = render_ollama(Reply(text=["Hel", "lo"]), model="m", request_number=1)
    raw.answers = [chunked(*rendered.chunks, *rendered.tail) for _ in range(2)]
    backend = OllamaBackend(TEST_SETTINGS, url=raw.url, model="m")
    assert isinstance(backend._streams, LeanClient)
    for _ in range(2):
        assert (await backend.complete(HELLO)).content == "Hello"
    assert len(raw.connections) == 1
    await backend.aclose()


async def test_ollama_error_status_maps_as_before(raw: RawServer) -> None:
    raw.answers = [
        whole(b'{"error":"model \\"m\\" not found, try pulling it first"}', status="404 Not Found")
    ]
    backend = OllamaBackend(TEST_SETTINGS, url=raw.url, model="m")
    with pytest.raises(ModelNotFound):
        await backend.complete(HELLO)
    await backend.aclose()


async def test_a_stop_mid_stream_closes_the_connection(fake: FakeLLMServer) -> None:
    fake.script(Reply(text=["a"] * 50, delay=0.05), Reply(text="again"))
    backend = OllamaBackend(TEST_SETTINGS, url=fake.url, model="m")
    stop = StopSignal()
    seen = []
    async for chunk in backend.stream_complete(HELLO, stop=stop):
        seen.append(chunk)
        if isinstance(chunk, TextPiece):
            stop.set()
    assert seen[-1].finish_reason == "stopped"  # type: ignore[union-attr]
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    # The next call gets a fresh connection and the whole answer.
    assert (await backend.complete(HELLO)).content == "again"
    await backend.aclose()


async def test_openai_sends_the_api_key(fake: FakeLLMServer) -> None:
    fake.script(Reply(text="hi"))
    backend = OpenAICompatibleBackend(
        TEST_SETTINGS, url=fake.url + "/v1", model="m", api_key="sk-1"
    )
    assert isinstance(backend._streams, LeanClient)
    assert (await backend.complete(HELLO)).content == "hi"
    assert fake.received[-1].headers["authorization"] == "Bearer sk-1"
    await backend.aclose()


# ---------------------------------------------------------------- which path


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("url", "env", "lean"),
    [
        ("http://127.0.0.1:11434", {}, True),
        ("http://127.0.0.1:8080/v1", {"NO_PROXY": "*"}, True),
        ("http://127.0.0.1:8080/v1", {"HTTPS_PROXY": "http://proxy:3128"}, True),
        ("https://llm.example/v1", {}, False),
        ("http://user:secret@127.0.0.1:11434", {}, False),
        ("http://127.0.0.1:11434", {"HTTP_PROXY": "http://proxy:3128"}, False),
        ("http://127.0.0.1:11434", {"http_proxy": "proxy:3128", "no_proxy": "127.0.0.1"}, False),
        ("http://127.0.0.1:11434", {"ALL_PROXY": "http://proxy:3128"}, False),
    ],
)
async def test_which_client_carries_the_streams(
    no_proxy_env: pytest.MonkeyPatch, url: str, env: dict[str, str], lean: bool
) -> None:
    for name, value in env.items():
        no_proxy_env.setenv(name, value)
    client = make_client(url, connect_timeout=1.0)
    streams = make_stream_client(client, connect_timeout=1.0)
    assert isinstance(streams, LeanClient) is lean
    assert (streams is client) is not lean
    await client.aclose()


async def test_through_a_proxy_the_streams_take_httpx(
    raw: RawServer, no_proxy_env: pytest.MonkeyPatch
) -> None:
    no_proxy_env.setenv("HTTP_PROXY", raw.url)
    rendered = render_ollama(Reply(text="via proxy"), model="m", request_number=1)
    raw.answers = [chunked(*rendered.chunks, *rendered.tail)]
    backend = OllamaBackend(TEST_SETTINGS, url="http://llm.invalid:11434", model="m")
    assert (await backend.complete(HELLO)).content == "via proxy"
    # A proxy is asked for the absolute URL.
    assert raw.requests[0].head.startswith(b"POST http://llm.invalid:11434/api/chat ")
    await backend.aclose()


async def test_line_blocks_of_a_body_trickled_in_are_whole_lines(
    raw: RawServer, client: LeanClient
) -> None:
    # The lean response cuts its lines itself (no aiter_bytes layer): same blocks.
    body = b'{"a":1}\n{"b":2}\n{"c":3}'  # the last line unterminated

    def answer(conn: Connection) -> None:
        async def trickle() -> None:
            conn.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
            for i in range(0, len(body), 5):
                await asyncio.sleep(0.002)
                conn.transport.write(body[i : i + 5])

        asyncio.get_running_loop().create_task(trickle())

    raw.answers = [answer]
    blocks = await post(client)
    assert b"".join(blocks) == body + b"\n"
    assert all(block.endswith(b"\n") or block == b"" for block in blocks)
    assert b"" in blocks  # reads that completed no line still count
