"""Encoding and decoding of event payloads; one encoder and one decoder, built once.

A payload is the event's JSON (its ``type`` tag included). The schema version is kept
beside it (a column), and an older version goes through the upcasters before decoding.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.errors import EventDecodeError
from events.types import EVENT_TYPES, AnyEvent, Event, tag_of
from events.upcasting import upcast

encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)
_raw_decoder = msgspec.json.Decoder(dict[str, Any])


def encode(event: Event) -> bytes:
    return encoder.encode(event)


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
            event: Event = _decoder.decode(payload)
        else:
            raw = upcast(event_type, version, cls.schema_version, _raw_decoder.decode(payload))
            event = msgspec.convert(raw, AnyEvent)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise EventDecodeError(stream_id, seq, f"corrupt {event_type} payload: {exc}") from exc
    except LookupError as exc:
        raise EventDecodeError(stream_id, seq, str(exc)) from exc
    if tag_of(event) != event_type:
        raise EventDecodeError(
            stream_id, seq, f"payload is a {tag_of(event)!r} but the log says {event_type!r}"
        )
    return event
