"""The REST API (shapes in API-SHAPES.md / docs/api.md)."""

from __future__ import annotations

import shutil
from typing import Any, Literal

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from events.codec import encode
from events.envelope import Recorded
from events.types import FileRef
from navi.grants import missing_grants
from navi.llm.auto import model_choice_of
from navi.llm.diagnose import is_demo_model
from navi.server.blobs import release_deleted
from navi.server.http import HTTPError, body_as, json_response, user_of
from navi.server.search import search_sessions
from navi.server.state import state_of
from navi.session import messages as m
from navi.session.errors import StorageFull
from navi.session.input import MESSAGE_BODY_BYTES
from projections.types import iso_time
from tools.base import Tool

STORAGE_POLL_S = 0.25  # how often a waiting POST .../messages looks for a full disk


class CreateSession(msgspec.Struct, kw_only=True):
    profile_id: str | None = None
    title: str = ""
    # "cli": a `navi chat "…"` one-shot (the sidebar groups it); "" any other chat.
    origin: Literal["", "cli"] = ""


class PinBody(msgspec.Struct, kw_only=True):
    pinned: bool | None = None


class RenameBody(msgspec.Struct, kw_only=True):
    title: str


class ProfileBody(msgspec.Struct, kw_only=True):
    profile_id: str


class MessageBody(msgspec.Struct, kw_only=True):
    content: str
    images: list[str] = []
    files: list[FileRef] = []
    queue: bool = False


def summary_json(s: Any) -> dict[str, Any]:
    out = msgspec.to_builtins(s)
    out.pop("deleted", None)
    return out  # type: ignore[no-any-return]


async def health(request: Request) -> Response:
    """Health check: ``{"status": "ok"}`` plus the LLM backend and model in use, its
    context window, ``demo_model`` (true on the embedded SmolLM2-135M), and why that
    model (``model_reason``, "" when it is the configured one, installed) and whether it
    is missing from the server (``model_missing``), and the node's load: runs streaming,
    runs queued, the limit (``NAVI_MAX_LIVE_RUNS``), and ``storage``: "ok", or "full"
    while the database's disk refuses writes (``status`` is "degraded" then). Public:
    model names and counts only, never URLs or paths."""
    navi = state_of(request).navi
    choice = model_choice_of(navi.backend)
    full = navi.store.storage_full()
    return json_response(
        {
            "status": "degraded" if full else "ok",
            "storage": "full" if full else "ok",
            "backend": navi.backend.name,
            "model": navi.backend.model,
            "demo_model": is_demo_model(navi.backend),
            "context_window": navi.context_window(),
            "model_reason": choice.reason if choice is not None else "",
            "model_missing": choice.missing if choice is not None else False,
            "load": navi.live_runs.load(),
        }
    )


async def list_profiles(request: Request) -> Response:
    """All agent profiles; ``missing_grants`` names what the caller's account lacks to use
    one (``usable`` is false then, and ``POST /sessions`` in it answers 403)."""
    navi = state_of(request).navi
    user = user_of(request)
    listed = []
    for p in navi.profiles.all():
        missing = missing_grants(user, p)
        listed.append(
            {
                "id": p.id,
                "name": p.name,
                "description": p.description,
                "enabled_tools": list(p.enabled_tools),
                "llm_backend": p.llm_backend or navi.backend.name,
                "model": p.model or navi.backend.model,
                "usable": not missing,
                "missing_grants": list(missing),
            }
        )
    return json_response(listed)


def default_approval(tool: Tool, operator: str) -> str:
    """What a call of ``tool`` does when no profile and no user setting names it:
    ``auto``, ``ask``, ``deny``, or ``varies`` (its calls differ, as file reads and
    writes do); the operator's ``NAVI_TOOL_APPROVAL`` first (docs/approvals.md)."""
    if operator in ("auto", "ask"):
        return operator
    if type(tool).approval_for is not Tool.approval_for:
        return "varies"
    return tool.approval


async def list_tools(request: Request) -> Response:
    """The tools the caller may use (built-in, user and MCP tools) with their JSON schemas;
    ``?profile_id=`` narrows them to what a session of that profile may call."""
    navi = state_of(request).navi
    tools = navi.tools
    user = user_of(request)
    names = [t.name for t in tools.tools()]
    profile_id = request.query_params.get("profile_id")
    if profile_id:
        profile = navi.profiles.get(profile_id)
        names = tools.names_for_profile(profile.enabled_tools, profile_id=profile.id)
    found = (
        tools.get(name) for name in names if user.may_use(name, restricted=tools.is_user_tool(name))
    )
    return json_response(
        [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "idempotent": t.idempotent,
                "builtin": tools.is_builtin(t.name),
                # builtin, user, or mcp:<server> for an MCP server's tool.
                "source": tools.source_of(t.name),
                "default_approval": default_approval(t, navi.settings.tool_approval),
            }
            for t in found
            if t is not None
        ]
    )


async def create_session(request: Request) -> Response:
    """Create a session: ``{"profile_id"?}`` → 201 ``{session_id, profile_id, created_at}``."""
    server = state_of(request)
    body = await body_as(request, CreateSession, empty_ok=True)
    user = user_of(request)
    async with server.new_session(user):
        session_id = await server.navi.create_session(
            body.profile_id, user_id=user.id, title=body.title, origin=body.origin
        )
    if server.navi.user_settings is not None:
        # The model the settings page names for new chats, in the chat's own log.
        model = (await server.navi.user_settings.get(user.id)).model
        if model:
            await server.navi.sessions.ask(session_id, m.ChooseModel(model=model))
    summary = await server.sessions.get(session_id, user)
    server.on_session_created()
    return json_response(
        {
            "session_id": session_id,
            "profile_id": summary.profile_id,
            "created_at": summary.created_at,
        },
        201,
    )


async def list_sessions(request: Request) -> Response:
    """Sessions, pinned first, then by last activity; ``?q=`` searches titles and the text
    of every message, each hit with ``match`` (the found words in context)."""
    server = state_of(request)
    query = request.query_params.get("q", "").strip()
    user = user_of(request)
    if not query:
        return json_response([summary_json(s) for s in await server.sessions.listing(user)])
    hits = await search_sessions(server.sessions, server.navi.store, user, query)
    return json_response([{**summary_json(hit.summary), "match": hit.match} for hit in hits])


async def get_session(request: Request) -> Response:
    """One session with its display history (the ``messages`` projection)."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    summary = await server.sessions.get(session_id, user_of(request))
    log = await server.load(session_id)
    context = log.context()
    out = summary_json(summary)
    out.update(
        context_token_count=context.token_count,
        max_context_tokens=server.max_context_tokens,
        last_seq=log.last_seq,
        run_active=log.run_active(),
        run_state=log.run_state().value,
        messages=msgspec.to_builtins(log.messages()),
    )
    return json_response(out)


async def get_context(request: Request) -> Response:
    """What the LLM sees (debugging): the ``context`` projection."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    context = (await server.load(session_id)).context()
    return json_response(
        {
            "session_id": session_id,
            "token_count": context.token_count,
            "messages": msgspec.to_builtins(context.as_list()),
        }
    )


async def pin_session(request: Request) -> Response:
    """Pin or unpin: ``{"pinned": bool}``; without a body it toggles."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    body = await body_as(request, PinBody, empty_ok=True)
    pinned = await server.navi.sessions.ask(session_id, m.Pin(pinned=body.pinned))
    return json_response({"session_id": session_id, "pinned": pinned})


async def rename_session(request: Request) -> Response:
    """Rename: ``{"title": "…"}``."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    body = await body_as(request, RenameBody)
    await server.navi.sessions.ask(session_id, m.Rename(title=body.title))
    return json_response({"session_id": session_id, "title": body.title.strip()[:200]})


async def switch_profile(request: Request) -> Response:
    """Switch the session's profile: ``{"profile_id": "…"}`` (applies at the next LLM call)."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    body = await body_as(request, ProfileBody)
    profile_id = await server.navi.sessions.ask(session_id, m.SwitchProfile(body.profile_id))
    return json_response({"session_id": session_id, "profile_id": profile_id})


async def delete_session(request: Request) -> Response:
    """Delete a session (its log keeps a tombstone) and its uploaded files."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    await server.navi.sessions.ask(session_id, m.Delete())
    shutil.rmtree(server.navi.files_dir(session_id), ignore_errors=True)
    if server.navi.blobs is not None:
        await release_deleted(server, session_id, server.navi.blobs)
    return json_response({"session_id": session_id, "deleted": True})


async def post_message(request: Request) -> Response:
    """Run a turn without streaming; returns its final text. 409 while a run is active."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    body = await body_as(request, MessageBody, max_bytes=MESSAGE_BODY_BYTES)
    if server.navi.store.storage_full():
        raise StorageFull()
    reply = await server.navi.send(
        session_id,
        body.content,
        tuple(body.images),
        tuple(body.files),
        mode="run",
        queue=body.queue,
    )
    end = await _end_unless_full(server.navi, session_id, reply)
    event = end.event
    content = getattr(event, "content", "")
    return json_response(
        {
            "session_id": session_id,
            "run_id": reply.run_id,
            "status": end.type.removeprefix("run."),
            "content": content,
            "error": getattr(event, "error", None),
        }
    )


async def _end_unless_full(navi: Any, session_id: str, reply: m.RunStartedReply) -> Recorded:
    """The run's end, or ``StorageFull`` once the disk refuses its writes: the run then
    waits (resumed when there is room) and the caller hears why instead of nothing."""
    end: list[Recorded] = []
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            end.append(await navi.wait_for_end(session_id, reply))
            tg.cancel_scope.cancel()

        tg.start_soon(wait)
        # A poll, not an event: the store's flag is a plain attribute, read cheaply.
        while not navi.store.storage_full():  # noqa: ASYNC110
            await anyio.sleep(STORAGE_POLL_S)
        tg.cancel_scope.cancel()
    if not end:
        raise StorageFull()
    return end[0]


async def stop_session(request: Request) -> Response:
    """Stop the running turn (cooperatively: a message to the session)."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    stopped = await server.navi.stop(session_id)
    return json_response({"session_id": session_id, "stopped": stopped})


async def try_again(request: Request) -> Response:
    """Go on now with the run that waits for the model's server (409 if none waits)."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    await server.navi.try_again(session_id)
    return json_response({"session_id": session_id, "trying": True})


async def session_events(request: Request) -> Response:
    """The raw log as JSON lines; ``?after=<seq>``."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    try:
        after = int(request.query_params.get("after", "0"))
    except ValueError:
        raise HTTPError(400, "after must be a whole number") from None
    records = await server.navi.store.read(session_id, after_seq=max(0, after))

    async def lines() -> Any:
        for r in records:
            yield (
                b'{"stream_id":%s,"seq":%d,"event_id":"%s","timestamp":"%s","run_id":%s,'
                b'"type":"%s","event":%s}\n'
                % (
                    msgspec.json.encode(r.stream_id),
                    r.seq,
                    r.event_id.encode(),
                    iso_time(r.timestamp).encode(),
                    msgspec.json.encode(r.run_id),
                    r.type.encode(),
                    encode(r.event),
                )
            )

    return StreamingResponse(lines(), media_type="application/x-ndjson")


ROUTES = [
    Route("/health", health, methods=["GET"]),
    Route("/agents/profiles", list_profiles, methods=["GET"]),
    Route("/agents/tools", list_tools, methods=["GET"]),
    Route("/sessions", create_session, methods=["POST"]),
    Route("/sessions", list_sessions, methods=["GET"]),
    Route("/sessions/{session_id}", get_session, methods=["GET"]),
    Route("/sessions/{session_id}", rename_session, methods=["PATCH"]),
    Route("/sessions/{session_id}", delete_session, methods=["DELETE"]),
    Route("/sessions/{session_id}/context", get_context, methods=["GET"]),
    Route("/sessions/{session_id}/pin", pin_session, methods=["PATCH"]),
    Route("/sessions/{session_id}/profile", switch_profile, methods=["PATCH"]),
    Route("/sessions/{session_id}/messages", post_message, methods=["POST"]),
    Route("/sessions/{session_id}/stop", stop_session, methods=["POST"]),
    Route("/sessions/{session_id}/try-again", try_again, methods=["POST"]),
    Route("/sessions/{session_id}/events", session_events, methods=["GET"]),
]
