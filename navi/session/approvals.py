"""A person's decision on a tool call that waits for approval, as the session actor
takes it: checked against the log, recorded (``tool.approval_decided``), and the run's
driver woken. A subagent's call waits in the subagent's own session, a child actor of
its parent's: a decision sent to the top-level session is passed down to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from actors import ActorStopped, MailboxFull
from events.types import ToolApprovalDecided, ToolApprovalRequested
from navi.run.state import RunState
from navi.session import messages as m
from navi.session.errors import AlreadyDecided, ApprovalNotFound, BadInput

if TYPE_CHECKING:
    from navi.session.actor import SessionActor

ASK_CHILD_S = 10.0
MAX_REASON = 2000  # characters of a denial's reason the LLM reads


async def decide(session: SessionActor, message: m.Decide) -> str:
    """Record the decision on the call waiting here, or pass it to the running subagent
    whose call it is; answers the stream id where it was recorded."""
    if message.scope not in ("once", "session"):
        raise BadInput(f"scope must be 'once' or 'session', got {message.scope!r}")
    async with session.stream.lock:
        state = session.state
        awaiting = state.progress.awaiting
        waiting = state.run_state is RunState.AWAITING_APPROVAL and awaiting is not None
        if waiting and awaiting.call_id == message.call_id:  # type: ignore[union-attr]
            decision = ToolApprovalDecided(
                call_id=message.call_id,
                approved=message.approved,
                scope=message.scope if message.approved else "once",  # type: ignore[arg-type]
                by=message.by,
                reason=message.reason.strip()[:MAX_REASON],
            )
            await session.stream.record_locked([decision])
            session.approval_decided()
            return session.session_id
    # Call ids are unique within a stream only: a running subagent's waiting call comes
    # before an old call of this session with the same id.
    try:
        return await _ask_subagents(session, message)
    except ApprovalNotFound:
        if await _was_asked(session, message.call_id):
            raise AlreadyDecided(
                f"call {message.call_id!r} was already decided or has ended"
            ) from None
        raise


async def _was_asked(session: SessionActor, call_id: str) -> bool:
    """Whether this session's log ever asked about ``call_id`` (a refusal's wording: a
    bad request only, so reading the log is fine)."""
    for record in await session.deps.store.read(session.session_id):
        event = record.event
        if isinstance(event, ToolApprovalRequested) and event.call_id == call_id:
            return True
    return False


async def _ask_subagents(session: SessionActor, message: m.Decide) -> str:
    decided: AlreadyDecided | None = None
    for name, child in session.children.items():
        if name == session._run_child or child.is_stopped:
            continue
        try:
            reply = await child.ask(message, ASK_CHILD_S)
        except (ActorStopped, MailboxFull, TimeoutError):
            continue
        if isinstance(reply, m.Refusal):
            if isinstance(reply.error, AlreadyDecided):
                decided = reply.error  # another child may still wait on the same id
                continue
            if isinstance(reply.error, ApprovalNotFound):
                continue
            raise reply.error
        if isinstance(reply, str):
            return reply
    if decided is not None:
        raise decided
    raise ApprovalNotFound(f"no call {message.call_id!r} waits for approval in this session")


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
