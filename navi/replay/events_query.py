"""The raw log of a session, filtered: ``navi events SESSION [--after SEQ] [--type T] [--json]``.

Events are those of the session's stream (a fork's holds a copy of its origin's events
up to the fork point: see fork.py). A type
filter is an exact tag (``tool.completed``) or a family: ``tool`` or ``tool.*`` matches
every ``tool.…`` tag. Unknown types are refused, so a typo does not silently match
nothing. Events are read page by page: a long log is never all in memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime

import msgspec

from events.envelope import Recorded
from events.store import EventStore
from events.types import EVENT_TYPES, tag_of
from navi.replay.history import pages, session_head
from navi.replay.jsonl import event_line

PAGE = 1000
SUMMARY_LENGTH = 100


def type_matcher(types: Iterable[str]) -> frozenset[str] | None:
    """The set of tags ``types`` selects (``None``: no filter); raises ``ValueError`` for
    a pattern that matches no known event type."""
    patterns = [t.strip() for t in types if t.strip()]
    if not patterns:
        return None
    selected: set[str] = set()
    for pattern in patterns:
        family = pattern.removesuffix(".*").removesuffix(".")
        matched = {tag for tag in EVENT_TYPES if tag == family or tag.startswith(family + ".")}
        if not matched:
            known = ", ".join(sorted({tag.split(".")[0] for tag in EVENT_TYPES}))
            raise ValueError(f"no event type matches {pattern!r} (families: {known})")
        selected |= matched
    return frozenset(selected)


async def iter_events(
    store: EventStore,
    session_id: str,
    *,
    after: int = 0,
    types: Iterable[str] = (),
    page: int = PAGE,
) -> AsyncIterator[Recorded]:
    """The session's events after seq ``after``, of the selected types."""
    if after < 0:
        raise ValueError(f"after must be 0 or more, not {after}")
    selected = type_matcher(types)
    head = await session_head(store, session_id)
    async for batch in pages(store, session_id, after_seq=after, to_seq=head, size=page):
        for record in batch:
            if selected is None or tag_of(record.event) in selected:
                yield record


async def json_lines(
    store: EventStore, session_id: str, *, after: int = 0, types: Iterable[str] = ()
) -> AsyncIterator[bytes]:
    """``iter_events`` as JSON lines (the export line format, see jsonl.py)."""
    async for record in iter_events(store, session_id, after=after, types=types):
        yield event_line(record)


_summary_encoder = msgspec.json.Encoder()


def event_text(record: Recorded) -> str:
    """One human-readable line: seq, time, type and the payload's fields, cut short."""
    when = datetime.fromtimestamp(record.timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    fields = msgspec.to_builtins(record.event)
    fields.pop("type", None)
    body = _summary_encoder.encode(fields).decode()
    if len(body) > SUMMARY_LENGTH:
        body = body[: SUMMARY_LENGTH - 1] + "…"
    return f"{record.seq:>7}  {when}  {record.type:<26} {body}"


async def text_lines(
    store: EventStore, session_id: str, *, after: int = 0, types: Iterable[str] = ()
) -> AsyncIterator[str]:
    async for record in iter_events(store, session_id, after=after, types=types):
        yield event_text(record)
