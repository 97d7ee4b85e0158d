"""Import an export file (``navi import file.jsonl``, ``POST /sessions/import``).

Every line is checked before anything is written; the first problem is reported with
its line number (``ExportFormatError``) and nothing is imported:

- line 1 is a header of a known format version (export.py); the session id and every
  stream id it lists are UUIDs (so no import can write a ``memory:…`` stream, or name a
  files folder ``..``);
- every other line is an event line (jsonl.py) of a stream the header lists, whose
  payload decodes through ``events.codec`` (older schema versions are upcast), whose
  time is a finite number within ``EARLIEST``..``LATEST`` (2000..2100) and whose
  event, run and causation ids fit the log's columns (64 characters);
- each stream's seqs run 1, 2, 3… without gaps, it starts with ``session.created``, and
  the run state machine accepts every event of it; the session's stream names no
  parent, and every ``subagent.*`` event names a subagent stream of the file;
- each stream holds as many events as the header says (a truncated file is refused).

Then, against the store and still before writing (import_links.py): the importing user
(``owner``) becomes the owner of every stream; a fork link to a session that is not the
importer's is dropped, a subagent's parent that is not in the file nor the importer's
becomes the imported session; each change is a line of ``ImportResult.warnings``. A
kept link of a stream that holds only a fork's own events (exported before forks were
copies: no ``history_copied``) brings a copy of the origin's events 2..k from the store,
the file's own events following at k+1… (``_with_origin``), as a fork holds them.

A session whose stream ids already exist in the store is refused
(``SessionExistsError``); ``new_session_id`` imports it under that id instead, with new
ids for its subagent streams (``navi import --as-new`` passes a fresh UUID): the ids in
``session.created.parent_stream_id`` and ``subagent.*.child_stream_id`` are rewritten to
match, events get new event ids, and keep their times. Events keep their ``event_id``
and ``timestamp`` otherwise, so the imported session's projections are the exported
one's, byte for byte (for a session at rest: see below for a run left unfinished).

An import never resumes anything, and brings no one's approval with it (an export file
is anybody's text: it may end in an approval nobody gave):

- a stream whose run the file leaves unfinished (the session was exported mid-run, or
  the file was made so) gets the events that close it, appended after the file's, as a
  fork closes a run at its fork point (fork.py ``closing_events``):
  ``stop.requested(reason="import")``, a ``tool.failed(reason="stopped")`` per call
  still waiting for its result (an approved call that never started included), then
  ``run.stopped(reason="import")`` (``context.compression_failed`` for a post-run
  compression). Nothing of that run is done again: no call, no LLM request; the
  session rests and takes a new message. ``warnings`` names each stream so closed;
- every ``tool.approval_decided`` is written with ``imported=True``: a ``session``
  scope in it approves nothing in the imported session's later runs
  (navi/run/progress.py); the record of who decided what stays as the file says.

Writing is one atomic append per stream, subagent streams first and the session's last:
a failure part way (another writer took one of the ids in between the check and the
write) can leave subagent streams behind, which no session lists. Then the snapshots
of the imported streams are built.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import msgspec
from msgspec.structs import replace

from events.envelope import NewEvent, Recorded
from events.errors import EventDecodeError
from events.store import EventStore
from events.types import (
    Event,
    SessionCreated,
    SubagentFinished,
    SubagentSpawned,
    ToolApprovalDecided,
)
from navi import ids
from navi.ids import is_uuid
from navi.replay.errors import ExportFormatError, SessionExistsError
from navi.replay.export import EXPORT_FORMAT, ExportHeader
from navi.replay.fork import closing_events
from navi.replay.import_links import checked_links
from navi.replay.jsonl import EventLine, line_decoder
from navi.replay.snapshots import (
    SNAPSHOT_EVERY,
    catch_up_snapshots,
    delete_snapshots,
)
from navi.run.state import (
    INITIAL,
    IllegalTransition,
    RunState,
    event_kind,
    next_state,
    transition,
)
from projections import context

_header_decoder = msgspec.json.Decoder(ExportHeader)

# The times an imported event may carry: 2000-01-01 to 2100-01-01 (UTC). Navi did not
# exist before, and a time no calendar shows (1e300, NaN) would break every view of it.
EARLIEST = 946_684_800.0
LATEST = 4_102_444_800.0
MAX_ID_LENGTH = 64  # the log's event_id, run_id and causation_id columns
IMPORT_REASON = "import"  # the stop.requested / run.stopped of a run the file left open


@dataclass
class _Stream:
    expected: int = 1
    records: list[Recorded] = field(default_factory=list)
    state: RunState = INITIAL


@dataclass
class ParsedExport:
    header: ExportHeader
    streams: dict[str, list[Recorded]]  # in the header's order; the session's first
    # Each stream's run state at the end of the file (an active one: a run to close).
    states: dict[str, RunState] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        return self.header.session_id


class ImportResult(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    streams: dict[str, int]  # stream id (as imported) → events
    events: int
    renamed: dict[str, str]  # exported id → imported id (empty unless imported as new)
    forked_from: str | None = None  # lineage of the exported session (not linked here)
    owner: str = ""  # the user the imported session belongs to
    warnings: tuple[str, ...] = ()  # links dropped or changed (import_links.py), runs closed


def _parse_header(raw: bytes) -> ExportHeader:
    try:
        header = _header_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ExportFormatError(1, f"not a Navi export header: {exc}") from exc
    if header.navi_export != EXPORT_FORMAT:
        raise ExportFormatError(
            1, f"export format {header.navi_export} is not one this Navi reads ({EXPORT_FORMAT})"
        )
    ids = [info.stream_id for info in header.streams]
    if not ids or ids[0] != header.session_id:
        raise ExportFormatError(1, "the header's first stream must be the session's")
    named = [*ids, *(info.parent_stream_id for info in header.streams), header.forked_from]
    for value in named:
        if value is not None and not is_uuid(value):
            raise ExportFormatError(1, f"the header names {value!r}, which is not a UUID")
    if len(set(ids)) != len(ids):
        raise ExportFormatError(1, "the header lists a stream twice")
    if any(info.events < 1 for info in header.streams):
        raise ExportFormatError(1, "the header lists a stream without events")
    if sum(info.events for info in header.streams) != header.events:
        raise ExportFormatError(1, "the header's event count is not the sum of its streams'")
    return header


def _check_line(line: EventLine, number: int) -> None:
    """The envelope's time and ids (the payload is checked by decoding it)."""
    if not math.isfinite(line.timestamp) or not EARLIEST <= line.timestamp < LATEST:
        raise ExportFormatError(
            number, f"the time {line.timestamp!r} is not between the years 2000 and 2100"
        )
    for name, value in (
        ("event_id", line.event_id),
        ("run_id", line.run_id),
        ("causation_id", line.causation_id),
    ):
        if value is not None and not 0 < len(value) <= MAX_ID_LENGTH:
            raise ExportFormatError(number, f"{name} must be 1 to {MAX_ID_LENGTH} characters")


def _check_event(stream: _Stream, record: Recorded, number: int, header: ExportHeader) -> None:
    session_id = header.session_id
    if record.seq != stream.expected:
        raise ExportFormatError(
            number,
            f"stream {record.stream_id!r} jumps to seq {record.seq} (expected {stream.expected})",
        )
    event = record.event
    if record.seq == 1:
        if not isinstance(event, SessionCreated):
            raise ExportFormatError(
                number,
                f"stream {record.stream_id!r} starts with {record.type}, not session.created",
            )
        if record.stream_id != session_id and event.parent_stream_id is None:
            raise ExportFormatError(
                number, f"stream {record.stream_id!r} is not the session's, nor a subagent's"
            )
        if record.stream_id == session_id and event.parent_stream_id is not None:
            raise ExportFormatError(number, "the session's own stream names a parent")
        for linked in (event.parent_stream_id, event.forked_from):
            if linked is not None and not is_uuid(linked):
                raise ExportFormatError(number, f"{linked!r} is not a UUID")
    if isinstance(event, SubagentSpawned | SubagentFinished):
        child = event.child_stream_id
        if child == session_id or all(info.stream_id != child for info in header.streams):
            raise ExportFormatError(
                number, f"{record.type} names {child!r}, which is not a subagent stream of the file"
            )
    try:
        stream.state = next_state(stream.state, event_kind(event), seq=record.seq)
    except IllegalTransition as exc:
        raise ExportFormatError(number, f"stream {record.stream_id!r}: {exc}") from exc


def parse_export(lines: Iterable[bytes | str]) -> ParsedExport:
    """Read and check a whole export file; raises ``ExportFormatError`` at the first
    problem."""
    header: ExportHeader | None = None
    streams: dict[str, _Stream] = {}
    number = 0
    for number, line in enumerate(lines, start=1):
        raw = line.encode() if isinstance(line, str) else line
        raw = raw.rstrip(b"\r\n")
        if not raw.strip():
            raise ExportFormatError(number, "empty line")
        if header is None:
            header = _parse_header(raw)
            streams = {info.stream_id: _Stream() for info in header.streams}
            continue
        try:
            line_record = line_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ExportFormatError(number, f"not an event line: {exc}") from exc
        stream = streams.get(line_record.stream_id)
        if stream is None:
            raise ExportFormatError(
                number, f"stream {line_record.stream_id!r} is not listed in the header"
            )
        _check_line(line_record, number)
        try:
            record = line_record.to_recorded()
        except EventDecodeError as exc:
            raise ExportFormatError(number, exc.reason) from exc
        _check_event(stream, record, number, header)
        stream.records.append(record)
        stream.expected += 1
    if header is None:
        raise ExportFormatError(0, "the file is empty")
    for info in header.streams:
        got = len(streams[info.stream_id].records)
        if got != info.events:
            raise ExportFormatError(
                number + 1,
                f"the file ends, but stream {info.stream_id!r} has {got} of the "
                f"{info.events} events the header announces: it is truncated",
            )
    return ParsedExport(
        header,
        {sid: s.records for sid, s in streams.items()},
        {sid: s.state for sid, s in streams.items()},
    )


def _renamed(event: Event, ids: dict[str, str], parent_default: str | None) -> Event:
    """The event with the stream ids of the export replaced by their new ones. A parent
    that is not in the export becomes ``parent_default`` (for a subagent stream, the
    imported session: its parent may be the origin of a forked session exported as its
    history), or stays as it is (``None``: the session's own stream)."""
    if isinstance(event, SessionCreated) and event.parent_stream_id is not None:
        parent = ids.get(event.parent_stream_id, parent_default or event.parent_stream_id)
        return replace(event, parent_stream_id=parent)
    if isinstance(event, SubagentSpawned | SubagentFinished):
        return replace(event, child_stream_id=ids.get(event.child_stream_id, event.child_stream_id))
    return event


def _imported(event: Event) -> Event:
    """The event as the import writes it: a decision on an approval is marked as one
    taken elsewhere (it approves nothing here; see the module doc)."""
    if isinstance(event, ToolApprovalDecided) and not event.imported:
        return replace(event, imported=True)
    return event


async def _closing(records: list[Recorded], state: RunState) -> list[NewEvent]:
    """The events that close the run the stream leaves unfinished once imported (none if
    it rests), in the name of that run, no earlier than the file's last event."""
    # The fold runs in a worker thread: a big file's would hold up the event loop.
    folded = await anyio.to_thread.run_sync(
        functools.reduce, context.evolve, records, context.INITIAL
    )
    events = closing_events(state, folded, reason=IMPORT_REASON, said="the session was imported")
    run_id = next((r.run_id for r in reversed(records) if r.run_id is not None), None)
    at = max(time.time(), records[-1].timestamp)
    return [NewEvent(event=event, run_id=run_id, timestamp=at) for event in events]


async def _with_origin(
    store: EventStore, records: list[Recorded], created: SessionCreated
) -> tuple[list[Recorded], RunState]:
    """A stream of a file that holds only a fork's own events (exported before forks
    were copies) with its origin's events 2..k copied in from the store, as a fork holds
    them (fork.py), its own events after them; and its run state at the end."""
    at = created.forked_at_seq or 1
    assert created.forked_from is not None  # import_links.py checked the link
    copies = await store.read(created.forked_from, after_seq=1, to_seq=at)
    stream_id = records[0].stream_id
    combined = [
        records[0],
        *(replace(r, stream_id=stream_id) for r in copies),
        *(replace(r, seq=r.seq + at - 1) for r in records[1:]),
    ]
    return combined, await anyio.to_thread.run_sync(_run_state, combined)


def _run_state(records: list[Recorded]) -> RunState:
    state = INITIAL
    for record in records:
        try:
            state = transition(state, record.event)
        except IllegalTransition as exc:
            raise ExportFormatError(
                0, f"stream {record.stream_id!r} does not follow its fork origin: {exc}"
            ) from exc
    return state


class ImportObserver(Protocol):
    """Told what an import writes (the server's session list: navi/server/views.py)."""

    async def will_write(self, streams: list[list[Recorded]]) -> None:
        """Each stream's records as they will be written (ids, seqs, times and events;
        no position yet), before anything is."""

    async def written(self, records: list[Recorded]) -> None:
        """The records as written (positions included), before the snapshots are built."""


def _as_recorded(stream_id: str, events: list[NewEvent]) -> list[Recorded]:
    return [
        Recorded(
            stream_id=stream_id,
            seq=seq,
            position=0,
            event_id=new.event_id or "",
            timestamp=new.timestamp if new.timestamp is not None else math.nan,
            event=new.event,
            run_id=new.run_id,
            causation_id=new.causation_id,
        )
        for seq, new in enumerate(events, start=1)
    ]


def _new_events(
    records: list[Recorded],
    created: SessionCreated,
    ids: dict[str, str] | None,
    parent_default: str | None,
) -> list[NewEvent]:
    """The stream's events to write, its ``session.created`` replaced by ``created``
    (owner and links as checked)."""
    events: list[Event] = [created, *(_imported(r.event) for r in records[1:])]
    if ids is None:
        return [
            NewEvent(
                event=event,
                run_id=r.run_id,
                causation_id=r.causation_id,
                event_id=r.event_id,
                timestamp=r.timestamp,
            )
            for r, event in zip(records, events, strict=True)
        ]
    return [
        NewEvent(
            event=_renamed(event, ids, parent_default),
            run_id=r.run_id,
            causation_id=r.causation_id,
            timestamp=r.timestamp,
        )
        for r, event in zip(records, events, strict=True)
    ]


def _first_events(parsed: ParsedExport) -> dict[str, SessionCreated]:
    created: dict[str, SessionCreated] = {}
    for sid, records in parsed.streams.items():
        event = records[0].event
        assert isinstance(event, SessionCreated)  # parse_export checked it
        created[sid] = event
    return created


async def import_session(
    store: EventStore,
    lines: Iterable[bytes | str],
    *,
    owner: str | None = None,
    new_session_id: str | None = None,
    new_id: Callable[[], str] = ids.new_id,
    snapshot_every: int = SNAPSHOT_EVERY,
) -> ImportResult:
    """Check the whole file, then write it; see the module doc. ``owner`` is the
    importing user (None: the user the file names for its session, for an operator's
    ``navi import`` without ``--user``)."""
    return await import_parsed(
        store,
        parse_export(lines),
        owner=owner,
        new_session_id=new_session_id,
        new_id=new_id,
        snapshot_every=snapshot_every,
    )


async def import_parsed(
    store: EventStore,
    parsed: ParsedExport,
    *,
    owner: str | None = None,
    new_session_id: str | None = None,
    new_id: Callable[[], str] = ids.new_id,
    snapshot_every: int = SNAPSHOT_EVERY,
    observer: ImportObserver | None = None,
) -> ImportResult:
    """``import_session`` of a file ``parse_export`` checked already (the server parses
    a big file in a worker thread, off the event loop). ``observer`` is told what will
    be written, then what was (the server's session list takes it from there)."""
    exported_id = parsed.session_id
    if new_session_id is None:
        ids = None
        target = {sid: sid for sid in parsed.streams}
    else:
        ids = {sid: new_id() for sid in parsed.streams if sid != exported_id}
        ids[exported_id] = new_session_id
        target = ids
    session_id = target[exported_id]
    existing = [target[sid] for sid in parsed.streams if await store.last_seq(target[sid]) != 0]
    if existing:
        hint = "" if new_session_id else "; import it under a new id (--as-new)"
        raise SessionExistsError(existing, hint)
    created = _first_events(parsed)
    user = owner if owner is not None else created[exported_id].user_id
    links = await checked_links(store, created, session_id, user)
    firsts, streams, states = dict(links.created), dict(parsed.streams), dict(parsed.states)
    for sid, first in links.created.items():
        if first.forked_from is not None and not first.history_copied:
            streams[sid], states[sid] = await _with_origin(store, streams[sid], first)
            firsts[sid] = replace(first, history_copied=True)
    closing = {sid: await _closing(records, states[sid]) for sid, records in streams.items()}
    closed = tuple(
        f"stream {target[sid]!r}: its unfinished run was stopped (an import never resumes one)"
        for sid in parsed.streams
        if closing[sid]
    )
    await delete_snapshots(store, list(target.values()))
    # Subagent streams first, the session's last: until it is written, nothing lists them.
    order = list(reversed(list(parsed.streams)))
    staged: dict[str, list[NewEvent]] = {}
    for sid in order:
        parent_default = None if sid == exported_id else session_id
        events = await anyio.to_thread.run_sync(
            _new_events, streams[sid], firsts[sid], ids, parent_default
        )
        staged[sid] = [*events, *closing[sid]]
    if observer is not None:
        await observer.will_write([_as_recorded(target[sid], staged[sid]) for sid in order])
    written: list[Recorded] = []
    for sid in order:
        written += await store.append(target[sid], staged[sid], expected_seq=0)
    if observer is not None:
        await observer.written(written)
    for sid in parsed.streams:
        await catch_up_snapshots(store, target[sid], every=snapshot_every)
    return ImportResult(
        session_id=session_id,
        streams={target[sid]: len(r) + len(closing[sid]) for sid, r in streams.items()},
        events=sum(len(r) + len(closing[sid]) for sid, r in streams.items()),
        renamed={} if ids is None else dict(ids),
        forked_from=parsed.header.forked_from,
        owner=user,
        warnings=(*links.warnings, *closed),
    )
