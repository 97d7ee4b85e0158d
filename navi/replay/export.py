"""Export a session as JSON lines (``navi export SESSION > file.jsonl``,
``GET /sessions/{id}/export``).

The file is a header line, then one line per event (jsonl.py), the session's stream
first, then each subagent stream (found through ``subagent.spawned``, recursively) in
the order they were spawned:

    {"navi_export": 1, "session_id": "…", "exported_at": "2024-…+00:00", "events": 812,
     "streams": [{"stream_id": "…", "events": 800, "parent_stream_id": null},
                 {"stream_id": "…", "events": 12, "parent_stream_id": "…"}],
     "forked_from": null, "forked_at_seq": null}

The header's counts let an import tell a truncated file from a whole one. A forked
session's stream holds a copy of its origin's events up to the fork point (fork.py), so
its export is self-contained; the header's ``forked_from`` / ``forked_at_seq`` (as its
``session.created`` says) keep the lineage for the reader.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import msgspec

from events.envelope import Recorded
from events.store import EventStore
from events.types import SessionCreated, SubagentSpawned
from navi.replay.errors import SessionNotFoundError
from navi.replay.jsonl import event_line
from projections.types import iso_time

EXPORT_FORMAT = 1


class StreamInfo(msgspec.Struct, frozen=True, kw_only=True):
    stream_id: str
    events: int
    parent_stream_id: str | None = None


class ExportHeader(msgspec.Struct, frozen=True, kw_only=True):
    navi_export: int
    session_id: str
    exported_at: str
    events: int
    streams: list[StreamInfo]
    forked_from: str | None = None
    forked_at_seq: int | None = None


_encoder = msgspec.json.Encoder()


def _children(records: list[Recorded]) -> list[str]:
    seen: dict[str, None] = {}
    for record in records:
        if isinstance(record.event, SubagentSpawned):
            seen.setdefault(record.event.child_stream_id, None)
    return list(seen)


async def collect(store: EventStore, session_id: str) -> list[tuple[StreamInfo, list[Recorded]]]:
    """The streams of an export, with their events: the session's first, then its
    subagents' streams (depth first, in spawn order)."""
    records = await store.read(session_id)
    if not records:
        raise SessionNotFoundError(session_id)
    streams = [(StreamInfo(stream_id=session_id, events=len(records)), records)]
    done = {session_id}
    pending = _children(records)
    while pending:
        child = pending.pop(0)
        if child in done:
            continue
        done.add(child)
        child_records = await store.read(child)
        if not child_records:
            continue  # spawned, but the subagent never wrote: nothing to export
        created = child_records[0].event
        parent = created.parent_stream_id if isinstance(created, SessionCreated) else None
        info = StreamInfo(stream_id=child, events=len(child_records), parent_stream_id=parent)
        streams.append((info, child_records))
        pending = _children(child_records) + pending
    return streams


async def export_lines(
    store: EventStore, session_id: str, *, now: float | None = None
) -> AsyncIterator[bytes]:
    """The export file, line by line (each with its newline)."""
    streams = await collect(store, session_id)
    first = streams[0][1][0].event
    link = first if isinstance(first, SessionCreated) else SessionCreated(profile_id="")
    header = ExportHeader(
        navi_export=EXPORT_FORMAT,
        session_id=session_id,
        exported_at=iso_time(time.time() if now is None else now),
        events=sum(info.events for info, _ in streams),
        streams=[info for info, _ in streams],
        forked_from=link.forked_from,
        forked_at_seq=link.forked_at_seq if link.forked_from is not None else None,
    )
    yield _encoder.encode(header) + b"\n"
    for _, records in streams:
        for record in records:
            yield event_line(record)
