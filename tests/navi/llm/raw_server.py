"""A bare HTTP server on 127.0.0.1 for answers the fake LLM server does not give."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["json_server", "redirecting_server"]


@asynccontextmanager
async def redirecting_server(status: int, location: str) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that answers every request with ``status`` to ``location``."""

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            head = await reader.receive_until(b"\r\n\r\n", 65536)
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    await reader.receive_exactly(int(line.split(b":")[1]))
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
