"""What a person's decision on a waiting tool call is, as the session actor records it
(``SessionActor.decide`` takes it: checked against the log, recorded, and the run's
driver woken).

A decision names one call: its ``call_id`` and the ``stream_id`` where it waits (the
session's own id, or a subagent's stream). Without a stream id it is taken only when
exactly one waiting call of the session's tree has that id; two (two subagents' calls
of older logs, numbered alike) is a refusal (409), never a guess.
"""

from __future__ import annotations

from events.store import EventStore
from events.types import ToolApprovalDecided, ToolApprovalRequested
from navi.ids import is_uuid
from navi.session import messages as m
from navi.session.errors import BadInput

MAX_REASON = 2000  # characters of a denial's reason the LLM reads


def check(message: m.Decide) -> None:
    """Refuse a decision whose scope or stream id cannot be meant."""
    if message.scope not in ("once", "session"):
        raise BadInput(f"scope must be 'once' or 'session', got {message.scope!r}")
    if message.stream_id and not is_uuid(message.stream_id):
        raise BadInput("stream_id must be the id of the stream where the call waits")


def decision(request: ToolApprovalRequested, message: m.Decide) -> ToolApprovalDecided:
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


async def was_asked(store: EventStore, session_id: str, call_id: str) -> bool:
    """Whether this session's log ever asked about ``call_id`` (a refusal's wording: a
    bad request only, so reading the log is fine)."""
    for record in await store.read(session_id):
        event = record.event
        if isinstance(event, ToolApprovalRequested) and event.call_id == call_id:
            return True
    return False
