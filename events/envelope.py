"""The envelope of a stored event: what the log knows about an event besides its payload."""

from __future__ import annotations

import msgspec

from events.types import Event, tag_of


# Neither envelope can be part of a reference cycle (an event never refers to its
# envelope), so the garbage collector need not track them: one fewer object per
# streamed chunk for every collection to walk (``gc=False``).
class NewEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An event on its way into the log, with the metadata its writer knows."""

    event: Event
    run_id: str | None = None
    causation_id: str | None = None
    # Set only when a log is imported (navi.replay): the event keeps the id and the time
    # it was first recorded with, so its projections are the same byte for byte.
    event_id: str | None = None
    timestamp: float | None = None

    @property
    def boundary(self) -> bool:
        return type(self.event).boundary


class Recorded(msgspec.Struct, frozen=True, kw_only=True, gc=False):
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


# What a writer hands to the store: a bare event (most of them, and every streamed
# chunk: wrapping each in a ``NewEvent`` would cost more than the rest of its append),
# or a ``NewEvent`` when it carries a run id, a causation id or imported metadata.
Staged = Event | NewEvent


def as_new(event: Staged) -> NewEvent:
    return event if isinstance(event, NewEvent) else NewEvent(event=event)
