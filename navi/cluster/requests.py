"""Session requests as inbox rows and back: ``(kind, payload)`` ↔ the mailbox message,
and a refusal or an answer as the row's ``result``."""

from __future__ import annotations

from typing import Any

import msgspec

from navi.session import messages as m
from navi.session.errors import SessionError

# Requests a node answers for a session it does not own by asking its owner.
ASKABLE: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (m.Pin, m.Rename, m.SwitchProfile, m.Delete, m.Recompress, m.Decide, m.TryAgain)
}


class ForwardedRefusal(SessionError):
    """The owning node's session refused the request: its message and HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def refusal(error: Exception) -> dict[str, Any]:
    status = getattr(error, "status", 400)
    message = getattr(error, "message", None) or str(error)
    return {"error": message, "status": int(status) if isinstance(status, int) else 400}


def raise_refusal(result: dict[str, Any]) -> None:
    raise ForwardedRefusal(str(result["error"]), int(result.get("status", 400)))


def send_payload(message: m.Send) -> dict[str, Any]:
    payload: dict[str, Any] = msgspec.to_builtins(message)
    payload.pop("run_id", None)
    return payload


def send_message(payload: dict[str, Any], *, run_id: str, queue: bool) -> m.Send:
    message = msgspec.convert(payload, m.Send)
    return m.Send(
        text=message.text,
        images=message.images,
        files=message.files,
        mode=message.mode,
        queue=queue,
        run_id=run_id,
    )


def ask_payload(message: object) -> dict[str, Any]:
    return {"type": type(message).__name__, "message": msgspec.to_builtins(message)}


def ask_message(payload: dict[str, Any]) -> object:
    cls = ASKABLE.get(str(payload.get("type")))
    if cls is None:
        raise SessionError(f"this node cannot handle a forwarded {payload.get('type')!r}")
    return msgspec.convert(payload.get("message") or {}, cls)


def answer(reply: Any) -> Any:
    """A reply as JSON (the requests in ``ASKABLE`` answer plain values)."""
    return msgspec.to_builtins(reply)
