"""Upcasters: functions that turn a stored payload of schema vN into vN+1.

Evolution is additive by default (a new field with a default needs no upcaster). A
breaking change bumps the type's ``schema_version`` and registers ``upcast_vN_vN+1``
here; old rows are never rewritten, they are upcast on read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Payload = dict[str, Any]
Upcaster = Callable[[Payload], Payload]

_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    def register(fn: Upcaster) -> Upcaster:
        _UPCASTERS[(event_type, from_version)] = fn
        return fn

    return register


def upcast(event_type: str, version: int, target: int, payload: Payload) -> Payload:
    if version > target:
        raise LookupError(
            f"{event_type} payload has schema v{version}, newer than this Navi knows (v{target})"
        )
    while version < target:
        step = _UPCASTERS.get((event_type, version))
        if step is None:
            raise LookupError(f"no upcaster for {event_type} v{version} -> v{version + 1}")
        payload = step(payload)
        version += 1
    return payload


@upcaster("user.message", 1)
def upcast_user_message_v1_v2(payload: Payload) -> Payload:
    """v1 was the original Navi's message shape: ``content`` and base64 ``images`` only."""
    out = {k: v for k, v in payload.items() if k != "content"}
    out["text"] = payload.get("content") or ""
    out.setdefault("images", [])
    out.setdefault("files", [])
    return out
