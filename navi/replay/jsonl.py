"""One event as one JSON line: the shape of ``navi events --json`` and of export files.

    {"stream_id": "…", "seq": 3, "event_id": "…", "timestamp": 1700000003.0,
     "run_id": null, "causation_id": null, "type": "user.message", "version": 2,
     "payload": {"type": "user.message", "text": "hi", …}}

``payload`` is the event's JSON exactly as the log stores it; ``version`` is the schema
version of that payload (decoding an older one goes through the upcasters).
"""

from __future__ import annotations

import msgspec

from events.codec import decode, encode
from events.envelope import Recorded
from events.types import tag_of


class EventLine(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    stream_id: str
    seq: int
    event_id: str
    timestamp: float
    type: str
    version: int
    payload: msgspec.Raw
    run_id: str | None = None
    causation_id: str | None = None

    def to_recorded(self, *, position: int = 0) -> Recorded:
        """Decode the payload (upcasting it if older); raises ``EventDecodeError``."""
        event = decode(
            self.type, self.version, bytes(self.payload), stream_id=self.stream_id, seq=self.seq
        )
        return Recorded(
            stream_id=self.stream_id,
            seq=self.seq,
            position=position,
            event_id=self.event_id,
            timestamp=self.timestamp,
            event=event,
            run_id=self.run_id,
            causation_id=self.causation_id,
        )


class _OrderedLine(msgspec.Struct, frozen=True, kw_only=True):
    """``EventLine`` in the documented field order, nulls included."""

    stream_id: str
    seq: int
    event_id: str
    timestamp: float
    run_id: str | None
    causation_id: str | None
    type: str
    version: int
    payload: msgspec.Raw


_encoder = msgspec.json.Encoder()
line_decoder = msgspec.json.Decoder(EventLine)


def event_line(record: Recorded) -> bytes:
    """The record as one JSON line (with its trailing newline)."""
    event = record.event
    line = _OrderedLine(
        stream_id=record.stream_id,
        seq=record.seq,
        event_id=record.event_id,
        timestamp=record.timestamp,
        run_id=record.run_id,
        causation_id=record.causation_id,
        type=tag_of(event),
        version=type(event).schema_version,
        payload=msgspec.Raw(encode(event)),
    )
    return _encoder.encode(line) + b"\n"
