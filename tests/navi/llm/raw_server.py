"""A bare HTTP server on 127.0.0.1 for answers the fake LLM server does not give."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["ForwardProxy", "dropping_server", "forward_proxy", "json_server", "redirecting_server"]


async def read_request(client: anyio.abc.SocketStream) -> bytes:
    """One request read off ``client`` (its body too, which is dropped): its head."""
    reader = BufferedByteReceiveStream(client)
    head = await reader.receive_until(b"\r\n\r\n", 65536)
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.receive_exactly(int(line.split(b":")[1]))
    return head


@asynccontextmanager
async def redirecting_server(status: int, location: str) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that answers every request with ``status`` to ``location``."""

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            await read_request(client)
            await client.send(
                b"HTTP/1.1 %d Redirect\r\nLocation: %b\r\nContent-Length: 0\r\n\r\n"
                % (status, location.encode())
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


@asynccontextmanager
async def json_server(answers: dict[str, bytes]) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that answers a GET of each path in ``answers`` with its
    JSON body, anything else with 404 (one request per connection)."""

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            head = await reader.receive_until(b"\r\n\r\n", 65536)
            path = head.split(b" ", 2)[1].decode().split("?")[0]
            found = answers.get(path)
            status, content = (200, found) if found is not None else (404, b'{"error":"no"}')
            await client.send(
                b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%b" % (status, len(content), content)
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


@asynccontextmanager
async def dropping_server(answer: bytes) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that reads a request, sends ``answer`` (the start of an
    answer, or nothing) and closes the connection."""

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            await read_request(client)
            if answer:
                await client.send(answer)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


class ForwardProxy:
    """An HTTP forward proxy on 127.0.0.1 (``url``) for plain ``http://`` targets: it
    records the request line of each connection's first request (``requested``), sends
    that request on to the target, then relays bytes both ways (later requests on the
    connection pass as they are: the tests make one per connection)."""

    def __init__(self) -> None:
        self.requested: list[str] = []
        self.url = ""

    async def _relay(
        self, source: anyio.abc.ByteReceiveStream, sink: anyio.abc.ByteSendStream
    ) -> None:
        try:
            async for data in source:
                await sink.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            await sink.aclose()

    async def _serve(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            head = await reader.receive_until(b"\r\n\r\n", 65536)
            request_line, rest = head.decode("latin-1").split("\r\n", 1)
            self.requested.append(request_line)
            method, target, version = request_line.split(" ")  # POST http://h:p/… HTTP/1.1
            host, port = target.split("/")[2].rsplit(":", 1)
            path = "/" + target.split("/", 3)[3]
            forwarded = f"{method} {path} {version}\r\n{rest}\r\n\r\n".encode("latin-1")
            async with await anyio.connect_tcp(host, int(port)) as upstream:
                await upstream.send(forwarded + reader.buffer)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._relay, upstream, client)
                    await self._relay(client, upstream)


@asynccontextmanager
async def forward_proxy() -> AsyncIterator[ForwardProxy]:
    proxy = ForwardProxy()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    proxy.url = f"http://127.0.0.1:{port}"
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, proxy._serve)
        yield proxy
        tg.cancel_scope.cancel()
