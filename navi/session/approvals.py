"""A person's decision on a tool call that waits for approval, as the session actor
takes it: checked against the log, recorded (``tool.approval_decided``), and the run's
driver woken. A subagent's call waits in the subagent's own session, a child actor of
its parent's: a decision sent to the top-level session is passed down to it.

A decision names one call: its ``call_id`` and the ``stream_id`` where it waits (the
session's own id, or a subagent's stream). Without a stream id it is taken only when
exactly one waiting call of the session's tree has that id; two (two subagents' calls
of older logs, numbered alike) is a refusal (409), never a guess.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from actors import ActorStopped, MailboxFull
from events.types import ToolApprovalDecided, ToolApprovalRequested
from navi.ids import is_uuid
from navi.run.state import RunState
from navi.session import messages as m
from navi.session.errors import AlreadyDecided, AmbiguousCall, ApprovalNotFound, BadInput

if TYPE_CHECKING:
    from actors import ActorRef
    from navi.session.actor import SessionActor

ASK_CHILD_S = 10.0
MAX_REASON = 2000  # characters of a denial's reason the LLM reads


async def decide(session: SessionActor, message: m.Decide) -> str:
    """Record the decision on the call it names, here or in a running subagent; answers
    the stream id where it was recorded."""
    if message.scope not in ("once", "session"):
        raise BadInput(f"scope must be 'once' or 'session', got {message.scope!r}")
    if message.stream_id:
        if not is_uuid(message.stream_id):
            raise BadInput("stream_id must be the id of the stream where the call waits")
        return await _decide_in(session, message)
    streams = await waiting_streams(session, message.call_id)
    if len(streams) > 1:
        raise AmbiguousCall(
            f"{len(streams)} calls {message.call_id!r} wait for approval (in streams "
            f"{', '.join(streams)}): send the stream_id of the one you decide"
        )
    if streams:
        return await _decide_in(session, replace(message, stream_id=streams[0]))
    if await _was_asked(session, message.call_id):
        raise AlreadyDecided(f"call {message.call_id!r} was already decided or has ended")
    raise ApprovalNotFound(f"no call {message.call_id!r} waits for approval in this session")


async def waiting_streams(session: SessionActor, call_id: str) -> tuple[str, ...]:
    """The streams of this session's tree where a call ``call_id`` waits for a decision."""
    found: list[str] = []
    state = session.state
    awaiting = state.progress.awaiting
    waiting = state.run_state is RunState.AWAITING_APPROVAL and awaiting is not None
    if waiting and awaiting.call_id == call_id:  # type: ignore[union-attr]
        found.append(session.session_id)
    for child in _subagents(session):
        try:
            reply = await child.ask(m.WaitingOn(call_id), ASK_CHILD_S)
        except (ActorStopped, MailboxFull, TimeoutError):
            continue
        if isinstance(reply, tuple):
            found.extend(reply)
    return tuple(found)


async def _decide_in(session: SessionActor, message: m.Decide) -> str:
    """Decide the call in the stream ``message.stream_id`` names: this one, or one of
    its running subagents' (or theirs)."""
    if message.stream_id == session.session_id:
        return await _decide_here(session, message)
    for child in _subagents(session):
        try:
            reply = await child.ask(message, ASK_CHILD_S)
        except (ActorStopped, MailboxFull, TimeoutError):
            continue
        if isinstance(reply, m.Refusal):
            if isinstance(reply.error, ApprovalNotFound):
                continue  # not in that child's tree
            raise reply.error
        if isinstance(reply, str):
            return reply
    raise ApprovalNotFound(
        f"no call {message.call_id!r} waits for approval in stream {message.stream_id!r} "
        "of this session"
    )


async def _decide_here(session: SessionActor, message: m.Decide) -> str:
    async with session.stream.lock:
        state = session.state
        awaiting = state.progress.awaiting
        waiting = state.run_state is RunState.AWAITING_APPROVAL and awaiting is not None
        if waiting and awaiting.call_id == message.call_id:  # type: ignore[union-attr]
            await session.stream.record_locked([_decision(awaiting, message)])  # type: ignore[arg-type]
            session.approval_decided()
            return session.session_id
    if await _was_asked(session, message.call_id):
        raise AlreadyDecided(f"call {message.call_id!r} was already decided or has ended")
    raise ApprovalNotFound(f"no call {message.call_id!r} waits for approval in this session")


def _decision(request: ToolApprovalRequested, message: m.Decide) -> ToolApprovalDecided:
    """The decision as recorded: a session scope approves what the request's card said
    (its scope key and label), and only a call that offered one may get it."""
    scope = message.scope if message.approved else "once"
    if scope == "session" and request.once_only:
        raise BadInput(
            f"call {message.call_id!r} ({request.name}) can only be approved once: "
            "send scope 'once'"
        )
    session_scope = scope == "session"
    return ToolApprovalDecided(
        call_id=message.call_id,
        approved=message.approved,
        scope=scope,  # type: ignore[arg-type]
        by=message.by,
        reason=message.reason.strip()[:MAX_REASON],
        scope_key=request.scope_key if session_scope else "",
        scope_label=request.scope_label if session_scope else "",
    )


def _subagents(session: SessionActor) -> list[ActorRef[object]]:
    """The running subagents' actors (children other than the run's)."""
    return [
        child
        for name, child in session.children.items()
        if name != session._run_child and not child.is_stopped
    ]


async def _was_asked(session: SessionActor, call_id: str) -> bool:
    """Whether this session's log ever asked about ``call_id`` (a refusal's wording: a
    bad request only, so reading the log is fine)."""
    for record in await session.deps.store.read(session.session_id):
        event = record.event
        if isinstance(event, ToolApprovalRequested) and event.call_id == call_id:
            return True
    return False


class DecisionWait:
    """Where a run's driver waits for a decision: woken when one is recorded, by a stop
    (the run's stop signal), or at its deadline."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()

    async def wait(self, session: SessionActor, deadline: float) -> None:
        self._event = event = anyio.Event()
        if session.state.run_state is not RunState.AWAITING_APPROVAL:
            return  # decided (or stopped) before the driver got here
        with session.stop_signal.scope(deadline):
            await event.wait()
