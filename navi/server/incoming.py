"""Reading a client's WebSocket messages: JSON text decoded into a msgspec Struct.

Shared by the live and the replay sockets. A bad message (binary, too large, not JSON,
wrong fields) is answered through ``error`` and skipped: the connection lives on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import msgspec
from starlette.websockets import WebSocket, WebSocketDisconnect

T = TypeVar("T")


async def incoming(
    websocket: WebSocket,
    kind: type[T],
    *,
    max_bytes: int,
    error: Callable[[str], Awaitable[None]],
) -> AsyncIterator[T]:
    """The client's messages, decoded, until it disconnects."""
    decoder = msgspec.json.Decoder(kind)
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
            yield decoder.decode(text)
        except msgspec.ValidationError as exc:
            await error(f"malformed frame: {exc}")
        except msgspec.DecodeError:
            await error("malformed frame: not valid JSON")
