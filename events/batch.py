"""A batch of appends and what it writes: each event's seq, position, id and time.

``plan`` runs in the committer's transaction, under the store's write lock, on the
heads and last position it has just read: what it decides is what the log holds.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from events.codec import encode_stored
from events.envelope import NewEvent, Recorded, Staged
from events.errors import ConcurrencyError
from events.types import Event, tag_of

Clock = Callable[[], float]
IdFactory = Callable[[], str]
NewKey = tuple[str, str, int, int]  # stream, idempotency key, first seq, last seq


class EventIds:
    """Unique ids in UUID form, cheaply: a random 80-bit prefix per process and a counter.
    (``uuid4()`` per streamed chunk costs more than the rest of an append.)"""

    # The counter starts at 16**11 so that ``hex()`` always gives the 12 digits of the
    # UUID's last group without padding (a third of the cost of a format spec).
    _FIRST = 16**11

    def __init__(self) -> None:
        p = uuid.uuid4().hex[:20]
        self._head = f"{p[:8]}-{p[8:12]}-4{p[13:16]}-{p[16:20]}-"
        # SQLite may plan a batch in a worker thread: each step of an itertools.count
        # is one call into C, which no other thread interrupts (the GIL), so no number
        # is given twice without a lock. A batch's ids need not be consecutive.
        self._count = itertools.count(self._FIRST)

    def __call__(self) -> str:
        return self._head + hex(next(self._count))[2:]

    def many(self, n: int) -> list[str]:
        head = self._head
        return [head + hex(i)[2:] for i in itertools.islice(self._count, n)]


new_uuid = EventIds()


@dataclass(eq=False)
class AppendRequest:
    stream_id: str
    events: list[Staged]
    expected_seq: int
    idempotency_key: str | None
    done: anyio.Event = field(default_factory=anyio.Event)
    result: list[Recorded] | None = None
    error: BaseException | None = None
    # Set by the committer when the idempotency key was already used: (first, last) seq.
    replay_range: tuple[int, int] | None = None


@dataclass
class Planned:
    """The records one request writes, decided under the store's write lock."""

    request: AppendRequest
    records: list[Recorded]


def plan(
    batch: list[AppendRequest],
    heads: dict[str, int],
    position: int,
    used_keys: dict[tuple[str, str], tuple[int, int]],
    *,
    now: float,
    new_id: IdFactory,
    rows: list[Row] | None = None,
) -> tuple[list[Planned], list[NewKey]]:
    """Decide which requests are written and with which seqs.

    ``heads`` holds each stream's current last seq (and is advanced); requests whose
    ``expected_seq`` is stale get a ``ConcurrencyError`` and write nothing; a request
    whose idempotency key is in ``used_keys`` gets its earlier range. Returns the plan
    and the new idempotency keys to record; a SQL store passes ``rows`` to receive
    each record as a row of ``ROW_COLUMNS`` too (payload encoded).
    """
    planned: list[Planned] = []
    new_keys: list[NewKey] = []
    for request in batch:
        key = request.idempotency_key
        if key is not None:
            used = used_keys.get((request.stream_id, key))
            if used is not None:
                request.replay_range = used
                continue
        head = heads.get(request.stream_id, 0)
        if request.expected_seq != head:
            request.error = ConcurrencyError(request.stream_id, request.expected_seq, head)
            continue
        records = _records(request, head, position, now, new_id, rows)
        head += len(records)
        position += len(records)
        heads[request.stream_id] = head
        if key is not None:
            rng = (records[0].seq, records[-1].seq)
            used_keys[(request.stream_id, key)] = rng
            new_keys.append((request.stream_id, key, *rng))
        planned.append(Planned(request, records))
    return planned, new_keys


def _records(
    request: AppendRequest,
    head: int,
    position: int,
    now: float,
    new_id: IdFactory,
    rows: list[Row] | None,
) -> list[Recorded]:
    """The records of one request, after ``head`` and ``position`` (and their rows).
    The hot loop of every append, once per streamed chunk: kept to the bare minimum."""
    stream_id = request.stream_id
    events = request.events
    ids = new_id.many(len(events)) if isinstance(new_id, EventIds) else None
    records = []
    for i, item in enumerate(events):
        seq = head + i + 1
        pos = position + i + 1
        if type(item) is NewEvent:
            event = item.event
            event_id = item.event_id or (new_id() if ids is None else ids[i])
            timestamp = now if item.timestamp is None else item.timestamp
            run_id, causation_id = item.run_id, item.causation_id
        else:
            event = item  # type: ignore[assignment]
            event_id = new_id() if ids is None else ids[i]
            timestamp, run_id, causation_id = now, None, None
        records.append(
            Recorded(
                stream_id=stream_id,
                seq=seq,
                position=pos,
                event_id=event_id,
                timestamp=timestamp,
                event=event,
                run_id=run_id,
                causation_id=causation_id,
            )
        )
        if rows is not None:
            cls = type(event)
            type_version = _TYPE_AND_VERSION.get(cls)
            if type_version is None:
                type_version = _TYPE_AND_VERSION[cls] = (tag_of(event), cls.schema_version)
            rows.append(
                (
                    pos,
                    stream_id,
                    seq,
                    event_id,
                    *type_version,
                    timestamp,
                    run_id,
                    causation_id,
                    _encode(event),
                )
            )
    return records


# A stored row, in this column order.
ROW_COLUMNS = (
    "position",
    "stream_id",
    "seq",
    "event_id",
    "type",
    "version",
    "timestamp",
    "run_id",
    "causation_id",
    "payload",
)
Row = tuple[Any, ...]
_TYPE_AND_VERSION: dict[type[Event], tuple[str, int]] = {}
_encode = encode_stored
