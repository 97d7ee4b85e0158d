"""Reading a client's WebSocket messages: JSON text read by one of protocol.py's readers.

Shared by the live and the replay sockets. A bad message (binary, too large, not JSON,
wrong fields, an unknown type) is answered through ``error`` and skipped: the
connection lives on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from starlette.websockets import WebSocket, WebSocketDisconnect

from navi.server.protocol import BadMessage

T = TypeVar("T")


async def incoming(
    websocket: WebSocket,
    read: Callable[[str], T],
    *,
    max_bytes: int,
    error: Callable[[str], Awaitable[None]],
) -> AsyncIterator[T]:
    """The client's messages, decoded, until it disconnects."""
    while True:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            await error("binary frames are not understood: send JSON text")
            continue
        if len(text) > max_bytes:
            await error(f"frame too large ({len(text)} bytes; the limit is {max_bytes})")
            continue
        try:
            message_read = read(text)
        except BadMessage as exc:
            await error(str(exc))
            continue
        yield message_read
