"""The base of every event and the value types events carry (files, images, tool calls,
todo items). The events themselves are in ``events.types``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event payload. Envelope data (stream, seq, ids, time) is not here."""

    schema_version: ClassVar[int] = 1
    # A boundary event ends a group-commit batch and must be durable before its effect runs.
    boundary: ClassVar[bool] = True


class Chunk(Event, frozen=True, kw_only=True):
    """A streamed piece; many of them go into one transaction."""

    boundary: ClassVar[bool] = False


# ---------------------------------------------------------------- shared value types


class FileRef(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    path: str


class ImageRef(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An image stored once, by content, in the blob store (navi/blobs.py); the log
    keeps only this. ``media_type`` is sniffed from the bytes, never taken from a client.
    ``data`` (base64) lets a reference carry its image itself (Navi does not write it;
    readers take it as it is instead of reading the blob store)."""

    sha256: str
    size: int
    media_type: str = ""
    data: str = ""


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    arguments: dict[str, Any] = {}


class TodoItem(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    text: str
    status: Literal["pending", "in_progress", "done", "failed", "skipped"] = "pending"
    executor: str = "SELF"
    validation: str = ""
    note: str = ""
