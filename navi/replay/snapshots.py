"""Projections of long logs, fast: start from the latest snapshot, fold only the rest.

Every ``SNAPSHOT_EVERY`` events of a session's history (seq 1000, 2000, … by default),
the states of every projection of ``projection_set`` are stored (snapshot_store.py),
with the schema version of each (snapshot_codec.py). Snapshots are written by whoever
folds past such a seq: ``states_at`` (and so ``state_at``, ``load_messages``),
``catch_up_snapshots`` (after an import, or by a background task), never by the
projections themselves, which stay pure. A snapshot is only a shortcut: folding from it
gives exactly what folding from scratch gives (``verify`` checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from events.envelope import Recorded
from events.store import EventStore
from navi.replay.errors import SeqOutOfRangeError
from navi.replay.history import session_head
from navi.replay.projection_set import ALL, PROJECTIONS, States, fold_states, initial_states
from navi.replay.snapshot_codec import CODECS, BrokenSnapshotError
from navi.replay.snapshot_store import SnapshotStorage, snapshots_for
from projections.fold import fold
from projections.messages import MessagesState

SNAPSHOT_EVERY = 1000
# Deltas in a row before a snapshot is stored in full again: bounds what a load reads.
MAX_CHAIN = 32
# A page of at least this many events is folded in a worker thread (a few ms or more of
# work): the long folds of an import or a first load, never a small catch-up.
FOLD_IN_THREAD_EVENTS = 200

log = structlog.get_logger(__name__)

# (projection, seq) → (state, number of deltas that lead to it; 0 when stored in full)
Resolved = dict[tuple[str, int], tuple[Any, int]]


@dataclass
class Snapshot:
    seq: int
    states: States
    depths: dict[str, int]


@dataclass
class Folded:
    """The states of ``names`` as of ``seq`` of the session; ``from_seq`` is where the
    fold started (the snapshot used, or 0); ``head`` the session's last seq then."""

    head: int
    seq: int
    states: States
    from_seq: int
    start_states: States
    records: list[Recorded] | None = None  # from_seq+1..seq, when asked for


async def valid_seqs(
    storage: SnapshotStorage,
    session_id: str,
    names: tuple[str, ...],
    *,
    at_most: int,
    limit: int | None = None,
) -> list[int]:
    """Seqs (newest first) with a row of the current schema version for each of ``names``
    (among the newest ``limit`` rows of ``names``, if given)."""
    wanted = {name: CODECS[name].schema_version for name in names}
    valid: dict[int, set[str]] = {}
    rows = await storage.rows(session_id, at_most=at_most, names=names, limit=limit)
    for row in rows:
        if wanted.get(row.projection) == row.schema_version:
            valid.setdefault(row.seq, set()).add(row.projection)
    return [seq for seq in sorted(valid, reverse=True) if len(valid[seq]) == len(wanted)]


async def resolve(
    storage: SnapshotStorage,
    session_id: str,
    names: tuple[str, ...],
    window: list[int],
    known: Resolved | None = None,
) -> Snapshot:
    """The states stored at ``window[0]``, following deltas to their bases among the
    other seqs of ``window``. ``known`` caches states already resolved (and is filled).
    Raises ``BrokenSnapshotError`` when a payload or a base is missing or unreadable."""
    known = {} if known is None else known
    seq = window[0]
    missing = [s for s in window if any((n, s) not in known for n in names)]
    payloads = await storage.payloads(session_id, missing, names) if missing else {}

    def state_of(name: str, at: int) -> tuple[Any, int]:
        if (name, at) in known:
            return known[(name, at)]
        codec = CODECS[name]
        row = payloads.get((name, at))
        if row is None or row[0] != codec.schema_version:
            raise BrokenSnapshotError(f"{name} at seq {at}: no valid row")
        stored = codec.read(row[1])
        if stored.base_seq is None:
            result: tuple[Any, int] = (stored.state, 0)
        else:
            if not stored.base_seq < at:
                raise BrokenSnapshotError(f"{name} at seq {at}: base {stored.base_seq}")
            base, depth = state_of(name, stored.base_seq)
            result = (codec.rebase(stored, base), depth + 1)
        known[(name, at)] = result
        return result

    resolved = {name: state_of(name, seq) for name in names}
    return Snapshot(
        seq=seq,
        states={name: state for name, (state, _) in resolved.items()},
        depths={name: depth for name, (_, depth) in resolved.items()},
    )


async def latest_snapshot(
    storage: SnapshotStorage, session_id: str, names: tuple[str, ...], *, at_most: int
) -> Snapshot | None:
    """The newest readable snapshot of all of ``names`` at a seq ``<= at_most``."""
    # Usually the newest rows hold it (and the bases of its deltas): read only those, and
    # all of them only if that fails.
    window = (MAX_CHAIN + 2) * len(names)
    for limit in (window, None):
        seqs = await valid_seqs(storage, session_id, names, at_most=at_most, limit=limit)
        for index in range(len(seqs)):
            try:
                return await resolve(
                    storage, session_id, names, seqs[index : index + MAX_CHAIN + 1]
                )
            except BrokenSnapshotError as exc:
                log.warning("snapshot.unreadable", session_id=session_id, error=str(exc))
    return None


def _common_prefix(old: list[Any], new: list[Any]) -> int:
    count = 0
    for a, b in zip(old, new, strict=False):
        if a is not b and a != b:
            break
        count += 1
    return count


class SnapshotWriter:
    """Stores the states of a fold at the seqs it passes, as deltas of the previous
    snapshot where the codec allows it (at most ``MAX_CHAIN`` in a row)."""

    def __init__(self, storage: SnapshotStorage, session_id: str, start: Snapshot | None):
        self.storage = storage
        self.session_id = session_id
        # projection → (seq, items of its log field, depth) of the last snapshot
        self._last: dict[str, tuple[int, list[Any] | None, int]] = {}
        if start is not None:
            for name, state in start.states.items():
                items = CODECS[name].log_items(state)
                self._last[name] = (start.seq, items, start.depths[name])

    def payloads(self, seq: int, states: States) -> dict[str, tuple[int, bytes]]:
        result = {}
        for name, state in states.items():
            codec = CODECS[name]
            items = codec.log_items(state)
            base_seq, base_items, depth = self._last.get(name, (0, None, MAX_CHAIN))
            if items is not None and base_items is not None and depth < MAX_CHAIN:
                prefix = _common_prefix(base_items, items)
                payload, depth = codec.delta_payload(state, base_seq, prefix), depth + 1
            else:
                payload, depth = codec.full_payload(state), 0
            self._last[name] = (seq, items, depth)
            result[name] = (codec.schema_version, payload)
        return result


async def states_at(
    store: EventStore,
    session_id: str,
    seq: int | None = None,
    *,
    names: tuple[str, ...] = ALL,
    head: int | None = None,
    save: bool = True,
    every: int = SNAPSHOT_EVERY,
    keep_records: bool = False,
) -> Folded:
    """The states of ``names`` right after seq ``seq`` (the head by default; ``head``:
    the session's last seq, if the caller knows it already).

    Starts from the newest valid snapshot at or before ``seq``; when folding all the
    projections, stores a snapshot at each multiple of ``every`` it passes (``save``).
    """
    if head is None:
        head = await session_head(store, session_id)
    target = head if seq is None else seq
    if not 0 <= target <= head:
        raise SeqOutOfRangeError(session_id, target, head)
    storage = snapshots_for(store)
    found = await latest_snapshot(storage, session_id, names, at_most=target)
    start, states = (found.seq, found.states) if found else (0, initial_states(names))
    writer = SnapshotWriter(storage, session_id, found) if save and set(names) == set(ALL) else None
    start_states = states
    kept: list[Recorded] | None = [] if keep_records else None
    current = start
    while current < target:
        end = min((current // every + 1) * every, target)
        page = await store.read(session_id, after_seq=current, to_seq=end)
        if len(page) != end - current:
            raise RuntimeError(
                f"session {session_id!r}: read {len(page)} events for seqs "
                f"{current + 1}..{end}; the log changed under the fold"
            )
        if len(page) < FOLD_IN_THREAD_EVENTS:
            states = fold_states(states, page)
        else:  # a page of a long fold (an import's): the loop runs on meanwhile
            states = await anyio.to_thread.run_sync(fold_states, states, page)
        if kept is not None:
            kept += page
        current = end
        if writer is not None and current % every == 0:
            # Encoding grows with the session (its whole message list): in a thread too.
            payloads = await anyio.to_thread.run_sync(writer.payloads, current, states)
            await writer.storage.save(session_id, current, payloads)
    return Folded(
        head=head,
        seq=target,
        states=states,
        from_seq=start,
        start_states=start_states,
        records=kept,
    )


async def catch_up_snapshots(
    store: EventStore, session_id: str, *, every: int = SNAPSHOT_EVERY
) -> Folded:
    """Fold the session to its head, storing the snapshots it is missing."""
    return await states_at(store, session_id, every=every)


async def load_projection(
    store: EventStore, session_id: str, name: str, *, every: int = SNAPSHOT_EVERY
) -> Any:
    """The current state of one projection: the latest snapshot plus the events after it.

    When more than ``every`` events follow the latest snapshot, the missing snapshots
    are stored on the way (so the next call is fast)."""
    head = await session_head(store, session_id)
    storage = snapshots_for(store)
    found = await latest_snapshot(storage, session_id, (name,), at_most=head)
    if found is None or head - found.seq >= every:
        folded = await states_at(store, session_id, head=head, every=every)
        return folded.states[name]
    tail = await store.read(session_id, after_seq=found.seq)
    return fold(PROJECTIONS[name], tail, found.states[name])


async def load_messages(
    store: EventStore, session_id: str, *, every: int = SNAPSHOT_EVERY
) -> MessagesState:
    """The ``messages`` projection of the session (``GET /sessions/{id}``)."""
    state: MessagesState = await load_projection(store, session_id, "messages", every=every)
    return state


async def delete_snapshots(store: EventStore, stream_ids: list[str]) -> None:
    await snapshots_for(store).delete(stream_ids)
