"""Tool calls waiting for a person, over REST (the WebSocket has its own frames).

``GET /sessions/{id}/approvals`` lists the calls that wait, in this session and in its
running subagents, as the ``approval_required`` frames a client would get;
``POST /sessions/{id}/approvals/{call_id}`` decides one, named by its call id and the
``stream_id`` where it waits (200; 404 unknown; 409 already decided, or a call id that
more than one waiting call has and no ``stream_id``; 422 a session scope for a call that
can only be approved once). Only the session's owner, or an admin, reaches either.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from events.envelope import Recorded
from events.store import EventStore
from navi.server.frames import running_subagents, waiting_frame
from navi.server.http import body_as, json_response, user_of
from navi.server.protocol import Frame
from navi.server.state import state_of
from projections import waiting

MAX_DEPTH = 8  # subagents of subagents: far more than any profile nests


class DecisionBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    decision: Literal["approve", "deny"]
    scope: Literal["once", "session"] = "once"
    reason: str = msgspec.field(default="")
    # Where the call waits (the frame's ``stream_id``); optional only while no other
    # waiting call of the session's tree has the same call id (else 409).
    stream_id: str = ""


async def awaiting(store: EventStore, session_id: str) -> list[Frame]:
    """The ``approval_required`` frames of every call that waits in ``session_id``'s run
    and in its running subagents (with their seqs)."""
    records = await store.read(session_id)
    calls = waiting.fold(records, root=session_id)
    calls = await _children(store, records, calls, depth=1)
    return [waiting_frame(call, is_subagent=call.stream_id != session_id) for call in calls]


async def _children(
    store: EventStore, records: list[Recorded], calls: waiting.Waiting, *, depth: int
) -> waiting.Waiting:
    """``calls`` with those of the subagents running in ``records`` (and theirs)."""
    for child in running_subagents(records):
        child_records = await store.read(child)
        calls = waiting.fold(child_records, calls)
        if depth < MAX_DEPTH:
            calls = await _children(store, child_records, calls, depth=depth + 1)
    return calls


async def list_approvals(request: Request) -> Response:
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request), admin_too=True)
    return json_response(
        {"session_id": session_id, "approvals": await awaiting(server.navi.store, session_id)}
    )


async def decide_approval(request: Request) -> Response:
    server = state_of(request)
    session_id = request.path_params["session_id"]
    call_id = request.path_params["call_id"]
    user = user_of(request)
    await server.sessions.get(session_id, user, admin_too=True)
    body = await body_as(request, DecisionBody)
    approved = body.decision == "approve"
    recorded_in = await server.navi.decide(
        session_id,
        call_id,
        approved=approved,
        scope=body.scope,
        by=user.id,
        reason=body.reason,
        stream_id=body.stream_id,
    )
    return json_response(
        {
            "session_id": session_id,
            "call_id": call_id,
            "approved": approved,
            "scope": body.scope if approved else "once",
            "by": user.id,
            "stream_id": recorded_in,
        }
    )


ROUTES = [
    Route("/sessions/{session_id}/approvals", list_approvals, methods=["GET"]),
    Route("/sessions/{session_id}/approvals/{call_id}", decide_approval, methods=["POST"]),
]
