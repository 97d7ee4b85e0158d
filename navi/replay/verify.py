"""``navi verify [SESSION]``: fold each log from scratch and compare with what is stored.

For each session, the whole history is folded from the initial states, and at each seq
that has snapshots of the current schema version the folded state is encoded and
compared with the stored payload, byte for byte. Optionally the caller's live states
(the session actor's) are compared with the fold at the head. A difference names the
projection, the snapshot's seq, and the first differing seq: for ``messages``,
``context`` and ``llm_requests`` the seq of the first message (request) that differs
(the smaller of the two seqs, when both sides have a message there);
for the small projections the snapshot's seq (the difference arose after the previous
snapshot that agreed). A log that cannot be folded (an undecodable payload) or that
the run state machine refuses is reported with the seq of the offending event (the
fold goes on past a refused event, so the snapshots are still compared).
Snapshots of another schema version are counted as stale (the next fold rebuilds them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from events.errors import EventDecodeError
from events.store import EventStore
from events.types import SessionCreated
from navi.replay.errors import ReplayError
from navi.replay.history import first_event, session_head
from navi.replay.projection_set import ALL, States, fold_states, initial_states
from navi.replay.snapshot_codec import CODECS, BrokenSnapshotError
from navi.replay.snapshot_store import SnapshotStorage, snapshots_for
from navi.replay.snapshots import MAX_CHAIN, SNAPSHOT_EVERY, Resolved, resolve


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    projection: str
    at_seq: int  # the snapshot's seq (or the head, for live states)
    first_differing_seq: int
    source: str  # "snapshot" or "live"
    detail: str


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    head: int
    snapshots_checked: int
    stale_snapshots: int
    differences: list[Difference]
    error: str | None = None
    error_seq: int | None = None

    @property
    def ok(self) -> bool:
        return not self.differences and self.error is None


def _first_differing_seq(folded: Sequence[Any], stored: Sequence[Any], default: int) -> int:
    for ours, theirs in zip(folded, stored, strict=False):
        if ours != theirs:
            return min(getattr(ours, "seq", default), getattr(theirs, "seq", default))
    longer = folded if len(folded) > len(stored) else stored
    extra = longer[min(len(folded), len(stored)) :]
    return getattr(extra[0], "seq", default) if extra else default


def _items(name: str, state: Any) -> Sequence[Any] | None:
    if name == "messages":
        return state.messages()  # type: ignore[no-any-return]
    if name == "context":
        return state.as_list()  # type: ignore[no-any-return]
    if name == "llm_requests":
        return state.requests.to_list()  # type: ignore[no-any-return]
    return None


def compare(name: str, folded: Any, stored: Any, at_seq: int, source: str) -> Difference | None:
    """``None`` if ``stored`` encodes exactly as ``folded`` does."""
    codec = CODECS[name]
    if codec.encode(folded) == codec.encode(stored):
        return None
    ours, theirs = _items(name, folded), _items(name, stored)
    first = at_seq
    if ours is not None and theirs is not None:
        first = _first_differing_seq(ours, theirs, at_seq)
    return Difference(
        projection=name,
        at_seq=at_seq,
        first_differing_seq=first,
        source=source,
        detail=f"the fold from scratch differs from the stored {name} state",
    )


async def _check_snapshot(
    storage: SnapshotStorage,
    session_id: str,
    seq: int,
    names: tuple[str, ...],
    states: States,
    known: Resolved,
) -> list[Difference]:
    differences = []
    bases = sorted({s for (_, s) in known if s < seq}, reverse=True)[:MAX_CHAIN]
    for name in names:
        try:
            snapshot = await resolve(storage, session_id, (name,), [seq, *bases], known)
        except BrokenSnapshotError as exc:
            differences.append(
                Difference(
                    projection=name,
                    at_seq=seq,
                    first_differing_seq=seq,
                    source="snapshot",
                    detail=f"the stored state cannot be read: {exc}",
                )
            )
            continue
        diff = compare(name, states[name], snapshot.states[name], seq, "snapshot")
        if diff is not None:
            differences.append(diff)
    return differences


async def verify_session(
    store: EventStore,
    session_id: str,
    *,
    live: Mapping[str, Any] | None = None,
    every: int = SNAPSHOT_EVERY,
) -> VerifyReport:
    """Fold ``session_id`` from scratch and compare (see the module doc)."""
    head = await session_head(store, session_id)
    storage = snapshots_for(store)
    current = {name: CODECS[name].schema_version for name in ALL}
    checked: dict[int, list[str]] = {}
    stale = 0
    for row in await storage.rows(session_id, at_most=head):
        if current.get(row.projection) == row.schema_version:
            checked.setdefault(row.seq, []).append(row.projection)
        else:
            stale += 1
    differences: list[Difference] = []
    known: Resolved = {}  # snapshots already read (deltas are read from their bases)
    states = initial_states()
    position = 0
    stops = sorted(checked)
    try:
        for stop in [*stops, head]:
            while position < stop:
                end = min(position + every, stop)
                states = fold_states(
                    states, await store.read(session_id, after_seq=position, to_seq=end)
                )
                position = end
            if stop in checked:
                differences += await _check_snapshot(
                    storage, session_id, stop, tuple(checked[stop]), states, known
                )
    except EventDecodeError as exc:
        return VerifyReport(
            session_id=session_id,
            head=head,
            snapshots_checked=sum(len(v) for k, v in checked.items() if k < position),
            stale_snapshots=stale,
            differences=differences,
            error=str(exc),
            error_seq=exc.seq,
        )
    for name, state in (live or {}).items():
        diff = compare(name, states[name], state, head, "live")
        if diff is not None:
            differences.append(diff)
    run = states["run_state"]
    return VerifyReport(
        session_id=session_id,
        head=head,
        snapshots_checked=sum(len(v) for v in checked.values()),
        stale_snapshots=stale,
        differences=differences,
        error=run.error,
        error_seq=run.error_seq,
    )


async def verify_all(store: EventStore, *, every: int = SNAPSHOT_EVERY) -> list[VerifyReport]:
    """``verify_session`` for every session stream of the store (subagents' included)."""
    reports = []
    for stream_id in sorted(await store.stream_heads()):
        first = await first_event(store, stream_id)
        if first is None or not isinstance(first.event, SessionCreated):
            continue  # not a session (e.g. a memory stream)
        try:
            reports.append(await verify_session(store, stream_id, every=every))
        except ReplayError as exc:
            reports.append(
                VerifyReport(
                    session_id=stream_id,
                    head=0,
                    snapshots_checked=0,
                    stale_snapshots=0,
                    differences=[],
                    error=str(exc),
                )
            )
    return reports
