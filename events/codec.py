"""Encoding and decoding of event payloads; the encoder and decoders are built once.

A payload is the event's JSON. In the log it is stored without its ``type`` tag, which
the row's own ``type`` column holds (``encode_stored``: some 20 bytes less per event);
rows written with the tag (schema v1) read the same. The schema version is kept beside
it (a column), and an older version goes through the upcasters before decoding.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.errors import EventDecodeError
from events.types import EVENT_TYPES, Event
from events.upcasting import upcast

encoder = msgspec.json.Encoder()
_raw_decoder = msgspec.json.Decoder(dict[str, Any])


# One decoder per event type: the row names the type, and a type's decoder accepts its
# payload with or without the tag (and refuses another type's tag).
_decoders: dict[type[Event], msgspec.json.Decoder[Any]] = {
    cls: msgspec.json.Decoder(cls) for cls in EVENT_TYPES.values()
}
# The length of the ``{"type":"<tag>"`` that every encoded event starts with.
_tag_prefix: dict[type[Event], int] = {
    cls: len(b'{"type":') + len(encoder.encode(tag)) for tag, cls in EVENT_TYPES.items()
}


def encode(event: Event) -> bytes:
    return encoder.encode(event)


def encode_stored(event: Event) -> bytes:
    """The payload as the log stores it: the event's JSON without the type tag."""
    data = encoder.encode(event)
    n = _tag_prefix[type(event)]
    return b"{" + data[n + 1 :] if data[n] == _COMMA else b"{}"


_COMMA = ord(",")


def version_of(event_type: str) -> int:
    cls = EVENT_TYPES.get(event_type)
    return cls.schema_version if cls is not None else 1


def decode(
    event_type: str, version: int, payload: bytes, *, stream_id: str = "?", seq: int = 0
) -> Event:
    """Decode one stored payload, upcasting it first when it was written by an older schema."""
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise EventDecodeError(stream_id, seq, f"unknown event type {event_type!r}")
    try:
        if version == cls.schema_version:
            event: Event = _decoders[cls].decode(payload)
        else:
            raw = upcast(event_type, version, cls.schema_version, _raw_decoder.decode(payload))
            event = msgspec.convert(raw, cls)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventDecodeError(stream_id, seq, f"corrupt {event_type} payload: {exc}") from exc
    except LookupError as exc:
        raise EventDecodeError(stream_id, seq, str(exc)) from exc
    return event
