"""What an imported session may point at: its owner, its fork origin, its subagents'
parent — decided against the store before anything is written (import_.py).

An export file is the importer's data, not a key to anybody else's:

- the importing user owns every imported stream, whatever ``session.created.user_id``
  says in the file;
- ``forked_from`` names the session it was forked from (and, for a file that holds only
  the fork's own events, an export of a fork made before forks were copies, the
  session whose events the import copies in first: import_.py), so it is kept only
  when it names a session the importer owns (not deleted), and ``forked_at_seq`` lies
  within that session's events; otherwise the link is dropped (the session is then
  the file's events alone) and a warning says so;
- a subagent stream's ``parent_stream_id`` decides whose files folder its tools use: a
  parent that is not in the file and not a session of the importer is replaced by the
  imported session, with a warning.
"""

from __future__ import annotations

import msgspec
from msgspec.structs import replace

from events.store import EventStore
from events.types import SessionCreated, SessionDeleted
from navi.ids import is_uuid
from navi.replay.history import first_event


class Links(msgspec.Struct, frozen=True, kw_only=True):
    """Each stream's ``session.created`` as it is to be written, and what was changed."""

    created: dict[str, SessionCreated]
    warnings: tuple[str, ...] = ()


async def owned_by(store: EventStore, session_id: str, user_id: str) -> bool:
    """Whether ``session_id`` is a session (not a subagent's stream) of ``user_id``,
    not deleted."""
    if not is_uuid(session_id):
        return False
    first = await first_event(store, session_id)
    created = None if first is None else first.event
    if not isinstance(created, SessionCreated) or created.parent_stream_id is not None:
        return False
    if created.user_id != user_id:
        return False
    last = await store.read(session_id, after_seq=await store.last_seq(session_id) - 1)
    return not (last and isinstance(last[-1].event, SessionDeleted))


async def _fork_problem(store: EventStore, created: SessionCreated, owner: str) -> str | None:
    """Why the fork link of ``created`` cannot be kept (None: it can)."""
    origin = created.forked_from
    assert origin is not None
    if not await owned_by(store, origin, owner):
        return f"its origin {origin!r} is not a session of yours"
    at = created.forked_at_seq
    head = await store.last_seq(origin)
    if at is None or not 1 <= at <= head:
        return f"it forks at seq {at!r}, but its origin has events 1..{head}"
    return None


async def checked_links(
    store: EventStore, created: dict[str, SessionCreated], session_id: str, owner: str
) -> Links:
    """The ``session.created`` of each stream (``created``, the session's first) with
    ``owner`` as its user and its links checked; see the module doc."""
    fixed: dict[str, SessionCreated] = {}
    warnings: list[str] = []
    for stream_id, event in created.items():
        new = replace(event, user_id=owner) if event.user_id != owner else event
        if new.forked_from is not None:
            problem = await _fork_problem(store, new, owner)
            if problem is not None:
                new = replace(new, forked_from=None, forked_at_seq=None)
                warnings.append(f"stream {stream_id!r}: fork link dropped: {problem}")
        parent = new.parent_stream_id
        if (
            parent is not None
            and parent not in created
            and not await owned_by(store, parent, owner)
        ):
            new = replace(new, parent_stream_id=session_id)
            warnings.append(
                f"stream {stream_id!r}: parent {parent!r} is not a session of yours; "
                "it is linked to the imported session instead"
            )
        fixed[stream_id] = new
    return Links(created=fixed, warnings=tuple(warnings))
