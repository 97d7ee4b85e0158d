"""Upcasters: functions that turn a stored payload of schema vN into vN+1.

Evolution is additive by default (a new field with a default needs no upcaster). A
breaking change bumps the type's ``schema_version`` and registers ``upcast_vN_vN+1``
here; old rows are never rewritten, they are upcast on read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any

from events.types import ImageRef

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


# ---------------------------------------------------------------- inline images
# ``user.message`` images were base64 strings in the log until they went to the blob
# store; the field was widened (``str | ImageRef``), so such rows decode as they are and
# their projections stay byte for byte what they were. Where a reference is needed (the
# LLM's context), an inline image is upcast to one that carries its bytes itself: pure,
# nothing is written anywhere.

# The first bytes of each image type Navi accepts, as they start in base64.
_BASE64_MAGIC = (
    ("iVBORw0KGgo", "image/png"),
    ("/9j/", "image/jpeg"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
    ("Qk", "image/bmp"),
)


def upcast_inline_image(image: str | ImageRef) -> ImageRef:
    """An image of a ``user.message`` as a reference: an inline base64 string (with or
    without a ``data:`` prefix) becomes a reference with its hash, size and media type
    and the base64 kept in ``data``; a reference is returned as it is."""
    if isinstance(image, ImageRef):
        return image
    media_type = ""
    data = image
    if image.startswith("data:"):
        header, _, data = image.partition(",")
        media_type = header.removeprefix("data:").split(";", 1)[0]
    try:
        raw = base64.b64decode(data)
    except (binascii.Error, ValueError):
        raw = data.encode()
    if not media_type:
        media_type = next((m for magic, m in _BASE64_MAGIC if data.startswith(magic)), "")
    return ImageRef(
        sha256=hashlib.sha256(raw).hexdigest(), size=len(raw), media_type=media_type, data=data
    )
