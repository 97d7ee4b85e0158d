"""The envelope of a stored event: what the log knows about an event besides its payload."""

from __future__ import annotations

import msgspec

from events.types import Event, tag_of


class NewEvent(msgspec.Struct, frozen=True, kw_only=True):
    """An event on its way into the log, with the metadata its writer knows."""

    event: Event
    run_id: str | None = None
    causation_id: str | None = None
    # Set only when a log is imported (navi.replay): the event keeps the id and the time
    # it was first recorded with, so its projections are the same byte for byte.
    event_id: str | None = None
    timestamp: float | None = None


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """An event as the log holds it. ``seq`` counts from 1 within a stream, with no gaps."""

    stream_id: str
    seq: int
    position: int
    event_id: str
    timestamp: float
    event: Event
    run_id: str | None = None
    causation_id: str | None = None

    @property
    def type(self) -> str:
        return tag_of(self.event)


def as_new(event: Event | NewEvent) -> NewEvent:
    return event if isinstance(event, NewEvent) else NewEvent(event=event)
