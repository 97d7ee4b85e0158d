"""Forks: a new session whose history is another's up to an event, and which then goes
its own way (``POST /sessions/{id}/fork`` with ``at=<seq>``).

The new stream is a copy: it starts with ``session.created(forked_from=<origin>,
forked_at_seq=<seq>, profile_id=<the profile active at seq>, history_copied=True)``,
then holds the origin's events 2..seq (payload, type, time, run, causation and event id
as the origin stores them; only the position is new), so its seqs are those of the
origin up to the fork point: a session's history is its own stream, followed and read
by seq like any other (no reader resolves links). The whole fork is one append: it
exists whole or not at all (the origin's part is read at once, and PostgreSQL takes up
to 16M events in one transaction). A fork of a fork that is still linked (its link was
broken when the start-up upgrade ran: fork_upgrade.py) is refused: its stream is not its
history. A fork taken in the middle of a run would inherit a run that nobody
drives, so the fork closes it at once, as a stop would: ``stop.requested(reason="fork")``,
a ``tool.failed(reason="stopped")`` for each call still waiting for its result, then
``run.stopped(reason="fork")`` (a post-run compression in progress gets
``context.compression_failed`` instead). The fork then rests, ready for a new message:
editing a message and regenerating is a fork at the seq just before it.

The fork keeps the chat's model: ``model`` (the origin's model picker now, which may
have been chosen after the fork point) is recorded in it as ``session.model_chosen``,
so Retry, Regenerate and Edit answer with the model the chat uses.
"""

from __future__ import annotations

import msgspec

from events.envelope import NewEvent, Recorded
from events.errors import ConcurrencyError
from events.store import EventStore
from events.types import (
    ContextCompressionFailed,
    Event,
    RunStopped,
    SessionCreated,
    SessionModelChosen,
    StopRequested,
    ToolFailed,
)
from navi.replay.errors import ReplayError, SeqOutOfRangeError, SessionExistsError
from navi.replay.history import session_head
from navi.replay.projection_set import RunStateInfo
from navi.replay.snapshots import states_at
from navi.run.state import ACTIVE_STATES, RunState, transition
from projections.context import ContextState
from projections.tool_state import ActiveProfile

FORK_REASON = "fork"


class ForkResult(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    forked_from: str
    forked_at_seq: int
    profile_id: str
    head: int  # the last seq of the new session's history
    closed_run: bool  # the fork point was inside a run, which the fork stopped


def copied(record: Recorded) -> NewEvent:
    """``record`` as a fork's copy of it: the same event, id, time, run and cause."""
    return NewEvent(
        event=record.event,
        run_id=record.run_id,
        causation_id=record.causation_id,
        event_id=record.event_id,
        timestamp=record.timestamp,
    )


def closing_events(
    run_state: RunState,
    context: ContextState,
    reason: str = FORK_REASON,
    said: str = "the session was forked",
) -> list[Event]:
    """What ends a run left open at the fork point (nothing if none is). An import
    closes an unfinished run of the file the same way (import_.py): ``reason`` is the
    stop's and the run's, ``said`` the error of what it ends."""
    if run_state == RunState.COMPRESSING_AFTER_RUN:
        return [ContextCompressionFailed(error=f"{said} during compression")]
    if run_state not in ACTIVE_STATES:
        return []
    events: list[Event] = []
    if run_state != RunState.STOPPING:
        events.append(StopRequested(reason=reason))
    events += [
        ToolFailed(call_id=call_id, name=name, reason="stopped", error=said)
        for call_id, name in context.open_calls
    ]
    events.append(RunStopped(reason=reason))
    state: RunState = run_state
    for event in events:  # what we write must be legal: check it before writing
        state = transition(state, event)
    return events


async def fork(
    store: EventStore,
    session_id: str,
    at_seq: int,
    new_session_id: str,
    *,
    title: str = "",
    model: str = "",
) -> ForkResult:
    """Create ``new_session_id`` as a fork of ``session_id`` right after ``at_seq``
    (``model``: the chat's chosen model, kept in the fork)."""
    head = await session_head(store, session_id)
    if not 1 <= at_seq <= head:
        raise SeqOutOfRangeError(session_id, at_seq, head)
    if await store.last_seq(new_session_id) != 0:
        raise SessionExistsError([new_session_id])
    history = await store.read(session_id, to_seq=at_seq)
    root = history[0].event
    if isinstance(root, SessionCreated) and root.parent_stream_id is not None:
        raise ReplayError(
            f"session {session_id!r} is a subagent's stream; fork its parent session instead"
        )
    if isinstance(root, SessionCreated) and root.forked_from and not root.history_copied:
        raise ReplayError(
            f"session {session_id!r} is a fork whose link to {root.forked_from!r} is broken; "
            "it cannot be forked"
        )
    folded = await states_at(
        store,
        session_id,
        at_seq,
        names=("run_state", "context", "active_profile"),
        head=head,
    )
    profile: ActiveProfile = folded.states["active_profile"]
    run: RunStateInfo = folded.states["run_state"]
    if run.error is not None:
        raise ReplayError(f"session {session_id!r} cannot be forked: {run.error}")
    run_state = run.state
    created = SessionCreated(
        profile_id=profile.profile_id or "",
        user_id=root.user_id if isinstance(root, SessionCreated) else "local",
        title=title,
        forked_from=session_id,
        forked_at_seq=at_seq,
        history_copied=True,
    )
    copies = [copied(record) for record in history[1:]]
    closing = closing_events(run_state, folded.states["context"])
    kept: list[Event] = [SessionModelChosen(model=model)] if model else []
    try:
        await store.append(new_session_id, [created, *copies, *closing, *kept], expected_seq=0)
    except ConcurrencyError as exc:
        raise SessionExistsError([new_session_id]) from exc
    return ForkResult(
        session_id=new_session_id,
        forked_from=session_id,
        forked_at_seq=at_seq,
        profile_id=created.profile_id,
        head=at_seq + len(closing) + len(kept),
        closed_run=bool(closing),
    )
