"""The start-up upgrade that copies linked forks (``Navi.open``; ``navi`` runs it on every
start, and it finds nothing to do once done).

Before forks were copies (fork.py), a fork's stream held ``session.created(forked_from=O,
forked_at_seq=k)`` and then only its own events, and readers pieced its history together
from its origin's. Each such stream (``history_copied`` not set) is rewritten once, in
one transaction (``EventStore.rewrite_stream``): its ``session.created`` (now with
``history_copied=True``), a copy of its origin's events 2..k, then its own events
renumbered k+1, k+2, … — the seqs its history gave them, so everything keyed by those
seqs (snapshots, the seqs clients saw) stays valid. Its snapshots are deleted all the
same (a cache: the next fold rebuilds them), since the fork's own ``session.created``
now folds at seq 1 where its origin's used to. Origins are copied before their forks
(a fork of a fork copies an origin that is whole by then).

A fork whose link is broken (its origin is missing, not whole, shorter than the fork
point, or part of a cycle of links) is left as it is and logged: it stays readable as
its own events; start-up goes on. Running the upgrade again changes nothing.
"""

from __future__ import annotations

import msgspec
import structlog
from msgspec.structs import replace

from events.envelope import NewEvent, Recorded
from events.errors import EventStoreError
from events.store import EventStore
from events.types import SessionCreated
from navi.replay.fork import copied
from navi.replay.history import first_event
from navi.replay.snapshots import delete_snapshots

log = structlog.get_logger(__name__)


class UpgradeReport(msgspec.Struct, frozen=True, kw_only=True):
    copied: tuple[str, ...] = ()  # forks rewritten as copies
    broken: dict[str, str] = {}  # forks left linked → why


async def linked_forks(store: EventStore) -> dict[str, SessionCreated]:
    """The streams that are forks still linked to their origin."""
    found: dict[str, SessionCreated] = {}
    for stream_id in sorted(await store.stream_heads()):
        try:
            first = await first_event(store, stream_id)
        except EventStoreError:  # a damaged first event: its session's views say so
            continue
        event = None if first is None else first.event
        if isinstance(event, SessionCreated) and event.forked_from and not event.history_copied:
            found[stream_id] = event
    return found


def origins_first(linked: dict[str, SessionCreated]) -> tuple[list[str], dict[str, str]]:
    """The linked forks in an order that puts each origin before its forks, and those
    left out: a cycle of links (and the forks of one) cannot be copied."""
    order: list[str] = []
    broken: dict[str, str] = {}
    for start in linked:
        path: list[str] = []
        current: str | None = start
        while current in linked and current not in order and current not in broken:
            if current in path:
                for member in path[path.index(current) :]:
                    broken[member] = "its fork links form a cycle"
                break
            path.append(current)
            current = linked[current].forked_from
        for stream_id in reversed(path):
            if stream_id in broken:
                continue
            origin = linked[stream_id].forked_from
            if origin in broken:
                broken[stream_id] = f"its origin {origin!r} cannot be copied"
            else:
                order.append(stream_id)
    return order, broken


async def _copy(store: EventStore, stream_id: str, created: SessionCreated) -> str | None:
    """Rewrite one linked fork as a copy; returns why it cannot be (None: done)."""
    origin, at = created.forked_from, created.forked_at_seq
    assert origin is not None
    if at is None or at < 1:
        return f"forked_at_seq is {at!r}"
    origin_first = await first_event(store, origin)
    if origin_first is None:
        return f"its origin {origin!r} does not exist"
    link = origin_first.event
    if isinstance(link, SessionCreated) and link.forked_from and not link.history_copied:
        return f"its origin {origin!r} is still linked"
    copies = await store.read(origin, after_seq=1, to_seq=at)
    if len(copies) != at - 1:
        return f"forked at seq {at}, but its origin {origin!r} has {len(copies) + 1} events"
    own = await store.read(stream_id)
    events = [
        _kept(own[0], replace(created, history_copied=True)),
        *(copied(r) for r in copies),
        *(copied(r) for r in own[1:]),
    ]
    await store.rewrite_stream(
        stream_id, events, expected_seq=len(own), keys_after=1, keys_moved_by=at - 1
    )
    await delete_snapshots(store, [stream_id])
    log.info(
        "fork_upgrade.copied", session_id=stream_id, origin=origin, at=at, own_events=len(own) - 1
    )
    return None


def _kept(record: Recorded, event: SessionCreated) -> NewEvent:
    return replace(copied(record), event=event)


async def copy_linked_forks(store: EventStore) -> UpgradeReport:
    """Copy every linked fork (see the module doc)."""
    linked = await linked_forks(store)
    if not linked:
        return UpgradeReport()
    order, broken = origins_first(linked)
    done: list[str] = []
    for stream_id in order:
        origin = linked[stream_id].forked_from
        try:
            problem = (
                f"its origin {origin!r} cannot be copied"
                if origin in broken
                else await _copy(store, stream_id, linked[stream_id])
            )
        except (EventStoreError, ValueError) as exc:  # a damaged event, a writer meanwhile
            problem = f"it could not be copied: {exc}"
        if problem is None:
            done.append(stream_id)
        else:
            broken[stream_id] = problem
    for stream_id, problem in broken.items():
        log.warning("fork_upgrade.left_linked", session_id=stream_id, problem=problem)
    log.info("fork_upgrade.done", copied=len(done), left_linked=len(broken))
    return UpgradeReport(copied=tuple(done), broken=broken)
