"""The HTTP side of the Ollama and OpenAI-compatible backends: one httpx client per
server, line splitting, error bodies, redirects, and URLs whose credentials never show."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import httpx
import msgspec
import pytest

from navi.llm.base import LLMBackend
from navi.llm.errors import (
    IncompleteStream,
    LLMBusy,
    LLMError,
    LLMRedirected,
    ServerUnreachable,
    redact_url,
)
from navi.llm.http import LLMServer, error_detail, line_blocks
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.transport import environment_proxy
from navi.llm.types import ChatMessage, FinalChunk, StreamChunk, TextPiece
from tests.navi.llm.raw_server import dropping_server, forward_proxy, redirecting_server
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import drain

pytestmark = pytest.mark.anyio

HELLO = [ChatMessage(role="user", content="hello")]
SETTINGS = LLMSettings(first_chunk_timeout=10.0, chunk_timeout=10.0, connect_timeout=5.0)
SECRET = "hunter2-canary"


async def blocks_of(*pieces: bytes) -> list[bytes]:
    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    response = httpx.Response(200, content=body())
    return [block async for block in line_blocks(response)]


async def test_reads_are_cut_at_line_ends() -> None:
    assert await blocks_of(b'{"a":1}\n{"b"', b":2}\n", b"{", b'"c":3}\n') == [
        b'{"a":1}\n',
        b'{"b":2}\n',
        b"",  # a read that completed no line still proves the server is alive
        b'{"c":3}\n',
    ]


async def test_many_lines_in_one_read_stay_one_block() -> None:
    assert await blocks_of(b"a\nb\nc\n") == [b"a\nb\nc\n"]


async def test_an_unterminated_last_line_is_kept() -> None:
    assert await blocks_of(b"a\nb") == [b"a\n", b"b\n"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"error":"plain"}', "plain"),
        (b'{"error":{"message":"nested","type":"x"}}', "nested"),
        (b'{"object":"error","message":"flat"}', "flat"),
        (b'{"detail":"fastapi"}', "fastapi"),
        (b"<html>oops</html>", "<html>oops</html>"),
        (b"", "(empty answer)"),
    ],
)
def test_error_detail(body: bytes, detail: str) -> None:
    assert error_detail(body) == detail


async def test_httpcore_finds_sniffio() -> None:
    # httpcore asks which event loop runs on every lock and event it sets up; without
    # sniffio each ask is a failed import that searches sys.path again (0.07 ms each).
    from httpcore._synchronization import current_async_library

    assert importlib.util.find_spec("sniffio") is not None
    assert current_async_library() == "asyncio"


@pytest.mark.parametrize(
    ("base", "path"),
    [
        ("http://127.0.0.1:11434", "/api/chat"),
        ("http://127.0.0.1:8080/v1", "/chat/completions"),
        ("https://llm.example/openai/v1/", "/chat/completions"),
    ],
)
async def test_an_endpoint_is_the_url_the_client_would_build(base: str, path: str) -> None:
    server = LLMServer(base, setting="X", connect_timeout=1.0)
    async with server.client as client:
        assert server.endpoint(path) == client.build_request("POST", path).url
        sent = client.build_request("POST", server.endpoint(path), content=b"{}")
        assert sent.headers["content-type"] == "application/json"


# ---------------------------------------------------------------- credentials in URLs


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
        ("http://navi:pw@host:1/v1", "http://***@host:1/v1"),
        ("https://token@host", "https://***@host"),
        ("http://u:p@ss@host/api?x=a@b", "http://***@host/api?x=a@b"),  # unencoded @
        (
            "at http://u:pw@a/x and https://v:pw@b (mail me@example.com)",
            "at http://***@a/x and https://***@b (mail me@example.com)",
        ),
    ],
)
def test_redact_url(text: str, shown: str) -> None:
    assert redact_url(text) == shown


def make_backend(wire: str, url: str) -> LLMBackend:
    if wire == "ollama":
        return OllamaBackend(SETTINGS, url=url, model="m")
    return OpenAICompatibleBackend(SETTINGS, url=url + "/v1", model="m")


WIRES = pytest.mark.parametrize("wire", ["ollama", "openai"])


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://navi:{SECRET}@")


@WIRES
async def test_credentials_in_the_url_are_sent_but_never_shown(
    wire: str, fake: FakeLLMServer
) -> None:
    fake.script(Reply(text="hi"), Reply(error_before="overloaded", error_status=503))
    backend = make_backend(wire, with_credentials(fake.url))
    assert SECRET not in backend.url and "***@127.0.0.1" in backend.url
    assert [c for c in await drain(backend.stream_complete(HELLO)) if isinstance(c, TextPiece)]
    assert fake.received[-1].headers["authorization"].startswith("Basic ")
    with pytest.raises(LLMError) as caught:
        await drain(backend.stream_complete(HELLO))
    assert "503" in str(caught.value) and SECRET not in str(caught.value)
    await backend.aclose()


@WIRES
async def test_an_unreachable_server_with_credentials_is_named_without_them(wire: str) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")  # a closed port
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    backend = make_backend(wire, with_credentials(f"http://127.0.0.1:{port}"))
    for call in (lambda: drain(backend.stream_complete(HELLO)), backend.list_models):
        with pytest.raises(ServerUnreachable) as caught:
            await call()
        assert SECRET not in caught.value.message and SECRET not in caught.value.url
        assert f"http://***@127.0.0.1:{port}" in caught.value.message
    await backend.aclose()


# ---------------------------------------------------------------- redirects


@WIRES
@pytest.mark.parametrize("status", [301, 307, 308])
async def test_a_redirect_is_a_clear_error_naming_the_setting(wire: str, status: int) -> None:
    target = f"https://admin:{SECRET}@llm.example/final"
    async with redirecting_server(status, target) as url:
        backend = make_backend(wire, with_credentials(url))
        setting = "OLLAMA_HOST" if wire == "ollama" else "OPENAI_BASE_URL"
        for call in (lambda: drain(backend.stream_complete(HELLO)), backend.list_models):
            with pytest.raises(LLMRedirected) as caught:
                await call()
            message = caught.value.message
            assert f"answered {status} redirect to https://***@llm.example/final" in message
            assert f"set {setting} to the final address" in message
            assert SECRET not in message and "context window" not in message
            assert caught.value.kind == "redirect" and not caught.value.retryable
        await backend.aclose()


async def test_a_relative_redirect_names_the_absolute_place() -> None:
    async with redirecting_server(307, "/elsewhere/api/chat") as url:
        backend = make_backend("ollama", url)
        with pytest.raises(LLMRedirected) as caught:
            await drain(backend.stream_complete(HELLO))
        assert f"redirect to {url}/elsewhere/api/chat;" in caught.value.message
        await backend.aclose()


# ---------------------------------------------------------------- the connection's life


async def test_a_stop_before_the_call_sends_nothing(fake: FakeLLMServer) -> None:
    backend = make_backend("ollama", fake.url)
    stop = StopSignal()
    stop.set()
    assert await drain(backend.stream_complete(HELLO, stop=stop)) == [
        FinalChunk(finish_reason="stopped")
    ]
    assert fake.received == []
    await backend.aclose()


async def test_a_cancelled_consumer_closes_the_connection(fake: FakeLLMServer) -> None:
    fake.script(Reply(text="never sent", delay_first=30))
    backend = make_backend("ollama", fake.url)
    with anyio.move_on_after(0.3):
        await drain(backend.stream_complete(HELLO))
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    await backend.aclose()


# ---------------------------------------------------------------- the transport's failures


@pytest.mark.parametrize(
    "answer",
    [
        b"",  # closed before any answer (a kept-alive connection the server dropped)
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a"\r\n',
        b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"message":',
    ],
    ids=["before-answer", "chunked", "content-length"],
)
@WIRES
async def test_a_dropped_stream_is_incomplete_not_unreachable(wire: str, answer: bytes) -> None:
    # (The aiohttp transport maps a dropped connection to httpx's ConnectTimeout.)
    async with dropping_server(answer) as url:
        backend = make_backend(wire, url)
        with pytest.raises(IncompleteStream) as caught:
            await drain(backend.stream_complete(HELLO))
        assert "dropped" in caught.value.message and caught.value.retryable
        assert "Cannot reach" not in caught.value.message
        await backend.aclose()


async def test_a_refused_connection_is_unreachable_not_a_timeout() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")  # a closed port
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    server = LLMServer(f"http://127.0.0.1:{port}", setting="X", connect_timeout=5.0)
    with pytest.raises(ServerUnreachable) as caught:
        await server.get("/api/tags", time_limit=5.0, on_error_status=lambda *_: LLMError("?"))
    assert "no answer within" not in caught.value.message
    assert "ClientConnectorError" in caught.value.message
    await server.aclose()


# ---------------------------------------------------------------- the pool


async def test_a_call_waits_for_a_free_connection_then_gets_a_clear_error(
    fake: FakeLLMServer,
) -> None:
    settings = msgspec.structs.replace(SETTINGS, max_connections=1, pool_timeout=1.0)
    backend = OllamaBackend(settings, url=fake.url, model="m")
    fake.script(Reply(text="a b c", stall_after=1), Reply(text="later"), Reply(text="fine"))
    first = backend.stream_complete(HELLO)
    assert await anext(first) == TextPiece("a ")  # holds the only connection
    with pytest.raises(LLMBusy) as caught:
        await drain(backend.stream_complete(HELLO))
    assert "All 1 connections to the LLM server" in caught.value.message
    assert "NAVI_LLM_MAX_CONNECTIONS" in caught.value.message
    assert caught.value.kind == "busy" and caught.value.retryable
    assert len(fake.requests) == 1  # the second call never reached the server
    # A waiting call goes on as soon as the connection is free.
    async with anyio.create_task_group() as tg:
        results: list[list[StreamChunk]] = []

        async def waiting_call() -> None:
            results.append(await drain(backend.stream_complete(HELLO)))

        tg.start_soon(waiting_call)
        await anyio.wait_all_tasks_blocked()  # (it waits for the connection)
        await first.aclose()
    assert [c for c in results[0] if isinstance(c, TextPiece)] == [TextPiece("later")]
    await backend.aclose()


# ---------------------------------------------------------------- proxies


async def test_the_proxy_of_the_environment_is_used_unless_no_proxy_names_the_host(
    fake: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    fake.script(Reply(text="via the proxy"), Reply(text="direct"))
    async with forward_proxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        backend = make_backend("ollama", fake.url)
        assert await text_of(backend) == "via the proxy"
        assert proxy.requested == [f"POST {fake.url}/api/chat HTTP/1.1"]
        await backend.aclose()

        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        backend = make_backend("ollama", fake.url)
        assert await text_of(backend) == "direct"
        assert len(proxy.requested) == 1  # (the call above is over: it went direct)
        await backend.aclose()


def test_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert environment_proxy("http://127.0.0.1:11434") is None
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:{SECRET}@proxy.test:3128")
    monkeypatch.setenv("ALL_PROXY", "http://all.test:8080")
    chosen = environment_proxy("https://llm.example/v1")
    assert (
        chosen is not None and chosen.url.host == "proxy.test" and chosen.auth == ("user", SECRET)
    )
    http_proxy = environment_proxy("http://llm.example/v1")
    assert http_proxy is not None and http_proxy.url.host == "all.test"
    monkeypatch.setenv("NO_PROXY", ".example")
    assert environment_proxy("https://llm.example/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", f"socks5://user:{SECRET}@proxy.test:1080")
    monkeypatch.setenv("NO_PROXY", "")
    with pytest.raises(LLMError) as caught:
        environment_proxy("https://llm.example/v1")
    assert "not an HTTP proxy" in caught.value.message and SECRET not in caught.value.message


async def text_of(backend: LLMBackend) -> str:
    chunks = await drain(backend.stream_complete(HELLO))
    return "".join(c.text for c in chunks if isinstance(c, TextPiece))
